package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// env is one case's store and clock, with the steps the cases are made of.
type env struct {
	t  *testing.T
	s  Store
	at int64 // epoch ms, a whole second: when the case starts
}

func (e *env) ctx() context.Context { return e.t.Context() }

func (e *env) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// report has the scheduler report machine id up, at e.at.
func (e *env) report(id string) {
	e.t.Helper()
	e.must(e.s.Apply(e.ctx(), id, machine.Observe(machine.Observation{ID: id, Host: "host-" + id, At: e.at}, e.at)))
}

// observe is a report of id on host, made and applied at at.
func (e *env) observe(id, host string, at int64) machine.Decide {
	return machine.Observe(machine.Observation{ID: id, Host: host, At: at}, at)
}

// userChange is a change of id to target by ops, decided at at.
func (e *env) userChange(id string, target machine.State, at int64, req ...machine.ChangeRequest) machine.Change {
	c := machine.Change{SlaveID: id, Target: target, User: "ops@example.com", Now: func() int64 { return at }}
	if len(req) > 0 {
		c.Request = req[0]
	}
	return c
}

// change applies a user's change of id to target decided at at.
func (e *env) change(id string, target machine.State, at int64, req ...machine.ChangeRequest) error {
	return e.s.Apply(e.ctx(), id, machine.UserChange(e.userChange(id, target, at, req...), limits))
}

// decommission reports each of ids and decommissions it, filling the limit
// with two.
func (e *env) decommission(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		e.report(id)
		e.must(e.change(id, machine.StartingDecommission, e.at+1))
	}
}

// revert is an expiring change request reverting to state after d.
func revert(state machine.State, d time.Duration) machine.ChangeRequest {
	return machine.ChangeRequest{DurationMillis: new(d.Milliseconds()), RevertToState: new(state), ActionID: "action-1"}
}

// counted counts decide's calls in calls.
func (e *env) counted(calls *int, decide machine.Decide) machine.Decide {
	return func(snap machine.Snapshot) (*machine.Plan, error) {
		*calls++
		return decide(snap)
	}
}

// applyAround applies decide to id with between run after the first read and
// before the first write, as a concurrent request that wins the race, and
// returns how often decide was called.
func (e *env) applyAround(id string, between func() error, decide machine.Decide) int {
	e.t.Helper()
	calls := 0
	e.must(e.s.Apply(e.ctx(), id, func(snap machine.Snapshot) (*machine.Plan, error) {
		if calls++; calls == 1 {
			e.must(between())
		}
		return decide(snap)
	}))
	return calls
}

// concurrently runs f(0) to f(n-1) at once and returns how many succeeded.
// A store may refuse a change that keeps losing races (fault.Unavailable)
// and the limit may refuse one; any other error fails the case.
func (e *env) concurrently(n int, f func(i int) error) int {
	e.t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	done := 0
	for _, err := range errs {
		switch {
		case err == nil:
			done++
		case fault.KindOf(err) != fault.KindUnavailable && !errors.Is(err, machine.ErrOverLimit):
			e.t.Errorf("got %v, want success or a refusal", err)
		}
	}
	return done
}

func (e *env) get(id string) *machine.Slave {
	e.t.Helper()
	s, err := e.s.Get(e.ctx(), id)
	e.must(err)
	return s
}

// history is the whole history of id as it reads at at.
func (e *env) history(id string, at int64) []machine.Update {
	e.t.Helper()
	h, err := e.s.History(e.ctx(), id, time.UnixMilli(at), 10_000)
	e.must(err)
	return h
}

func (e *env) wantHistory(id string, want ...machine.Update) {
	e.t.Helper()
	if got := e.history(id, e.at); fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Errorf("got history %+v, want %+v", got, want)
	}
}

// expiring is the expiring list as it reads at at.
func (e *env) expiring(at int64) []machine.Expiring {
	e.t.Helper()
	got, err := e.s.ListExpiring(e.ctx(), time.UnixMilli(at))
	e.must(err)
	return got
}

// wantIDs checks that a list holds the slaves ids, in that order.
// all collects what a listing calls back with, sorted by id: List has no
// order of its own.
func all(list func(ctx context.Context, each func(machine.Slave) error) error, ctx context.Context) ([]machine.Slave, error) {
	var out []machine.Slave
	err := list(ctx, func(s machine.Slave) error {
		out = append(out, s)
		return nil
	})
	slices.SortFunc(out, func(a, b machine.Slave) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// list is every slave, by id.
func (e *env) list() ([]machine.Slave, error) { return all(e.s.List, e.ctx()) }

// inState is the slaves in state, by id, as ListByState calls back with
// them (it must call back in id order).
func (e *env) inState(state machine.State) ([]machine.Slave, error) {
	var out []machine.Slave
	err := e.s.ListByState(e.ctx(), state, func(s machine.Slave) error {
		out = append(out, s)
		return nil
	})
	if !slices.IsSortedFunc(out, func(a, b machine.Slave) int { return strings.Compare(a.ID, b.ID) }) {
		e.t.Errorf("ListByState(%s) called back out of id order", state)
	}
	return out, err
}

func (e *env) wantIDs(list []machine.Slave, err error) func(ids ...string) {
	return func(ids ...string) {
		e.t.Helper()
		e.must(err)
		var got []string
		for _, s := range list {
			got = append(got, s.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(ids) {
			e.t.Errorf("got slaves %v, want %v", got, ids)
		}
	}
}

// wantOverLimit checks that err is the decommission limit's refusal with n
// slaves counting.
func (e *env) wantOverLimit(err error, n int) {
	e.t.Helper()
	want := machine.LimitError(n, limits.MaxDecommissioning)
	if !errors.Is(err, machine.ErrOverLimit) || fault.KindOf(err) != fault.KindInvalid || fault.Message(err) != fault.Message(want) {
		e.t.Errorf("got %v, want %v", err, want)
	}
}

// count shows a stored running-task count: its number, or "no".
func count(n *int) string {
	if n == nil {
		return "no"
	}
	return fmt.Sprint(*n)
}
