package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/shared/machine"
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
	var state, output string
	cmd := &cobra.Command{
		Use:   "list [PATTERN...]",
		Short: "List machines, sorted by id",
		Long: `Lists the machines, sorted by id. PATTERNs (shell globs) keep the machines
whose id or host matches one of them. Output formats: table (default),
wide (adds user, first seen, resources and attributes), json, name (ids
only, one a line, for xargs).`,
		Example: `  fleetctl list
  fleetctl list --state frozen -o name
  fleetctl list 'node-1*' -o wide
  fleetctl list -o json | jq '.[].host'`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, patterns []string) error {
			if !slices.Contains([]string{"table", "wide", "json", "name"}, output) {
				return usageError("output %q is none of table, wide, json, name", output)
			}
			if state != "" {
				st, err := parseState(state)
				if err != nil {
					return err
				}
				state = string(st)
			}
			for _, p := range patterns {
				if _, err := path.Match(p, ""); err != nil {
					return usageError("pattern %q: %v", p, err)
				}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			slaves, err := c.ListSlaves(cmd.Context(), state)
			if err = a.partial(err); err != nil {
				return err
			}
			slaves = slices.DeleteFunc(slaves, func(s client.Slave) bool { return !matchesAny(patterns, s.ID, s.Host) })
			slices.SortFunc(slaves, func(x, y client.Slave) int { return strings.Compare(x.ID, y.ID) })
			return a.printSlaves(slaves, output)
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only machines in this state (active, frozen, starting-decommission, ...)")
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

// partial passes a truncated list on with a warning: what was answered is
// still worth showing.
func (a *app) partial(err error) error {
	var te *client.TruncatedError
	if errors.As(err, &te) {
		fmt.Fprintf(a.stderr, "fleetctl: warning: the service answered only the first %d of %d\n", te.Count, te.Total)
		return nil
	}
	return err
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
			fmt.Fprintln(a.stdout, visible(s.ID))
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
		Args: args(cobra.ExactArgs(1)),
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
			if err = a.partial(err); err != nil {
				return err
			}
			expiring, err := c.ListExpiring(ctx)
			if err = a.partial(err); err != nil {
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
				fmt.Fprintf(a.stdout, "%-12s%s\n", d[0], visible(d[1]))
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

func (a *app) changeCommand(name string) *cobra.Command {
	act := actions[name]
	var msg, forText, revert, key string
	var dryRun, yes, killTasks, wait bool
	var sel selector
	var maxUnavailable string
	var jobs int
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   name + " [ID...]",
		Short: act.short,
		Long: act.short + `.

With --for the change expires: after that long the machine reverts to
--revert (default ` + string(act.defaultRevert) + `). --dry-run reads each machine and says what
would happen. Every change carries an Idempotency-Key, so a retry after a
lost answer is never applied twice.

Machines are named by id, or selected: --state, --host and --rack globs,
and -l key=value over attributes (all must match). A selection is shown
as a table of what will change and asked for (so are several ids), unless
--yes; without a terminal to ask on, --yes is needed. -j changes are sent
at once; one result line per machine, in id order, then a summary.

--max-unavailable N (or N%, of the selection, rounded down, at least 1)
is the guard: never more than N machines of the selection unavailable at
once, those already unavailable counted first. Unavailable means out of
ACTIVE; for decommission --wait it means draining (STARTING_DECOMMISSION
or DECOMMISSIONING): each drain is followed to DECOMMISSIONED and the next
one starts when fewer than N are draining, as a disruption budget counts
disruptions in progress. Without --wait the guard starts what it allows
and names the rest as not started (exit code 11). The service's own
decommission limit still applies: its refusal is reported per machine.`,
		Example: fmt.Sprintf(`  fleetctl %[1]s node-17 -m "kernel upgrade"
  fleetctl %[1]s node-17 node-18 -m "disk check" --for 2h --revert %[2]s --yes
  fleetctl %[1]s --rack us-east-1a -l instance_type=m5.4xlarge --max-unavailable 10%% -m "rack maintenance"
  fleetctl list --state active -o name | xargs fleetctl %[1]s --dry-run`, name, act.defaultRevert),
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, ids []string) error {
			req := client.ChangeRequest{Message: msg, ActionID: key, KillTasksOnDecommissionTimeout: killTasks}
			var forDur time.Duration
			if forText != "" {
				d, err := parseDuration(forText)
				if err != nil {
					return usageError("--for: %v", err)
				}
				forDur = d
				req.DurationMillis = d.Milliseconds()
				req.RevertToState = act.defaultRevert
			}
			if revert != "" {
				st, err := parseState(revert)
				if err != nil {
					return usageError("--revert: %v", err)
				}
				if forText == "" {
					return usageError("--revert needs --for: a change only reverts when it expires")
				}
				req.RevertToState = st
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			if sel.given() && len(ids) > 0 {
				return usageError("name machines by id or select them (--state, --host, --rack, -l), not both")
			}
			if !sel.given() && len(ids) == 0 {
				return usageError("%s: name machines by id, or select them with --state, --host, --rack or -l (see %s --help)", name, cmd.CommandPath())
			}
			if jobs < 1 {
				return usageError("-j %d: at least 1", jobs)
			}
			if wait {
				if err := wf.check(); err != nil {
					return err
				}
			} else if f := cmd.Flags().Lookup("wait-timeout"); f != nil && f.Changed {
				return usageError("--wait-timeout needs --wait")
			}
			selected, err := a.selectMachines(ctx, c, ids, sel, maxUnavailable != "" || wait)
			if err != nil {
				return err
			}
			if dryRun {
				return a.dryRun(cmd, c, name, act.target, req, slaveIDs(selected))
			}
			n, err := budget(maxUnavailable, len(selected))
			if err != nil {
				return err
			}
			plan := planChange(selected, act.target, n, jobs, wait)
			if sel.given() {
				if len(selected) == 0 {
					fmt.Fprintln(a.stderr, "fleetctl: no machine matches the selection")
					return nil
				}
				a.printPlan(plan, act.target)
				if !yes {
					if err := a.confirm(fmt.Sprintf("%s %d machines", name, len(plan.start))); err != nil {
						return err
					}
				}
			} else if len(ids) > 1 && !yes {
				if err := a.confirm(fmt.Sprintf("%s %d machines (%s)", name, len(ids), strings.Join(ids, ", "))); err != nil {
					return err
				}
			}
			send := func(ctx context.Context, id string) error {
				switch act.target {
				case client.Frozen:
					return c.FreezeSlave(ctx, id, req, client.ChangeOptions{})
				case client.StartingDecommission:
					return c.DecommissionSlave(ctx, id, req, client.ChangeOptions{})
				}
				return c.ActivateSlave(ctx, id, req, client.ChangeOptions{})
			}
			done := string(act.target)
			if forDur > 0 {
				done += fmt.Sprintf(" for %s, then %s", forText, req.RevertToState)
			}
			do := func(ctx context.Context, s client.Slave) error {
				// Only a machine read from the list has a state: one named by
				// id alone gets the service's own answer.
				if s.CurrentState.State == act.target {
					return alreadyError{act.target}
				}
				return send(ctx, s.ID)
			}
			var p *progress
			if wait {
				wctx, cancel := wf.context(ctx)
				defer cancel()
				ctx = wctx
				p = newProgress(a.stderr, isTerminal(a.stderr), client.Decommissioned)
				defer p.done()
				done = string(client.Decommissioned)
				do = func(ctx context.Context, s client.Slave) error {
					// A drain under way or done is only waited for: running
					// the same command again resumes it.
					if st := s.CurrentState.State; !draining(st) && st != client.Decommissioned {
						if err := send(ctx, s.ID); err != nil {
							return err
						}
					}
					return waitFor(ctx, c, s.ID, client.Decommissioned, wf.poll, p)
				}
			}
			err = a.apply(ctx, plan.start, plan.limit, do, done, p)
			return a.held(name, plan, n, wait, maxUnavailable != "" || sel.given(), err)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&msg, "message", "m", "", "why: goes into the history (at most 4096 characters)")
	f.StringVar(&forText, "for", "", "make the change expire after this long (90m, 2h, 7d)")
	f.StringVar(&revert, "revert", "", "state to revert to when --for expires (default "+string(act.defaultRevert)+")")
	f.StringVar(&key, "action-id", "", "your id for the change (a ticket number), stored with an expiring change")
	f.BoolVar(&dryRun, "dry-run", false, "show what would change, change nothing")
	f.BoolVarP(&yes, "yes", "y", false, "change several machines without asking")
	sel.register(f)
	f.StringVar(&maxUnavailable, "max-unavailable", "", "guard: at most this many machines of the selection unavailable at once, a count or a percentage (rounded down, at least 1)")
	f.IntVarP(&jobs, "jobs", "j", 8, "changes sent at once")
	if name == "decommission" {
		f.BoolVar(&killTasks, "kill-tasks", false, "kill the tasks left when a decommission times out (needed to --revert DECOMMISSIONED)")
		f.BoolVar(&wait, "wait", false, "follow each drain to DECOMMISSIONED (see fleetctl wait)")
		wf.register(cmd)
	}
	cmd.RegisterFlagCompletionFunc("state", completeStates)
	cmd.RegisterFlagCompletionFunc("revert", completeStates)
	return cmd
}

// selectMachines returns the machines a change names: those the selector
// matches, sorted by id, or the ids given. The ids are read from the list
// only when their states are needed (for the guard or a wait); an unknown
// id stays in with no state, for the change to answer 404.
func (a *app) selectMachines(ctx context.Context, c *client.Client, ids []string, sel selector, needStates bool) ([]client.Slave, error) {
	f, err := sel.filter()
	if err != nil {
		return nil, err
	}
	if !sel.given() && !needStates {
		out := make([]client.Slave, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out, nil
	}
	all, err := c.ListSlaves(ctx, string(f.state))
	if err = a.partial(err); err != nil {
		return nil, err
	}
	if sel.given() {
		all = slices.DeleteFunc(all, func(s client.Slave) bool { return !f.matches(s) })
		sortByID(all)
		return all, nil
	}
	out := make([]client.Slave, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if j := slices.IndexFunc(all, func(s client.Slave) bool { return s.ID == id }); j >= 0 {
			out[i] = all[j]
		}
	}
	return out, nil
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
		fmt.Fprintf(a.stderr, "fleetctl: %s: not started: --max-unavailable %d reached\n", visible(s.ID), budget)
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
// failure, having tried them all.
func (a *app) each(ids []string, do func(id string) error, done string) error {
	first := 0
	for _, id := range ids {
		if err := do(id); err != nil {
			fmt.Fprintf(a.stderr, "fleetctl: %s: %s\n", visible(id), message(err))
			if first == 0 {
				first = exitCode(err)
			}
			continue
		}
		if done != "" {
			fmt.Fprintf(a.stdout, "%s: %s\n", visible(id), done)
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

// dryRun reads each machine and says what the change would do, checking
// the rules the service checks (docs/behaviour.md, "User changes" and
// "Expiring changes") but the decommission limit. Its exit code is the one
// the change would get.
func (a *app) dryRun(cmd *cobra.Command, c *client.Client, name string, target client.State, req client.ChangeRequest, ids []string) error {
	ctx := cmd.Context()
	expiring, err := c.ListExpiring(ctx)
	if err = a.partial(err); err != nil {
		return err
	}
	return a.each(ids, func(id string) error {
		s, err := c.GetSlave(ctx, id)
		if err != nil {
			return err
		}
		cur := machine.State(s.CurrentState.State)
		if err := machine.CheckTransition(id, cur, machine.State(target)); err != nil {
			return &client.Error{Status: 409, Code: 409, Message: err.Error(), Operation: name}
		}
		if req.DurationMillis > 0 {
			revert := machine.State(req.RevertToState)
			d := req.DurationMillis
			has := slices.ContainsFunc(expiring, func(e client.Expiring) bool { return e.MachineID == id })
			mreq := machine.ChangeRequest{DurationMillis: &d, RevertToState: &revert, KillTasksOnDecommissionTimeout: req.KillTasksOnDecommissionTimeout}
			if err := machine.ValidateExpiring(machine.State(target), mreq, has, 30*24*time.Hour); err != nil {
				status := 400
				if has {
					status = 409
				}
				return &client.Error{Status: status, Code: status, Message: err.Error(), Operation: name}
			}
		}
		fmt.Fprintf(a.stdout, "%s: would %s (%s → %s", visible(id), name, visible(string(cur)), target)
		if req.DurationMillis > 0 {
			fmt.Fprintf(a.stdout, ", reverting to %s after %s", req.RevertToState, time.Duration(req.DurationMillis)*time.Millisecond)
		}
		fmt.Fprintln(a.stdout, ")")
		return nil
	}, "")
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
			if err = a.partial(err); err != nil {
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
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			expiring, err := c.ListExpiring(ctx)
			if err = a.partial(err); err != nil {
				return err
			}
			return a.each(ids, func(id string) error {
				i := slices.IndexFunc(expiring, func(e client.Expiring) bool { return e.MachineID == id })
				if i < 0 {
					return exitError{code: exitNotFound, msg: "no expiring change to make permanent (see fleetctl expiring)"}
				}
				if err := c.DeleteExpiring(ctx, id); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s: permanent, no longer reverts to %s\n", visible(id), expiring[i].RevertToState)
				return nil
			}, "")
		},
	}
}

func (a *app) deleteCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete ID...",
		Short: "Remove machines with their history and expiring change",
		Example: `  fleetctl delete node-17
  fleetctl delete node-17 node-18 --yes`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			if len(ids) > 1 && !yes {
				if err := a.confirm(fmt.Sprintf("delete %d machines (%s)", len(ids), strings.Join(ids, ", "))); err != nil {
					return err
				}
			}
			return a.each(ids, func(id string) error { return c.DeleteSlave(cmd.Context(), id) }, "deleted")
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete several machines without asking")
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
			if err = a.partial(err); err != nil {
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
