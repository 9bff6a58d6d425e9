package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// changeFlags are the flags of freeze, decommission and activate.
type changeFlags struct {
	msg, forText, revert, key string
	dryRun, yes, killTasks    bool
	ifUnchanged               bool
	wait                      bool
	sel                       selector
	maxUnavailable            string
	jobs                      int
	wf                        waitFlags
}

func (a *app) changeCommand(name string) *cobra.Command {
	act := actions[name]
	var f changeFlags
	cmd := &cobra.Command{
		Use:   name + " [ID...]",
		Short: act.short,
		Long: act.short + `.

With --for the change expires: after that long the machine reverts to
--revert (default ` + string(act.defaultRevert) + `). --dry-run asks the service what the
change would answer, machine by machine, and changes nothing (the service's
decommission limit is not asked: it is checked as a change is written).
Every change carries an Idempotency-Key, so a retry after a lost answer is
never applied twice.

Machines are named by id, or selected: --state, --host and --rack globs,
and -l key=value over attributes (all must match). A selection is shown
as a table of what will change and asked for (so are several ids), unless
--yes; without a terminal to ask on, --yes is needed. -j changes are sent
at once; one result line per machine, in id order, then a summary.

--max-unavailable N (1 or more; or N%, of the selection, rounded down but
at least 1, so that 10% of 5 machines is 1) is the guard: never more than
N machines of the selection unavailable at once, those already unavailable
counted first; 0 is refused, as it would allow no change at all. Unavailable means out of
ACTIVE; for decommission --wait it means draining (STARTING_DECOMMISSION
or DECOMMISSIONING): each drain is followed to DECOMMISSIONED and the next
one starts when fewer than N are draining, as a disruption budget counts
disruptions in progress. Without --wait the guard starts what it allows
and names the rest as not started (exit code 11). The service's own
decommission limit still applies: its refusal is reported per machine.

--if-unchanged changes a machine only if it has not changed since fleetctl
read it (the selection shown and confirmed): one that moved meanwhile is
reported as moved, with its state now, and left alone (exit code 3).`,
		Example: fmt.Sprintf(`  fleetctl %[1]s node-17 -m "kernel upgrade"
  fleetctl %[1]s node-17 node-18 -m "disk check" --for 2h --revert %[2]s --yes
  fleetctl %[1]s --rack us-east-1a -l instance_type=m5.4xlarge --max-unavailable 10%% -m "rack maintenance"
  fleetctl list --state active -o name | xargs fleetctl %[1]s --dry-run`, name, act.defaultRevert),
		Args:              args(cobra.ArbitraryArgs),
		ValidArgsFunction: a.completeIDs(everyMachine, 0),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return a.change(cmd, name, f, ids)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.msg, "message", "m", "", "why: goes into the history (at most 4096 characters)")
	fs.StringVar(&f.forText, "for", "", "make the change expire after this long (90m, 2h, 7d)")
	fs.StringVar(&f.revert, "revert", "", "state to revert to when --for expires (default "+string(act.defaultRevert)+")")
	fs.StringVar(&f.key, "action-id", "", "your id for the change (a ticket number), stored with an expiring change")
	fs.BoolVar(&f.dryRun, "dry-run", false, "ask the service what the change would answer, change nothing")
	fs.BoolVarP(&f.yes, "yes", "y", false, "change several machines without asking")
	fs.BoolVar(&f.ifUnchanged, "if-unchanged", false, "change a machine only if it has not changed since it was read and shown")
	f.sel.register(fs)
	fs.StringVar(&f.maxUnavailable, "max-unavailable", "", "guard: at most this many machines of the selection unavailable at once, a count (1 or more) or a percentage (rounded down, at least 1)")
	fs.IntVarP(&f.jobs, "jobs", "j", 8, "changes sent at once")
	if name == "decommission" {
		fs.BoolVar(&f.killTasks, "kill-tasks", false, "kill the tasks left when a decommission times out (needed to --revert DECOMMISSIONED)")
		fs.BoolVar(&f.wait, "wait", false, "follow each drain to DECOMMISSIONED (see fleetctl wait)")
		f.wf.register(cmd)
	}
	cmd.RegisterFlagCompletionFunc("state", completeStates)
	cmd.RegisterFlagCompletionFunc("revert", completeStates)
	return cmd
}

// change runs freeze, decommission or activate: check the command line,
// select the machines, then ask (--dry-run) or plan, confirm and apply.
func (a *app) change(cmd *cobra.Command, name string, f changeFlags, ids []string) error {
	act := actions[name]
	req, err := f.request(act.defaultRevert)
	if err != nil {
		return err
	}
	if err := f.check(cmd, name, ids); err != nil {
		return err
	}
	g, err := parseGuard(f.maxUnavailable)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	guarded := g != nil || f.wait
	selected, cursor, err := a.selectMachines(ctx, c, ids, f.sel, guarded || f.dryRun || f.ifUnchanged)
	if err != nil {
		return err
	}
	send := sender(c, act.target, req)
	if f.dryRun {
		return a.dryRun(ctx, name, act.target, req, selected, send)
	}
	n := g.budget(len(selected))
	plan := planChange(selected, act.target, n, f.jobs, f.wait)
	if f.sel.given() && len(selected) == 0 {
		fmt.Fprintln(a.stderr, "fleetctl: no machine matches the selection")
		return nil
	}
	if err := a.confirmChange(name, f, plan, ids); err != nil {
		return err
	}
	do, done := changeStep(act.target, send, f.ifUnchanged), doneLine(act.target, req, f.forText)
	var p *progress
	if f.wait {
		wctx, cancel := f.wf.context(ctx)
		defer cancel()
		ctx = wctx
		p = newProgress(a.stderr, isTerminal(a.stderr), client.Decommissioned)
		defer p.done()
		// The drains are followed on the change feed from the selection's
		// list: its cursor is the state the plan was made on.
		fl, err := a.followStates(ctx, c, slaveIDs(plan.start), f.wf.poll, plan.start, cursor)
		if err != nil {
			return err
		}
		do, done = drainStep(fl, send, p), string(client.Decommissioned)
	}
	err = a.apply(ctx, plan.start, plan.limit, do, done, p)
	return a.held(name, plan, n, f.wait, g != nil || f.sel.given(), err)
}

// request turns --message, --for, --revert, --action-id and --kill-tasks
// into the change request.
func (f changeFlags) request(defaultRevert client.State) (client.ChangeRequest, error) {
	req := client.ChangeRequest{Message: f.msg, ActionID: f.key, KillTasksOnDecommissionTimeout: f.killTasks}
	if f.forText != "" {
		d, err := parseDuration(f.forText)
		if err != nil {
			return req, usageError("--for: %v", err)
		}
		req.DurationMillis = d.Milliseconds()
		req.RevertToState = defaultRevert
	}
	if f.revert != "" {
		st, err := parseState(f.revert)
		if err != nil {
			return req, usageError("--revert: %v", err)
		}
		if f.forText == "" {
			return req, usageError("--revert needs --for: a change only reverts when it expires")
		}
		req.RevertToState = st
	}
	return req, nil
}

// check refuses command lines that name no machine or mix flags that do
// not go together.
func (f changeFlags) check(cmd *cobra.Command, name string, ids []string) error {
	switch {
	case f.sel.given() && len(ids) > 0:
		return usageError("name machines by id or select them (--state, --host, --rack, -l), not both")
	case !f.sel.given() && len(ids) == 0:
		return usageError("%s: name machines by id, or select them with --state, --host, --rack or -l (see %s --help)", name, cmd.CommandPath())
	case f.jobs < 1:
		return usageError("-j %d: at least 1", f.jobs)
	case f.wait:
		return f.wf.check()
	}
	if fl := cmd.Flags().Lookup("wait-timeout"); fl != nil && fl.Changed {
		return usageError("--wait-timeout needs --wait")
	}
	return nil
}

// confirmChange shows a selection's plan and asks for it, or asks for
// several ids, unless --yes.
func (a *app) confirmChange(name string, f changeFlags, plan guardPlan, ids []string) error {
	if f.sel.given() {
		a.printPlan(plan, actions[name].target)
		if f.yes {
			return nil
		}
		return a.confirm(fmt.Sprintf("%s %d machines", name, len(plan.start)))
	}
	if len(ids) > 1 && !f.yes {
		return a.confirm(fmt.Sprintf("%s %d machines (%s)", name, len(ids), strings.Join(ids, ", ")))
	}
	return nil
}

// sender returns the call that moves one machine to target.
func sender(c *client.Client, target client.State, req client.ChangeRequest) func(context.Context, string, client.ChangeOptions) error {
	return func(ctx context.Context, id string, opts client.ChangeOptions) error {
		switch target {
		case client.Frozen:
			return c.FreezeSlave(ctx, id, req, opts)
		case client.StartingDecommission:
			return c.DecommissionSlave(ctx, id, req, opts)
		}
		return c.ActivateSlave(ctx, id, req, opts)
	}
}

// doneLine is what a machine's result line says after a change.
func doneLine(target client.State, req client.ChangeRequest, forText string) string {
	if forText == "" {
		return string(target)
	}
	return fmt.Sprintf("%s for %s, then %s", target, forText, req.RevertToState)
}

// changeStep changes one machine. Only a machine read from the list has a
// state: one named by id alone gets the service's own answer. ifUnchanged
// sends the sequence it was read at, so that one that moved since is
// refused.
func changeStep(target client.State, send func(context.Context, string, client.ChangeOptions) error, ifUnchanged bool) func(context.Context, client.Slave) error {
	return func(ctx context.Context, s client.Slave) error {
		if s.CurrentState.State == target {
			return alreadyError{target}
		}
		var opts client.ChangeOptions
		if ifUnchanged {
			opts.IfMatch = &s.Sequence
		}
		return send(ctx, s.ID, opts)
	}
}

// drainStep decommissions one machine and follows it to DECOMMISSIONED. A
// drain under way or done is only waited for: running the same command
// again resumes it.
func drainStep(f *stateFollower, send func(context.Context, string, client.ChangeOptions) error, p *progress) func(context.Context, client.Slave) error {
	return func(ctx context.Context, s client.Slave) error {
		var start func(context.Context) error
		if st := s.CurrentState.State; !draining(st) && st != client.Decommissioned {
			start = func(ctx context.Context) error { return send(ctx, s.ID, client.ChangeOptions{}) }
		}
		return f.waitFor(ctx, s.ID, client.Decommissioned, p, start)
	}
}

// dryRun asks the service, machine by machine, what the change would
// answer (the change routes' dryRun flag): fleetctl knows none of the
// service's rules itself. Its exit code is the one the change would get.
func (a *app) dryRun(ctx context.Context, name string, target client.State, req client.ChangeRequest, selected []client.Slave, send func(context.Context, string, client.ChangeOptions) error) error {
	states := make(map[string]client.State, len(selected))
	for _, s := range selected {
		states[s.ID] = s.CurrentState.State
	}
	return a.each(ctx, slaveIDs(selected), func(id string) error {
		if err := send(ctx, id, client.ChangeOptions{DryRun: true}); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s: would %s (%s → %s", termtext.Visible(id), name, termtext.Visible(orDash(string(states[id]))), target)
		if req.DurationMillis > 0 {
			fmt.Fprintf(a.stdout, ", reverting to %s after %s", req.RevertToState, time.Duration(req.DurationMillis)*time.Millisecond)
		}
		fmt.Fprintln(a.stdout, ")")
		return nil
	}, "")
}
