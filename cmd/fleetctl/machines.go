package main

import (
	"bufio"
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// parseState reads a state as the API's state query does: any case, "-"
// and "." for "_", surrounding space dropped.
func parseState(s string) (client.State, error) {
	norm := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(strings.TrimSpace(s)))
	if slices.Contains(client.States, client.State(norm)) {
		return client.State(norm), nil
	}
	names := make([]string, len(client.States))
	for i, st := range client.States {
		names[i] = string(st)
	}
	return "", usageError("unknown state %q: one of %s (any case, - for _)", s, strings.Join(names, ", "))
}

// parseDuration reads a Go duration ("90m", "2h30m") or a whole number of
// days or weeks ("7d", "2w").
func parseDuration(s string) (time.Duration, error) {
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			return time.Duration(v * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("invalid duration %q (use 90m, 2h, 7d or 2w)", s)
	}
	return d, nil
}

func (a *app) listCommand() *cobra.Command {
	var output string
	var sel selector
	cmd := &cobra.Command{
		Use:   "list [PATTERN...]",
		Short: "List machines, sorted by id",
		Long: `Lists the machines, sorted by id. They are selected as freeze, decommission
and activate select them: --state, --host and --rack globs, and -l
key=value over attributes (all must match), so that a change's selection can
be listed first with the same flags. PATTERNs (shell globs) also keep the
machines whose id or host matches one of them; given with selectors, a
machine must match both. Output formats: table (default), wide (adds user,
first seen, resources and attributes), json, name (ids only, one a line,
for xargs).`,
		Example: `  fleetctl list
  fleetctl list --state frozen -o name
  fleetctl list --rack us-east-1a -l instance_type=m5.4xlarge   # what freeze with the same flags selects
  fleetctl list 'node-1*' -o wide
  fleetctl list -o json | jq '.[].host'`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, patterns []string) error {
			if !slices.Contains([]string{"table", "wide", "json", "name"}, output) {
				return usageError("output %q is none of table, wide, json, name", output)
			}
			f, err := sel.filter()
			if err != nil {
				return err
			}
			if err := checkPatterns(patterns); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			slaves, _, err := a.listSelected(cmd.Context(), c, f)
			if err != nil {
				return err
			}
			slaves = slices.DeleteFunc(slaves, func(s client.Slave) bool { return !matchesAny(patterns, s.ID, s.Host) })
			return a.printSlaves(slaves, output)
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, wide, json or name")
	cmd.RegisterFlagCompletionFunc("state", completeStates)
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "name"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func completeStates(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	var names []string
	for _, s := range client.States {
		names = append(names, strings.ToLower(strings.ReplaceAll(string(s), "_", "-")))
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func matchesAny(patterns []string, values ...string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		for _, v := range values {
			if ok, _ := path.Match(p, v); ok {
				return true
			}
		}
	}
	return false
}

func (a *app) printSlaves(slaves []client.Slave, output string) error {
	switch output {
	case "json":
		if slaves == nil {
			slaves = []client.Slave{}
		}
		return writeJSON(a.stdout, slaves)
	case "name":
		for _, s := range slaves {
			fmt.Fprintln(a.stdout, termtext.Visible(s.ID))
		}
		return nil
	}
	wide := output == "wide"
	header := []string{"ID", "STATE", "SINCE", "HOST", "RACK", "MESSAGE"}
	if wide {
		header = []string{"ID", "STATE", "SINCE", "HOST", "RACK", "USER", "FIRST SEEN", "RESOURCES", "TASKS", "ATTRIBUTES", "MESSAGE"}
	}
	rows := [][]string{header}
	for _, s := range slaves {
		cur := s.CurrentState
		if wide {
			rows = append(rows, []string{s.ID, string(cur.State), when(cur.Timestamp), s.Host, s.RackID, orDash(cur.User),
				when(s.FirstSeenAt), orDash(pairs(s.Resources)), orDash(tasks(s)), orDash(pairs(s.Attributes)), orDash(short(cur.Message, 60))})
		} else {
			rows = append(rows, []string{s.ID, string(cur.State), when(cur.Timestamp), s.Host, s.RackID, orDash(short(cur.Message, 40))})
		}
	}
	writeTable(a.stdout, visibleRows(rows), a.stateColours(1))
	return nil
}

// tasks is a draining slave's running-task count, "" when the service
// carries none (it does only while a slave drains).
func tasks(s client.Slave) string {
	if s.RunningTasks == nil {
		return ""
	}
	return strconv.Itoa(*s.RunningTasks)
}

// pairs formats a map as k=v pairs sorted by key.
func pairs[V any](m map[string]V) string {
	var out []string
	for _, k := range sortedKeys(m) {
		out = append(out, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(out, ",")
}

func (a *app) showCommand() *cobra.Command {
	var output string
	var limit int
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one machine: details, expiring change and state history",
		Example: `  fleetctl show node-17
  fleetctl show node-17 --limit 5
  fleetctl show node-17 -o json`,
		Args:              args(cobra.ExactArgs(1)),
		ValidArgsFunction: a.completeIDs(everyMachine, 1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if output != "table" && output != "json" {
				return usageError("output %q is none of table, json", output)
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			s, err := c.GetSlave(ctx, ids[0])
			if err != nil {
				return err
			}
			history, err := c.GetSlaveHistory(ctx, ids[0], limit)
			if err != nil {
				return err
			}
			expiring, err := c.ListExpiring(ctx)
			if err != nil {
				return err
			}
			var exp *client.Expiring
			if i := slices.IndexFunc(expiring, func(e client.Expiring) bool { return e.MachineID == s.ID }); i >= 0 {
				exp = &expiring[i]
			}
			if output == "json" {
				return writeJSON(a.stdout, struct {
					Slave    *client.Slave        `json:"slave"`
					Expiring *client.Expiring     `json:"expiring,omitempty"`
					History  []client.StateUpdate `json:"history"`
				}{s, exp, history})
			}
			cur := s.CurrentState
			state := string(cur.State) + " since " + when(cur.Timestamp)
			if cur.User != "" {
				state += " by " + cur.User
			}
			details := [][]string{
				{"ID:", s.ID}, {"State:", state}, {"Message:", orDash(cur.Message)},
				{"Host:", s.Host}, {"Rack:", s.RackID}, {"First seen:", when(s.FirstSeenAt)},
				{"Resources:", orDash(pairs(s.Resources))}, {"Attributes:", orDash(pairs(s.Attributes))},
			}
			if s.RunningTasks != nil {
				details = append(details, []string{"Tasks:", tasksRunning(*s.RunningTasks)})
			}
			if exp != nil {
				details = append(details, []string{"Expiring:", fmt.Sprintf("reverts to %s at %s (set %s%s)",
					exp.RevertToState, when(exp.DueAt()), when(exp.StartMillis), by(exp.User))})
			}
			for _, d := range details {
				fmt.Fprintf(a.stdout, "%-12s%s\n", d[0], termtext.Visible(d[1]))
			}
			fmt.Fprintln(a.stdout)
			rows := [][]string{{"TIME", "STATE", "USER", "MESSAGE"}}
			for _, h := range history {
				rows = append(rows, []string{when(h.Timestamp), string(h.State), orDash(h.User), orDash(short(h.Message, 80))})
			}
			writeTable(a.stdout, visibleRows(rows), a.stateColours(1))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().IntVar(&limit, "limit", 20, "history entries to show, newest first (1 to 10000)")
	return cmd
}

func by(user string) string {
	if user == "" {
		return ""
	}
	return " by " + user
}

// actions are the state changes: the target state, the client call, and
// the revert state an expiring change defaults to.
var actions = map[string]struct {
	target        client.State
	defaultRevert client.State
	short         string
}{
	"freeze":       {client.Frozen, client.Active, "Freeze machines (FROZEN): no new tasks"},
	"decommission": {client.StartingDecommission, client.Active, "Decommission machines (STARTING_DECOMMISSION): drain their tasks"},
	"activate":     {client.Active, client.Frozen, "Activate machines (ACTIVE)"},
}

// selectMachines returns the machines a change names: those the selector
// matches, sorted by id, or the ids given. The ids are read from the list
// only when their states are needed (for the guard or a wait); an unknown
// id stays in with no state, for the change to answer 404. The cursor is
// the list's X-Changes-Cursor, when a list was read: a wait follows the
// change feed from it.
func (a *app) selectMachines(ctx context.Context, c *client.Client, ids []string, sel selector, needStates bool) ([]client.Slave, string, error) {
	f, err := sel.filter()
	if err != nil {
		return nil, "", err
	}
	if !sel.given() && !needStates {
		out := make([]client.Slave, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out, "", nil
	}
	if sel.given() {
		return a.listSelected(ctx, c, f)
	}
	all, cursor, err := c.ListSlavesAt(ctx, "")
	if err != nil {
		return nil, "", err
	}
	out := make([]client.Slave, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if j := slices.IndexFunc(all, func(s client.Slave) bool { return s.ID == id }); j >= 0 {
			out[i] = all[j]
		}
	}
	return out, cursor, nil
}

// listSelected returns the machines f selects, sorted by id, and the
// list's cursor: what list shows and what a change by selector changes.
// The service applies the selector; it is matched here too, for a
// deployment older than the list's selectors, which reads only the state.
func (a *app) listSelected(ctx context.Context, c *client.Client, f machineFilter) ([]client.Slave, string, error) {
	all, cursor, err := c.ListSelected(ctx, f.selector())
	if err != nil {
		return nil, "", err
	}
	all = slices.DeleteFunc(all, func(s client.Slave) bool { return !f.matches(s) })
	sortByID(all)
	return all, cursor, nil
}

func slaveIDs(slaves []client.Slave) []string {
	ids := make([]string, len(slaves))
	for i, s := range slaves {
		ids[i] = s.ID
	}
	return ids
}

// printPlan shows what a change by selector will do, machine by machine.
func (a *app) printPlan(p guardPlan, target client.State) {
	rows := [][]string{{"ID", "STATE", "HOST", "RACK", "CHANGE"}}
	for _, s := range p.start {
		rows = append(rows, []string{s.ID, string(s.CurrentState.State), s.Host, s.RackID, "→ " + string(target)})
	}
	for _, s := range p.held {
		rows = append(rows, []string{s.ID, string(s.CurrentState.State), s.Host, s.RackID, "none: --max-unavailable"})
	}
	writeTable(a.stdout, visibleRows(rows), a.stateColours(1))
}

// held names the machines the guard did not start and sums the change up;
// a failure's code wins over the guard's.
func (a *app) held(name string, p guardPlan, budget int, wait, summary bool, err error) error {
	for _, s := range p.held {
		fmt.Fprintf(a.stderr, "fleetctl: %s: not started: --max-unavailable %d reached\n", termtext.Visible(s.ID), budget)
	}
	if summary {
		fmt.Fprintf(a.stderr, "%s: %d started, %d not started (%s), %d at once\n", name, len(p.start), len(p.held), p.describeGuard(budget, wait), p.limit)
	}
	if err != nil {
		return err
	}
	if len(p.held) > 0 {
		return exitError{code: exitHeld}
	}
	return nil
}

// each applies do to every id in turn, printing one line per id: done on
// stdout (unless do printed its own), the failure on stderr. It returns the exit code of the first
// failure, having tried them all, or stops at an interrupt (run says so).
func (a *app) each(ctx context.Context, ids []string, do func(id string) error, done string) error {
	first := 0
	for _, id := range ids {
		err := do(id)
		if err != nil && interrupted(ctx) {
			break // run says so once
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "fleetctl: %s: %s\n", termtext.Visible(id), message(err))
			if first == 0 {
				first = exitCode(err)
			}
			continue
		}
		if done != "" {
			fmt.Fprintf(a.stdout, "%s: %s\n", termtext.Visible(id), done)
		}
	}
	if first != 0 {
		return exitError{code: first}
	}
	return nil
}

// confirm asks on the terminal; without one, the caller must say --yes.
func (a *app) confirm(what string) error {
	if !isTerminal(a.stdin) {
		return usageError("%s: more than one machine, and no terminal to confirm on: add --yes", what)
	}
	fmt.Fprintf(a.stderr, "%s? [y/N] ", what)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	if answer := strings.ToLower(strings.TrimSpace(line)); answer != "y" && answer != "yes" {
		return exitError{code: exitUsage, msg: "nothing changed"}
	}
	return nil
}

func (a *app) expiringCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "expiring",
		Short: "List the pending expiring changes, by machine id",
		Example: `  fleetctl expiring
  fleetctl expiring -o json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError("output %q is none of table, json", output)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			list, err := c.ListExpiring(cmd.Context())
			if err != nil {
				return err
			}
			if output == "json" {
				if list == nil {
					list = []client.Expiring{}
				}
				return writeJSON(a.stdout, list)
			}
			rows := [][]string{{"MACHINE", "REVERT TO", "DUE", "SET", "USER", "MESSAGE"}}
			for _, e := range list {
				rows = append(rows, []string{e.MachineID, string(e.RevertToState), when(e.DueAt()), when(e.StartMillis), orDash(e.User), orDash(short(e.Request.Message, 40))})
			}
			writeTable(a.stdout, visibleRows(rows), a.stateColours(1))
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func (a *app) makePermanentCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "make-permanent ID...",
		Short: "Cancel machines' expiring changes: their current state stays",
		Long: `Cancels the expiring change of each machine: its current state stays and
no longer reverts. A machine without an expiring change is an error (exit
code 4), so that a mistyped id does not pass for done.`,
		Example: `  fleetctl make-permanent node-17
  fleetctl expiring -o json | jq -r '.[].machineId' | xargs fleetctl make-permanent`,
		Args:              args(cobra.MinimumNArgs(1)),
		ValidArgsFunction: a.completeIDs(expiringMachines, 0),
		RunE: func(cmd *cobra.Command, ids []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			expiring, err := c.ListExpiring(ctx)
			if err != nil {
				return err
			}
			return a.each(ctx, ids, func(id string) error {
				i := slices.IndexFunc(expiring, func(e client.Expiring) bool { return e.MachineID == id })
				if i < 0 {
					return exitError{code: exitNotFound, msg: "no expiring change to make permanent (see fleetctl expiring)"}
				}
				if err := c.DeleteExpiring(ctx, id); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s: permanent, no longer reverts to %s\n", termtext.Visible(id), expiring[i].RevertToState)
				return nil
			}, "")
		},
	}
}

func (a *app) deleteCommand() *cobra.Command {
	var yes, ifUnchanged bool
	cmd := &cobra.Command{
		Use:   "delete ID...",
		Short: "Remove machines with their history and expiring change",
		Long: `Remove machines with their history and expiring change.

--if-unchanged reads the machines first and removes each only if it has
not changed since (before the question, when one is asked): one that moved
meanwhile is reported as moved, with its state now, and kept (exit code 3).`,
		Example: `  fleetctl delete node-17
  fleetctl delete node-17 node-18 --yes --if-unchanged`,
		Args:              args(cobra.MinimumNArgs(1)),
		ValidArgsFunction: a.completeIDs(everyMachine, 0),
		RunE: func(cmd *cobra.Command, ids []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			seen := map[string]*int64{}
			if ifUnchanged {
				read, _, err := a.selectMachines(ctx, c, ids, selector{}, true)
				if err != nil {
					return err
				}
				for _, s := range read {
					if s.CurrentState.State != "" { // listed: an unknown id is the service's 404
						seen[s.ID] = &s.Sequence
					}
				}
			}
			if len(ids) > 1 && !yes {
				if err := a.confirm(fmt.Sprintf("delete %d machines (%s)", len(ids), strings.Join(ids, ", "))); err != nil {
					return err
				}
			}
			return a.each(ctx, ids, func(id string) error { return c.DeleteSlaveIf(ctx, id, seen[id]) }, "deleted")
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete several machines without asking")
	cmd.Flags().BoolVar(&ifUnchanged, "if-unchanged", false, "delete a machine only if it has not changed since it was read")
	return cmd
}

func (a *app) purgeDeadCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge-dead",
		Short: "Remove every DEAD machine with its history",
		Example: `  fleetctl list --state dead
  fleetctl purge-dead --yes`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			dead, err := c.ListSlaves(ctx, string(client.Dead))
			if err != nil {
				return err
			}
			if len(dead) == 0 {
				fmt.Fprintln(a.stdout, "no dead machines")
				return nil
			}
			if !yes {
				if err := a.confirm(fmt.Sprintf("remove %d dead machines", len(dead))); err != nil {
					return err
				}
			}
			if err := c.DeleteDeadSlaves(ctx); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "removed the dead machines (%d were dead)\n", len(dead))
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "remove without asking")
	return cmd
}
