package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// watcher follows the change feed and prints the changes of the selected
// machines.
type watcher struct {
	a        *app
	c        *client.Client
	f        machineFilter
	patterns []string
	json     bool
	all      bool // nothing narrows the selection
	// selected holds the machines in the selection as the list or the
	// last change seen of each left them; listed says whether it started
	// from a list (then a machine not in it is not selected).
	selected map[string]bool
	listed   bool
	// widths of the human columns but the last. Time, change, state and
	// previous state are as wide as their widest value from the start, and
	// the id as the widest id listed, so that a later line never shifts
	// them; an id or a user wider than any before widens its column.
	widths []int
}

// changeTypes are the feed's kinds of change (client.SlaveChange.Type).
var changeTypes = []string{"added", "stateChanged", "descriptionChanged", "deleted"}

// Columns of a watch's human line.
const (
	colTime = iota
	colID
	colChange
	colState
	colPrevious
	colUser
	colMessage
)

// initialWidths are the widths of the columns whose values are known in
// advance: a time as when prints it, a change type, a state.
func initialWidths() []int {
	widths := make([]int, colMessage) // the message is not padded
	widths[colTime] = len("2006-01-02 15:04:05")
	for _, c := range changeTypes {
		widths[colChange] = max(widths[colChange], len(c))
	}
	for _, st := range client.States {
		widths[colState] = max(widths[colState], len(st))
	}
	widths[colPrevious] = widths[colState]
	return widths
}

// matches reports whether a machine as it is now is selected.
func (w *watcher) matches(s client.Slave) bool {
	return w.f.matches(s) && matchesAny(w.patterns, s.ID, s.Host)
}

// list reads the selection and the cursor of the state it answered.
func (w *watcher) list(ctx context.Context) (string, error) {
	all, cursor, err := w.c.ListSelected(ctx, w.f.selector())
	if err != nil {
		return "", err
	}
	w.selected, w.listed = map[string]bool{}, true
	for _, s := range all {
		// Any listed machine may enter the selection later.
		w.widths[colID] = max(w.widths[colID], utf8.RuneCountInString(termtext.Visible(s.ID)))
		if w.matches(s) {
			w.selected[s.ID] = true
		}
	}
	n := fmt.Sprintf("%d machines", len(w.selected))
	if len(w.selected) == 1 {
		n = "1 machine"
	}
	fmt.Fprintf(w.a.stderr, "fleetctl: watching %s; a line per change follows\n", n)
	return cursor, nil
}

// concerns reports whether a change is one to print: the machine was in
// the selection before it or is after it. Before is what the last change
// or the list left; for a machine neither showed (after --since), a state
// change says the state it left, and anything else counts as outside.
func (w *watcher) concerns(ch client.SlaveChange) bool {
	after := ch.Slave != nil && w.matches(*ch.Slave)
	before := w.selected[ch.SlaveID]
	if !before && !w.listed && ch.Type == "stateChanged" && ch.Slave != nil {
		was := *ch.Slave
		was.CurrentState.State = ch.PreviousState
		before = w.matches(was)
	}
	if after {
		w.selected[ch.SlaveID] = true
	} else {
		// Outside from now on: a later state change says so by its
		// previous state too, so nothing needs remembering.
		delete(w.selected, ch.SlaveID)
	}
	return before || after || w.all
}

// print writes one change: its JSON as the feed gave it, or an aligned
// line rendered visible.
func (w *watcher) print(ch client.SlaveChange, raw json.RawMessage) {
	if w.json {
		w.a.stdout.Write(append(raw, '\n'))
		return
	}
	state, user, message := "-", "-", ""
	if ch.Slave != nil {
		state = string(ch.Slave.CurrentState.State)
	}
	if u := ch.Update; u != nil {
		state, user, message = string(u.State), orDash(u.User), u.Message
	}
	cells := []string{when(ch.Timestamp), ch.SlaveID, ch.Type, state, orDash(string(ch.PreviousState)), user, message}
	var b strings.Builder
	for i, cell := range cells {
		cell = termtext.Visible(cell)
		if i == len(cells)-1 {
			b.WriteString(cell)
			break
		}
		n := utf8.RuneCountInString(cell)
		w.widths[i] = max(w.widths[i], n)
		b.WriteString(cell + strings.Repeat(" ", w.widths[i]-n) + "  ")
	}
	fmt.Fprintln(w.a.stdout, strings.TrimRight(b.String(), " "))
}

// follow reads the feed from cursor until ctx ends or a read fails,
// printing what concerns the selection. It returns the cursor to resume
// from: every change before it was printed (or was not to be), none after.
func (w *watcher) follow(ctx context.Context, cursor string) (string, error) {
	return w.a.followFeed(ctx, w.c, cursor, w.f.selector(), 0, "listing the machines again and following from there (changes in between are not shown)", w.list,
		func(page *client.Changes, raw []json.RawMessage) {
			for i, ch := range page.Changes {
				if w.concerns(ch) {
					w.print(ch, raw[i])
				}
			}
		})
}

func (a *app) watchCommand() *cobra.Command {
	var output, since string
	var sel selector
	cmd := &cobra.Command{
		Use:   "watch [PATTERN...]",
		Short: "Print a line per change to the selected machines, as it happens",
		Long: `Lists the machines selected as list selects them (--state, --host, --rack,
-l key=value, PATTERNs over id and host), then follows the service's change
feed from that list and prints one line per change of a selected machine,
in the order the service applied them: TIME, ID, CHANGE (added,
stateChanged, descriptionChanged, deleted), STATE, PREVIOUS state, USER and
MESSAGE, in columns that do not move: the change and state columns are as
wide as their widest value, the ID column as the widest id listed. A change that takes a machine into or out of the selection is
printed too. -o json prints each change as the feed gives it, one JSON
object a line (NDJSON).

--since CURSOR follows from a cursor instead of listing. On exit (Ctrl-C,
or when the service cannot be reached) it prints the cursor to resume from
on stderr: a watch started again with --since misses no change and repeats
none. The feed keeps 24 hours of changes: from an older cursor it says so,
lists again and follows from there. A cursor the service did not issue
exits with code 2.`,
		Example: `  fleetctl watch
  fleetctl watch --state frozen --rack us-east-1a
  fleetctl watch 'node-1*' -o json | jq -r '.slaveId + " " + .type'
  fleetctl watch --since eyJp...   # the cursor a watch printed on exit`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, patterns []string) error {
			if output != "table" && output != "json" {
				return usageError("output %q is none of table, json", output)
			}
			f, err := sel.filter()
			if err != nil {
				return err
			}
			if err := checkPatterns(patterns); err != nil {
				return err
			}
			if cmd.Flags().Changed("since") && since == "" {
				return usageError("--since: empty; give the cursor a watch printed")
			}
			c, err := a.feedClient(cmd.Context())
			if err != nil {
				return err
			}
			w := &watcher{a: a, c: c, f: f, patterns: patterns, json: output == "json", all: !sel.given() && len(patterns) == 0, selected: map[string]bool{}, widths: initialWidths()}
			cursor := since
			if cursor == "" {
				if cursor, err = w.list(cmd.Context()); err != nil {
					return err
				}
			}
			cursor, err = w.follow(cmd.Context(), cursor)
			if client.StatusOf(err) == 400 {
				// The cursor was refused: resuming from it would be too.
				what := "the list's cursor"
				if since != "" {
					what = "--since"
				}
				return exitError{code: exitUsage, msg: what + ": " + describe(err)}
			}
			if cursor != "" {
				fmt.Fprintln(a.stderr, "fleetctl: resume with: fleetctl watch --since "+termtext.Visible(cursor))
			}
			return err
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (NDJSON: one change a line)")
	cmd.Flags().StringVar(&since, "since", "", "follow from this cursor (printed by a watch on exit) instead of listing")
	cmd.RegisterFlagCompletionFunc("state", completeStates)
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("since", cobra.NoFileCompletions)
	return cmd
}
