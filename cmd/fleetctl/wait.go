package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// waitFlags bound a wait: how long in all, and how often to read.
type waitFlags struct {
	timeout, poll time.Duration
}

func (w *waitFlags) register(cmd *cobra.Command) {
	// --timeout is already the bound of one API call.
	cmd.Flags().DurationVar(&w.timeout, "wait-timeout", 0, "give up waiting after this long (exit code 9); default never")
	cmd.Flags().DurationVar(&w.poll, "poll", 2*time.Second, "how often to read each machine's state while waiting, when the service has no change feed")
}

func (w waitFlags) check() error {
	if w.timeout < 0 {
		return usageError("--wait-timeout %s: not a positive duration", w.timeout)
	}
	if w.poll <= 0 {
		return usageError("--poll %s: not a positive duration", w.poll)
	}
	return nil
}

// context bounds ctx by --wait-timeout.
func (w waitFlags) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.timeout == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, w.timeout, errWaitTimeout)
}

var errWaitTimeout = errors.New("wait timed out")

// onTheWay reports whether a machine in cur may still reach target by
// itself: a drain goes STARTING_DECOMMISSION → DECOMMISSIONING →
// DECOMMISSIONED as reports come in. For any other target no state is a
// detour, and only a deleted machine went elsewhere.
func onTheWay(cur, target client.State) bool {
	switch target {
	case client.Decommissioned:
		return draining(cur)
	case client.Decommissioning:
		return cur == client.StartingDecommission
	}
	return true
}

// stateNote says what a slave's state tells of its tasks: the running-task
// count of its last report while it drains, when the service carries it;
// otherwise what the drain's states, decided by those counts, imply.
func stateNote(s client.Slave) string {
	if n := s.RunningTasks; n != nil && draining(s.CurrentState.State) {
		return tasksRunning(*n)
	}
	switch s.CurrentState.State {
	case client.StartingDecommission:
		return "no report since the decommission"
	case client.Decommissioning:
		return "last report: tasks still running"
	case client.Decommissioned:
		return "last report: no tasks left"
	}
	return ""
}

// tasksRunning is "1 task running", "3 tasks running".
func tasksRunning(n int) string {
	if n == 1 {
		return "1 task running"
	}
	return fmt.Sprintf("%d tasks running", n)
}

// progress shows the machines being waited for: a line for each state
// a machine reaches and, on a terminal, one status line kept at the bottom.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	target   client.State
	started  time.Time
	states   map[string]client.State
	notes    map[string]string // stateNote of each machine's last read
	tasks    map[string]int    // running tasks of the draining machines whose reports count them
	shown    bool              // the status line is on screen
}

func newProgress(w io.Writer, terminal bool, target client.State) *progress {
	return &progress{w: w, terminal: terminal, target: target, started: time.Now(),
		states: map[string]client.State{}, notes: map[string]string{}, tasks: map[string]int{}}
}

// saw records a machine's state, printing a line when it or its
// running-task count changed.
func (p *progress) saw(id string, s client.Slave) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, note := s.CurrentState.State, stateNote(s)
	delete(p.tasks, id)
	if n := s.RunningTasks; n != nil && draining(cur) {
		p.tasks[id] = *n
	}
	if old, ok := p.states[id]; ok && old == cur && p.notes[id] == note {
		p.redraw()
		return
	}
	p.states[id], p.notes[id] = cur, note
	p.clear()
	line := fmt.Sprintf("%s: %s since %s", termtext.Visible(id), termtext.Visible(string(cur)), when(s.CurrentState.Timestamp))
	if note != "" {
		line += " (" + note + ")"
	}
	fmt.Fprintln(p.w, line)
	p.redraw()
}

// last is the state a machine was last seen in.
func (p *progress) last(id string) (client.State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.states[id]
	return s, ok
}

// gone forgets a machine that is no longer waited for.
func (p *progress) gone(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	delete(p.states, id)
	delete(p.notes, id)
	delete(p.tasks, id)
	p.redraw()
}

func (p *progress) clear() {
	if p.shown {
		io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}

func (p *progress) redraw() {
	if !p.terminal || len(p.states) == 0 {
		return
	}
	counts := map[client.State]int{}
	for _, s := range p.states {
		counts[s]++
	}
	var parts []string
	for _, s := range client.States {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(p.tasks) > 0 {
		total := 0
		for _, n := range p.tasks {
			total += n
		}
		parts = append(parts, tasksRunning(total))
	}
	p.clear()
	fmt.Fprintf(p.w, "waiting for %s: %s, %s", p.target, strings.Join(parts, ", "), time.Since(p.started).Round(time.Second))
	p.shown = true
}

// done ends the status line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// pollFor reads the machine every poll until it is in target: the wait of
// a service without the change feed. It only reads, so a client that
// stopped waiting can start again. A machine that leaves the way to target
// (activated, DEAD, deleted) ends the wait with exit code 10, one that
// never existed with 4; ctx ending by errWaitTimeout, with 9; ctx ending
// otherwise (an interrupt), with its cause and no further read.
func pollFor(ctx context.Context, c *client.Client, id string, target client.State, poll time.Duration, p *progress) error {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	defer p.gone(id)
	for {
		s, err := c.GetSlave(ctx, id)
		if ctx.Err() != nil {
			return waitEnded(ctx, id, target, p)
		}
		if client.IsNotFound(err) {
			s, err = nil, nil
		}
		if err != nil {
			return err
		}
		if done, err := reached(id, s, target, p); done {
			return err
		}
		select {
		case <-ctx.Done():
			return waitEnded(ctx, id, target, p)
		case <-tick.C:
		}
	}
}

// reached decides a wait on the machine's state s (nil: none such):
// whether the wait is over, and the error it ends with. A machine in
// target ends it well; one that left the way to target with exit code 10,
// and so does one deleted after it was seen; one never seen, with 4.
func reached(id string, s *client.Slave, target client.State, p *progress) (bool, error) {
	if s == nil {
		if _, seen := p.last(id); !seen {
			return true, exitError{code: exitNotFound, msg: fmt.Sprintf("no such machine (waiting for %s)", target)}
		}
		return true, exitError{code: exitElsewhere, msg: fmt.Sprintf("deleted while waiting for %s", target)}
	}
	p.saw(id, *s)
	cur := s.CurrentState.State
	if cur == target {
		return true, nil
	}
	if !onTheWay(cur, target) {
		msg := fmt.Sprintf("went to %s%s, not %s", cur, by(s.CurrentState.User), target)
		if s.CurrentState.Message != "" {
			msg += ": " + s.CurrentState.Message
		}
		return true, exitError{code: exitElsewhere, msg: msg}
	}
	return false, nil
}

// waitEnded is why a wait stopped before its machine got there: the
// --wait-timeout, worded with the last state seen, or the cause of ctx.
func waitEnded(ctx context.Context, id string, target client.State, p *progress) error {
	if !errors.Is(context.Cause(ctx), errWaitTimeout) {
		return context.Cause(ctx)
	}
	last := "never read"
	if st, ok := p.last(id); ok {
		last = "still " + string(st)
	}
	return exitError{code: exitWaitTimeout, msg: fmt.Sprintf("not %s after --wait-timeout (%s)", target, last)}
}

func (a *app) waitCommand() *cobra.Command {
	var forText string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "wait ID...",
		Short: "Wait until machines reach a state (a drain to DECOMMISSIONED)",
		Long: `Waits until each machine is in the state of --for, printing a line each
time it changes state or, while it drains, its running-task count, and, on
a terminal, a status line. It reads the machines' state once (one list, or
one machine's details) and then follows the service's change feed: however
many machines, one request a second at most, one per 20 s when nothing
changes. Against a service without the feed it says so and reads each
machine every --poll.

With --for state=DECOMMISSIONED it follows a drain: STARTING_DECOMMISSION,
DECOMMISSIONING while the machine's reports still count running tasks,
DECOMMISSIONED when they count none. A machine that leaves that way
(activated, DEAD, deleted) ends its wait with exit code 10; --wait-timeout
ends the wait with exit code 9. It only reads: after an interrupt or a
restart, run it again.`,
		Example: `  fleetctl wait node-17 --for state=decommissioned
  fleetctl wait node-17 node-18 --for state=DECOMMISSIONED --wait-timeout 2h
  fleetctl list --state decommissioning -o name | xargs fleetctl wait --for state=decommissioned`,
		Args:              args(cobra.MinimumNArgs(1)),
		ValidArgsFunction: a.completeIDs(everyMachine, 0),
		RunE: func(cmd *cobra.Command, ids []string) error {
			st, ok := strings.CutPrefix(forText, "state=")
			if !ok {
				return usageError("--for %q: want state=STATE", forText)
			}
			target, err := parseState(st)
			if err != nil {
				return err
			}
			if err := wf.check(); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			ctx, cancel := wf.context(cmd.Context())
			defer cancel()
			p := newProgress(a.stderr, isTerminal(a.stderr), target)
			defer p.done()
			f, err := a.followStates(ctx, c, ids, wf.poll, nil, "")
			if err != nil {
				return err
			}
			slaves := make([]client.Slave, len(ids))
			for i, id := range ids {
				slaves[i].ID = id
			}
			return a.apply(ctx, slaves, len(ids), func(ctx context.Context, s client.Slave) error {
				return f.waitFor(ctx, s.ID, target, p, nil)
			}, string(target), p)
		},
	}
	cmd.Flags().StringVar(&forText, "for", "state=DECOMMISSIONED", "what to wait for: state=STATE")
	wf.register(cmd)
	return cmd
}

// apply does do for every machine, jobs at a time, and prints one line per
// machine in the order given: done on stdout, the failure on stderr. It
// returns the exit code of the first failure, having tried them all.
func (a *app) apply(ctx context.Context, slaves []client.Slave, jobs int, do func(context.Context, client.Slave) error, done string, p *progress) error {
	errs := make([]chan error, len(slaves))
	for i := range errs {
		errs[i] = make(chan error, 1)
	}
	// Started in order, jobs at a time: the guard of a drain relies on
	// the machines already draining being waited for first.
	var g errgroup.Group
	g.SetLimit(max(jobs, 1))
	go func() {
		for i, s := range slaves {
			g.Go(func() error {
				errs[i] <- do(ctx, s)
				return nil
			})
		}
	}()
	first := 0
	for i, s := range slaves {
		err := <-errs[i]
		if p != nil {
			p.done()
		}
		if err != nil && interrupted(ctx) {
			// What failed failed for the signal: run says so once.
			continue
		}
		var at alreadyError
		if errors.As(err, &at) {
			fmt.Fprintf(a.stdout, "%s: already %s\n", termtext.Visible(s.ID), termtext.Visible(string(at.state)))
			continue
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "fleetctl: %s: %s\n", termtext.Visible(s.ID), message(err))
			if first == 0 {
				first = exitCode(err)
			}
			continue
		}
		if done != "" {
			fmt.Fprintf(a.stdout, "%s: %s\n", termtext.Visible(s.ID), done)
		}
	}
	if first != 0 {
		return exitError{code: first}
	}
	return nil
}

// interrupted reports whether ctx ended for a signal (Ctrl-C, SIGTERM).
func interrupted(ctx context.Context) bool {
	var sig signalError
	return errors.As(context.Cause(ctx), &sig)
}

// alreadyError is a selected machine that a change leaves as it is: it
// is in the target state already. It is no failure.
type alreadyError struct{ state client.State }

func (e alreadyError) Error() string { return "already " + string(e.state) }

// sortByID orders a selection as list does.
func sortByID(slaves []client.Slave) {
	slices.SortFunc(slaves, func(x, y client.Slave) int { return strings.Compare(x.ID, y.ID) })
}
