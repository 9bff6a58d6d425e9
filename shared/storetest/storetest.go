// Package storetest is the contract of a slave store: what the routes, the
// report handler and the scheduled jobs rely on when they read and change
// slaves (docs/behaviour.md, docs/tables.md). Run runs every case against a
// store; shared/memstore runs it in its unit tests and shared/dynamo against
// DynamoDB on moto in its integration tests, so the in-memory fake and the
// real adapter answer the same way (docs/architecture.md "The fake store and
// its contract").
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
)

// Store is every method the consumers declare in their Store interfaces.
type Store interface {
	slaves.Store
	inventory.Store
	jobs.Store
	DeleteExpiring(ctx context.Context, id string) error
}

// Open returns a new, empty store whose history entries expire
// historyRetention after they were superseded (0 keeps them).
type Open func(t *testing.T, historyRetention time.Duration) Store

// Run runs every case of the contract, each on a store of its own.
func Run(t *testing.T, open Open) {
	for _, c := range slices.Concat(cases, feedCases, importCases) {
		t.Run(c.name, func(t *testing.T) {
			c.run(&env{t: t, s: open(t, c.retention), at: time.Now().Truncate(time.Second).UnixMilli()})
		})
	}
}

// limits are the bounds every case's changes are decided with.
var limits = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}

const hour = int64(time.Hour / time.Millisecond)

// cases are the contract. To add one, say what the store guarantees as its
// name and check it through the store's methods only.
var cases = []struct {
	name      string
	retention time.Duration
	run       func(e *env)
}{
	// Reads.
	{name: "an unknown slave is nil, with no history and no expiring record", run: func(e *env) {
		if got := e.get("S1"); got != nil {
			e.t.Errorf("got %+v, want nil", got)
		}
		e.wantHistory("S1")
		if got := e.expiring(e.at); len(got) != 0 {
			e.t.Errorf("got records %+v, want none", got)
		}
	}},
	{name: "a reported machine is stored with its description, the time it was first seen and one history entry", run: func(e *env) {
		o := machine.Observation{ID: "S1", Host: "node-1", RackID: "r1", Attributes: map[string]string{"zone": "a"},
			Resources: []byte(`{"cpus":16}`), At: e.at}
		e.must(e.s.Apply(e.ctx(), "S1", machine.Observe(o, e.at+5)))
		current := machine.Update{SlaveID: "S1", State: machine.Active, Timestamp: e.at, Message: "New machine reported"}
		want := machine.Slave{ID: "S1", FirstSeenAt: e.at + 5, Current: current, Host: "node-1", RackID: "r1",
			Attributes: map[string]string{"zone": "a"}, Resources: []byte(`{"cpus":16}`), DescribedAt: e.at, Sequence: 1}
		if got := e.get("S1"); got == nil || !reflect.DeepEqual(*got, want) {
			e.t.Errorf("got %+v, want %+v", got, want)
		}
		e.wantHistory("S1", current)
	}},
	{name: "machines created together are stored as one at a time, and one that exists meanwhile is decided on what is stored", run: func(e *env) {
		// More than one batch; S007 exists already (reported on another
		// host), as when a machine appears between a report's scan and its
		// writes: its batch is applied one machine at a time.
		e.report("S007")
		var ids []string
		for i := range change.CreateBatch + 10 {
			ids = append(ids, fmt.Sprintf("S%03d", i))
		}
		errs := e.s.ApplyAbsent(e.ctx(), ids, func(id string) machine.Decide { return e.observe(id, "node-"+id, e.at+1) })
		for i, err := range errs {
			if err != nil {
				e.t.Errorf("%s: %v", ids[i], err)
			}
		}
		for _, id := range ids {
			got := e.get(id)
			if got == nil || got.Host != "node-"+id || got.Current.State != machine.Active {
				e.t.Fatalf("%s: got %+v, want it ACTIVE on node-%s", id, got, id)
			}
			if h := e.history(id, e.at+1); len(h) != 1 {
				e.t.Errorf("%s: got history %+v, want one entry (S007's described again, its state unchanged)", id, h)
			}
		}
		if got := e.get("S007"); got.FirstSeenAt != e.at || got.Current.Timestamp != e.at {
			e.t.Errorf("S007: got %+v, want it as first stored, only described again", got)
		}
		e.wantIDs(e.list())(ids...)
	}},
	{name: "List returns every slave sorted by id and ListByState those in one state", run: func(e *env) {
		for _, id := range []string{"S2", "S3", "S1"} {
			e.report(id)
		}
		e.must(e.change("S2", machine.Frozen, e.at+1))
		e.wantIDs(e.list())("S1", "S2", "S3")
		e.wantIDs(e.inState(machine.Active))("S1", "S3")
		e.wantIDs(e.inState(machine.Frozen))("S2")
		e.wantIDs(e.inState(machine.Dead))()
	}},
	{name: "the decommissioning set is not a slave", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.StartingDecommission, e.at+1))
		e.wantIDs(e.list())("S1")
		if got := e.get("#decommissioning"); got != nil {
			e.t.Errorf("got %+v, want no slave", got)
		}
	}},
	{name: "history is newest first and as long as the limit asks", run: func(e *env) {
		e.report("S1")
		for i, st := range []machine.State{machine.Frozen, machine.Active, machine.Frozen} {
			e.must(e.change("S1", st, e.at+int64(i+1)))
		}
		got, err := e.s.History(e.ctx(), "S1", time.UnixMilli(e.at), 2)
		e.must(err)
		if len(got) != 2 || got[0].State != machine.Frozen || got[0].Timestamp != e.at+3 || got[1].State != machine.Active {
			e.t.Errorf("got %+v, want the FROZEN entry at +3 ms, then the ACTIVE one", got)
		}
		for _, limit := range []int{0, -1} {
			if got, err := e.s.History(e.ctx(), "S1", time.UnixMilli(e.at), limit); err != nil || len(got) != 0 {
				e.t.Errorf("limit %d: got %+v, %v, want no entries", limit, got, err)
			}
		}
		if got := e.history("S1", e.at); len(got) != 4 {
			e.t.Errorf("got %d entries, want 4", len(got))
		}
	}},
	{name: "a superseded entry expires the retention after the change that superseded it, the current one never", retention: time.Hour, run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1000))
		expires := (e.at + 1000 + hour) / 1000 * 1000 // the second it expires in
		if got := e.history("S1", expires-1000); len(got) != 2 {
			e.t.Errorf("a second before: got %+v, want both entries", got)
		}
		if got := e.history("S1", expires); len(got) != 1 || got[0].State != machine.Frozen {
			e.t.Errorf("at expiry: got %+v, want the current entry alone", got)
		}
		if got := e.history("S1", e.at+1000*hour); len(got) != 1 {
			e.t.Errorf("long after: got %+v, want the current entry", got)
		}
	}},
	{name: "without a retention every entry is kept", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1000))
		if got := e.history("S1", e.at+10_000*hour); len(got) != 2 {
			e.t.Errorf("got %+v, want both entries", got)
		}
	}},

	// Applying plans.
	{name: "decide sees the slave and its expiring record as stored", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1, revert(machine.Active, time.Hour)))
		var seen machine.Snapshot
		e.must(e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
			seen = snap
			return nil, nil
		}))
		records := e.expiring(e.at)
		if seen.Slave == nil || !reflect.DeepEqual(*seen.Slave, *e.get("S1")) || seen.Expiring == nil || len(records) != 1 ||
			!reflect.DeepEqual(*seen.Expiring, records[0]) {
			e.t.Errorf("got snapshot %+v, %+v; want the stored slave and record %+v", seen.Slave, seen.Expiring, records)
		}
	}},
	{name: "a nil plan writes nothing and decide's error comes back as it is", run: func(e *env) {
		e.report("S1")
		before := e.get("S1")
		e.must(e.s.Apply(e.ctx(), "S1", func(machine.Snapshot) (*machine.Plan, error) { return nil, nil }))
		refusal := errors.New("refused")
		if err := e.s.Apply(e.ctx(), "S1", func(machine.Snapshot) (*machine.Plan, error) { return nil, refusal }); !errors.Is(err, refusal) {
			e.t.Errorf("got %v, want decide's error", err)
		}
		if got := e.get("S1"); !reflect.DeepEqual(got, before) || len(e.history("S1", e.at)) != 1 {
			e.t.Errorf("got %+v, want %+v and one entry", got, before)
		}
	}},
	{name: "a change writes the state and its entry, not the description it read", run: func(e *env) {
		e.report("S1")
		e.must(e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
			slave := *snap.Slave
			slave.Host, slave.Attributes = "elsewhere", map[string]string{"changed": "yes"}
			entry := machine.Update{SlaveID: "S1", State: machine.Frozen, Timestamp: e.at + 1, User: "ops@example.com", Message: "disk"}
			slave.Current = entry
			return &machine.Plan{Kind: machine.Transitions, Slave: slave, Entry: &entry}, nil
		}))
		got := e.get("S1")
		if got.Current.State != machine.Frozen || got.Current.User != "ops@example.com" || got.Host != "host-S1" || len(got.Attributes) != 0 {
			e.t.Errorf("got %+v, want FROZEN by ops with the reported description", got)
		}
		if h := e.history("S1", e.at); len(h) != 2 || h[0] != got.Current {
			e.t.Errorf("got history %+v, want the current state on top", h)
		}
	}},
	{name: "a change that describes writes the description too", run: func(e *env) {
		e.report("S1")
		e.must(e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
			slave := *snap.Slave
			slave.Host, slave.DescribedAt = "elsewhere", e.at+1
			entry := machine.Update{SlaveID: "S1", State: machine.Dead, Timestamp: e.at + 1}
			slave.Current = entry
			return &machine.Plan{Kind: machine.Transitions, Slave: slave, Entry: &entry, Describe: true}, nil
		}))
		if got := e.get("S1"); got.Current.State != machine.Dead || got.Host != "elsewhere" || got.DescribedAt != e.at+1 {
			e.t.Errorf("got %+v, want DEAD, described anew", got)
		}
	}},
	{name: "a plan without an entry writes the description alone", run: func(e *env) {
		e.report("S1")
		e.must(e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
			slave := *snap.Slave
			slave.Host, slave.RackID, slave.Resources, slave.DescribedAt = "elsewhere", "r9", []byte(`{"gpus":1}`), e.at+1
			slave.Current.State, slave.FirstSeenAt = machine.Dead, 1
			return &machine.Plan{Kind: machine.Describes, Slave: slave, Describe: true}, nil
		}))
		got := e.get("S1")
		if got.Host != "elsewhere" || got.RackID != "r9" || string(got.Resources) != `{"gpus":1}` || got.DescribedAt != e.at+1 {
			e.t.Errorf("got %+v, want the new description", got)
		}
		if got.Current.State != machine.Active || got.FirstSeenAt != e.at || len(e.history("S1", e.at)) != 1 {
			e.t.Errorf("got %+v, want the state and first-seen time untouched, no entry", got)
		}
	}},
	{name: "a plan that only drops the expiring record leaves the slave alone", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1, revert(machine.Active, time.Hour)))
		before := e.get("S1")
		e.must(e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
			slave := *snap.Slave
			slave.Host, slave.Current.State = "elsewhere", machine.Dead
			return &machine.Plan{Kind: machine.DropsExpiring, Slave: slave, DropExpiring: true}, nil
		}))
		if got := e.expiring(e.at); len(got) != 0 {
			e.t.Errorf("got records %+v, want none", got)
		}
		before.Sequence++ // the record's deletion is in the feed
		if got := e.get("S1"); !reflect.DeepEqual(got, before) || len(e.history("S1", e.at)) != 2 {
			e.t.Errorf("got %+v, want %+v with its two entries", got, before)
		}
	}},
	{name: "a change stores the expiring record it creates, and a change that clears it deletes it", run: func(e *env) {
		e.report("S1")
		req := revert(machine.Active, time.Hour)
		e.must(e.change("S1", machine.Frozen, e.at+1, req))
		want := machine.Expiring{MachineID: "S1", User: "ops@example.com", StartMillis: e.at + 1, ActionID: req.ActionID,
			RevertTo: machine.Active, Request: req}
		if got := e.expiring(e.at); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			e.t.Errorf("got %+v, want %+v", got, want)
		}
		e.must(e.change("S1", machine.Active, e.at+2))
		if got := e.expiring(e.at); len(got) != 0 {
			e.t.Errorf("after activate: got %+v, want no record", got)
		}
	}},
	{name: "a change decided on a state that changed before its write is decided again", run: func(e *env) {
		e.report("S1")
		calls := e.applyAround("S1", func() error { return e.change("S1", machine.Dead, e.at+1) }, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+2), limits))
		if h := e.history("S1", e.at); calls != 2 || len(h) != 3 || h[0].State != machine.Frozen || h[1].State != machine.Dead {
			e.t.Errorf("got %d decisions and history %+v, want 2 and FROZEN after DEAD", calls, h)
		}
	}},
	{name: "a description decided on one another report replaced before its write is decided again", run: func(e *env) {
		e.report("S1")
		newer := e.observe("S1", "newer", e.at+20)
		calls := e.applyAround("S1", func() error { return e.s.Apply(e.ctx(), "S1", newer) }, e.observe("S1", "older", e.at+10))
		if got := e.get("S1"); calls != 2 || got.Host != "newer" {
			e.t.Errorf("got %d decisions and host %q, want 2 and the newer report's", calls, got.Host)
		}
	}},
	{name: "a description decided on a state that changed before its write is decided again", run: func(e *env) {
		e.report("S1")
		calls := e.applyAround("S1", func() error { return e.change("S1", machine.Frozen, e.at+5) }, e.observe("S1", "refreshed", e.at+10))
		if got := e.get("S1"); calls != 2 || got.Host != "refreshed" || got.Current.State != machine.Frozen {
			e.t.Errorf("got %d decisions and %+v, want 2, FROZEN and refreshed", calls, got)
		}
	}},
	{name: "dropping a record that was deleted before the write is decided again", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1, revert(machine.Active, time.Hour)))
		var seen []*machine.Expiring
		calls := e.applyAround("S1", func() error { return e.s.DeleteExpiring(e.ctx(), "S1") }, func(snap machine.Snapshot) (*machine.Plan, error) {
			seen = append(seen, snap.Expiring)
			if snap.Expiring == nil {
				return nil, nil
			}
			return &machine.Plan{Kind: machine.DropsExpiring, Slave: *snap.Slave, DropExpiring: true}, nil
		})
		if calls != 2 || seen[1] != nil {
			e.t.Errorf("got %d decisions, the last on record %+v, want 2, the last on none", calls, seen[len(seen)-1])
		}
	}},

	// The decommission limit.
	{name: "a decommission over the limit is refused and writes nothing", run: func(e *env) {
		e.decommission("S1", "S2")
		e.report("S3")
		err := e.change("S3", machine.StartingDecommission, e.at+10)
		e.wantOverLimit(err, 2)
		if got := e.get("S3"); got.Current.State != machine.Active || len(e.history("S3", e.at)) != 1 {
			e.t.Errorf("got %+v, want S3 left ACTIVE with one entry", got)
		}
	}},
	{name: "a decommission that another filled the limit before its write is refused on a new decision", run: func(e *env) {
		e.decommission("S1")
		e.report("S2")
		e.report("S3")
		var err error
		calls := 0
		err = e.s.Apply(e.ctx(), "S3", func(snap machine.Snapshot) (*machine.Plan, error) {
			if calls++; calls == 1 {
				e.must(e.change("S2", machine.StartingDecommission, e.at+2))
			}
			return machine.UserChange(e.userChange("S3", machine.StartingDecommission, e.at+3), limits)(snap)
		})
		if calls != 2 {
			e.t.Errorf("got %d decisions, want 2", calls)
		}
		e.wantOverLimit(err, 2)
	}},
	{name: "moving between the two counting states needs no free place", run: func(e *env) {
		e.decommission("S1", "S2")
		e.must(e.s.Apply(e.ctx(), "S1", machine.Observe(machine.Observation{ID: "S1", Host: "host-S1", RunningTasks: new(3), At: e.at + 5}, e.at+5)))
		if got := e.get("S1"); got.Current.State != machine.Decommissioning {
			e.t.Errorf("got %s, want DECOMMISSIONING", got.Current.State)
		}
		e.report("S3")
		e.wantOverLimit(e.change("S3", machine.StartingDecommission, e.at+10), 2)
	}},
	{name: "leaving the decommissioning states frees a place", run: func(e *env) {
		e.decommission("S1", "S2")
		e.must(e.change("S1", machine.Active, e.at+5))
		e.report("S3")
		e.must(e.change("S3", machine.StartingDecommission, e.at+10))
	}},
	{name: "a decommissioned slave no longer counts", run: func(e *env) {
		e.decommission("S1", "S2")
		e.must(e.s.Apply(e.ctx(), "S1", machine.Observe(machine.Observation{ID: "S1", Host: "host-S1", RunningTasks: new(0), At: e.at + 5}, e.at+5)))
		e.report("S3")
		e.must(e.change("S3", machine.StartingDecommission, e.at+10))
	}},
	{name: "a draining slave's running-task count is stored and read back, and leaving the draining states clears it", run: func(e *env) {
		e.decommission("S1", "S2")
		tasks := func(id string, n int, at int64) {
			e.t.Helper()
			e.must(e.s.Apply(e.ctx(), id, machine.Observe(machine.Observation{ID: id, Host: "host-" + id, RunningTasks: new(n), At: at}, at)))
		}
		wantTasks := func(id string, want *int) {
			e.t.Helper()
			got := e.get(id)
			all, err := e.list()
			e.must(err)
			for _, s := range all {
				if s.ID == id && !reflect.DeepEqual(s.RunningTasks, got.RunningTasks) {
					e.t.Errorf("%s: List has running tasks %v, Get %v", id, s.RunningTasks, got.RunningTasks)
				}
			}
			switch {
			case want == nil && got.RunningTasks != nil:
				e.t.Errorf("%s in %s: got %d running tasks, want none stored", id, got.Current.State, *got.RunningTasks)
			case want != nil && (got.RunningTasks == nil || *got.RunningTasks != *want):
				e.t.Errorf("%s in %s: got %s running tasks, want %d", id, got.Current.State, count(got.RunningTasks), *want)
			}
		}
		tasks("S1", 3, e.at+5)
		wantTasks("S1", new(3))
		tasks("S1", 1, e.at+6)
		wantTasks("S1", new(1))
		e.must(e.change("S1", machine.Active, e.at+10))
		wantTasks("S1", nil)
		tasks("S1", 4, e.at+15)
		wantTasks("S1", nil)

		tasks("S2", 2, e.at+5)
		wantTasks("S2", new(2))
		tasks("S2", 0, e.at+6)
		if got := e.get("S2"); got.Current.State != machine.Decommissioned {
			e.t.Errorf("S2: got %s, want DECOMMISSIONED", got.Current.State)
		}
		wantTasks("S2", nil)
	}},
	{name: "a change out of the draining states clears a count a report stored after the change read the slave", run: func(e *env) {
		// A report's refresh of the description does not move the version a
		// state change is conditioned on, so the change must clear the count
		// whatever it read.
		e.decommission("S1")
		report := func(tasks *int, host string, at int64) {
			e.t.Helper()
			e.must(e.s.Apply(e.ctx(), "S1", machine.Observe(machine.Observation{ID: "S1", Host: host, RunningTasks: tasks, At: at}, at)))
		}
		report(new(3), "host-S1", e.at+5)    // DECOMMISSIONING, 3 tasks
		report(nil, "host-S1-moved", e.at+6) // a report without a count: none stored
		if got := e.get("S1"); got.Current.State != machine.Decommissioning || got.RunningTasks != nil {
			e.t.Fatalf("got %s with %s running tasks, want DECOMMISSIONING with none", got.Current.State, count(got.RunningTasks))
		}
		calls := 0
		e.must(e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
			if calls++; calls == 1 {
				report(new(2), "host-S1-moved", e.at+7) // lands between the read and the write
			}
			return machine.UserChange(e.userChange("S1", machine.Active, e.at+10), limits)(snap)
		}))
		switch got := e.get("S1"); {
		case got.Current.State != machine.Active:
			e.t.Errorf("got %s, want ACTIVE", got.Current.State)
		case got.RunningTasks != nil:
			e.t.Errorf("got %d running tasks stored in ACTIVE, want none (decided %d times)", *got.RunningTasks, calls)
		}
	}},
	{name: "a plan is written as it says and no more: the running-task count alone, set and removed", run: func(e *env) {
		e.decommission("S1")
		only := func(tasks *int) machine.Decide {
			return func(snap machine.Snapshot) (*machine.Plan, error) {
				slave := *snap.Slave
				slave.Host, slave.RunningTasks = "not written", tasks
				return &machine.Plan{Kind: machine.Describes, Slave: slave, Tasks: true}, nil
			}
		}
		before := e.get("S1")
		e.must(e.s.Apply(e.ctx(), "S1", only(new(4))))
		want := *before
		want.RunningTasks, want.Sequence = new(4), before.Sequence+1
		if got := e.get("S1"); !reflect.DeepEqual(*got, want) {
			e.t.Errorf("got %+v, want %+v", *got, want)
		}
		e.must(e.s.Apply(e.ctx(), "S1", only(nil)))
		want.RunningTasks, want.Sequence = nil, before.Sequence+2
		if got := e.get("S1"); !reflect.DeepEqual(*got, want) {
			e.t.Errorf("got %+v, want %+v", *got, want)
		}
	}},
	{name: "deleting a decommissioning slave frees its place", run: func(e *env) {
		e.decommission("S1", "S2")
		if ok, err := e.s.Delete(e.ctx(), "S1", nil); !ok || err != nil {
			e.t.Fatalf("got %v, %v, want S1 deleted", ok, err)
		}
		e.report("S3")
		e.must(e.change("S3", machine.StartingDecommission, e.at+10))
	}},
	{name: "a plan without a limit is never refused by it", run: func(e *env) {
		for _, id := range []string{"S1", "S2", "S3"} {
			e.report(id)
			e.must(e.s.Apply(e.ctx(), id, machine.UserChange(e.userChange(id, machine.StartingDecommission, e.at+1), machine.Limits{})))
		}
		e.wantIDs(e.inState(machine.StartingDecommission))("S1", "S2", "S3")
	}},
	{name: "entering or leaving the decommissioning states is stamped after the last change that did", run: func(e *env) {
		e.report("S1")
		e.report("S2")
		e.report("S3")
		ahead := e.at + 30_000 // another instance's clock, half a minute ahead
		e.must(e.change("S1", machine.StartingDecommission, ahead))
		e.must(e.change("S2", machine.StartingDecommission, e.at+1))
		e.must(e.change("S3", machine.Frozen, e.at+2))
		e.must(e.change("S1", machine.Active, e.at+3))
		for id, want := range map[string]int64{"S2": ahead + 1, "S3": e.at + 2, "S1": ahead + 2} {
			got := e.get(id)
			if h := e.history(id, e.at); got.Current.Timestamp != want || h[0].Timestamp != want {
				e.t.Errorf("%s: got state at %d and entry at %d, want %d", id, got.Current.Timestamp, h[0].Timestamp, want)
			}
		}
	}},
	{name: "a last change more than a minute ahead is not followed", run: func(e *env) {
		e.report("S1")
		e.report("S2")
		e.must(e.change("S1", machine.StartingDecommission, e.at+2*60_000))
		e.must(e.change("S2", machine.StartingDecommission, e.at+1))
		if got := e.get("S2").Current.Timestamp; got != e.at+1 {
			e.t.Errorf("got %d, want %d", got, e.at+1)
		}
	}},

	// Change requests a client may retry.
	{name: "a retry under the same key gets the first answer without being decided again", run: func(e *env) {
		e.report("S1")
		once := machine.Idempotency{Key: "k1", Fingerprint: "freeze S1", At: e.at}
		calls := 0
		freeze := e.counted(&calls, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits))
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, freeze))
		once.At += 1000
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, freeze))
		if h := e.history("S1", e.at); calls != 1 || len(h) != 2 {
			e.t.Errorf("got %d decisions and %d entries, want one of each change", calls, len(h))
		}
	}},
	{name: "a refusal is answered again even once the change would be allowed", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1))
		once := machine.Idempotency{Key: "k1", Fingerprint: "freeze S1", At: e.at}
		freeze := machine.UserChange(e.userChange("S1", machine.Frozen, e.at+2), limits)
		first := e.s.ApplyOnce(e.ctx(), "S1", once, freeze)
		if fault.KindOf(first) != fault.KindConflict {
			e.t.Fatalf("got %v, want a conflict", first)
		}
		e.must(e.change("S1", machine.Active, e.at+3))
		if again := e.s.ApplyOnce(e.ctx(), "S1", once, freeze); fault.KindOf(again) != fault.KindConflict || again.Error() != first.Error() {
			e.t.Errorf("got %v, want the first answer %v", again, first)
		}
		if got := e.get("S1"); got.Current.State != machine.Active {
			e.t.Errorf("got %s, want ACTIVE: the retry changes nothing", got.Current.State)
		}
	}},
	{name: "a refusal by the limit is answered again as the same refusal", run: func(e *env) {
		e.decommission("S1", "S2")
		e.report("S3")
		once := machine.Idempotency{Key: "k1", Fingerprint: "decommission S3", At: e.at}
		decommission := machine.UserChange(e.userChange("S3", machine.StartingDecommission, e.at+5), limits)
		first := e.s.ApplyOnce(e.ctx(), "S3", once, decommission)
		e.wantOverLimit(first, 2)
		e.must(e.change("S1", machine.Active, e.at+6))
		if again := e.s.ApplyOnce(e.ctx(), "S3", once, decommission); fault.KindOf(again) != fault.KindInvalid || fault.Message(again) != fault.Message(first) {
			e.t.Errorf("got %v, want the first answer %v", again, first)
		}
	}},
	{name: "another request under a key already used is a conflict", run: func(e *env) {
		e.report("S1")
		once := machine.Idempotency{Key: "k1", Fingerprint: "freeze S1", At: e.at}
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)))
		once.Fingerprint = "activate S1"
		err := e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Active, e.at+2), limits))
		if want := machine.ReusedKey("k1"); fault.KindOf(err) != fault.KindConflict || err.Error() != want.Error() {
			e.t.Errorf("got %v, want %v", err, want)
		}
		if got := e.get("S1"); got.Current.State != machine.Frozen {
			e.t.Errorf("got %s, want FROZEN", got.Current.State)
		}
	}},
	{name: "a key is remembered for the idempotency window only", run: func(e *env) {
		e.report("S1")
		once := machine.Idempotency{Key: "k1", Fingerprint: "freeze S1", At: e.at}
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)))
		e.must(e.change("S1", machine.Active, e.at+2))
		once.At += machine.IdempotencyWindow.Milliseconds()
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Frozen, once.At), limits)))
		if h := e.history("S1", e.at); len(h) != 4 {
			e.t.Errorf("got %d entries, want 4: the late retry is a new request", len(h))
		}
	}},
	{name: "a request without a key is decided every time", run: func(e *env) {
		e.report("S1")
		once := machine.Idempotency{Fingerprint: "freeze S1", At: e.at}
		freeze := machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, freeze))
		if err := e.s.ApplyOnce(e.ctx(), "S1", once, freeze); fault.KindOf(err) != fault.KindConflict {
			e.t.Errorf("got %v, want the conflict of a slave already FROZEN", err)
		}
	}},
	{name: "a key reused for another slave is a conflict and changes nothing", run: func(e *env) {
		e.report("S1")
		e.report("S2")
		once := machine.Idempotency{Key: "k1", Caller: "ops", Fingerprint: "freeze S1", At: e.at}
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)))
		other := once
		other.Fingerprint, other.At = "freeze S2", e.at+1000
		err := e.s.ApplyOnce(e.ctx(), "S2", other, machine.UserChange(e.userChange("S2", machine.Frozen, e.at+2), limits))
		if want := machine.ReusedKey("k1"); fault.KindOf(err) != fault.KindConflict || err.Error() != want.Error() {
			e.t.Errorf("got %v, want %v", err, want)
		}
		e.wantIDs(e.inState(machine.Frozen))("S1")
		if h := e.history("S2", e.at); len(h) != 1 {
			e.t.Errorf("got %d entries of S2, want its first only", len(h))
		}
	}},
	{name: "a refusal holds its key for every slave", run: func(e *env) {
		e.report("S2")
		once := machine.Idempotency{Key: "k1", Caller: "ops", Fingerprint: "freeze S1", At: e.at}
		if err := e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)); fault.KindOf(err) != fault.KindNotFound {
			e.t.Fatalf("got %v, want S1 not found", err)
		}
		other := once
		other.Fingerprint = "freeze S2"
		if err := e.s.ApplyOnce(e.ctx(), "S2", other, machine.UserChange(e.userChange("S2", machine.Frozen, e.at+2), limits)); fault.KindOf(err) != fault.KindConflict {
			e.t.Errorf("got %v, want the conflict of a reused key", err)
		}
		e.wantIDs(e.inState(machine.Frozen))()
	}},
	{name: "another caller's same key is another request", run: func(e *env) {
		e.report("S1")
		e.report("S2")
		mine := machine.Idempotency{Key: "k1", Caller: "ops", Fingerprint: "freeze S1", At: e.at}
		e.must(e.s.ApplyOnce(e.ctx(), "S1", mine, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)))
		theirs := machine.Idempotency{Key: "k1", Caller: "dev", Fingerprint: "freeze S2", At: e.at + 1000}
		e.must(e.s.ApplyOnce(e.ctx(), "S2", theirs, machine.UserChange(e.userChange("S2", machine.Frozen, e.at+2), limits)))
		e.wantIDs(e.inState(machine.Frozen))("S1", "S2")
		// The same request as the first caller's is decided for this caller,
		// never answered with the first caller's success.
		theirs = machine.Idempotency{Key: "k2", Caller: "dev", Fingerprint: "freeze S1", At: e.at + 2000}
		mine.Key = "k2"
		e.must(e.s.ApplyOnce(e.ctx(), "S1", mine, machine.UserChange(e.userChange("S1", machine.Active, e.at+3), limits)))
		if err := e.s.ApplyOnce(e.ctx(), "S1", theirs, machine.UserChange(e.userChange("S1", machine.Active, e.at+4), limits)); fault.KindOf(err) != fault.KindConflict {
			e.t.Errorf("got %v, want the conflict of a slave already ACTIVE", err)
		}
	}},
	{name: "a failure that is not a refusal is not remembered", run: func(e *env) {
		e.report("S1")
		once := machine.Idempotency{Key: "k1", Fingerprint: "freeze S1", At: e.at}
		busy := func(machine.Snapshot) (*machine.Plan, error) { return nil, fault.Unavailable("busy") }
		if err := e.s.ApplyOnce(e.ctx(), "S1", once, busy); fault.KindOf(err) != fault.KindUnavailable {
			e.t.Fatalf("got %v, want the failure", err)
		}
		e.must(e.s.ApplyOnce(e.ctx(), "S1", once, machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)))
		if got := e.get("S1"); got.Current.State != machine.Frozen {
			e.t.Errorf("got %s, want the retry applied", got.Current.State)
		}
	}},

	// Expiring records.
	{name: "the expiring list holds the records sorted by slave until a week after they fell due", run: func(e *env) {
		for _, id := range []string{"S2", "S1"} {
			e.report(id)
			e.must(e.change(id, machine.Frozen, e.at+1, revert(machine.Active, time.Hour)))
		}
		due := e.at + 1 + hour
		for _, tt := range []struct {
			at   int64
			want []string
		}{{e.at, []string{"S1", "S2"}}, {due + 6*24*hour, []string{"S1", "S2"}}, {due + 8*24*hour, nil}} {
			var got []string
			for _, r := range e.expiring(tt.at) {
				got = append(got, r.MachineID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				e.t.Errorf("%d h after due: got %v, want %v", (tt.at-due)/hour, got, tt.want)
			}
		}
	}},
	{name: "KeepDeferred keeps a record listed a week past now, moving it at most once a day", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at, revert(machine.Active, time.Hour)))
		due := e.at + hour
		kept := due + 6*24*hour
		e.must(e.s.KeepDeferred(e.ctx(), "S1", kept))
		e.must(e.s.KeepDeferred(e.ctx(), "S1", kept+hour)) // within a day: not moved again
		for _, tt := range []struct {
			at     int64
			listed bool
		}{{due + 8*24*hour, true}, {kept + 7*24*hour - 2000, true}, {kept + 7*24*hour + 1000, false}} {
			if got := len(e.expiring(tt.at)) == 1; got != tt.listed {
				e.t.Errorf("%d h after due: got listed %v, want %v", (tt.at-due)/hour, got, tt.listed)
			}
		}
		e.must(e.s.KeepDeferred(e.ctx(), "S9", kept))
		if got := e.expiring(e.at); len(got) != 1 {
			e.t.Errorf("got %+v, want S1's record alone", got)
		}
	}},
	{name: "DeleteExpiring removes the record and nothing else", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1, revert(machine.Active, time.Hour)))
		e.must(e.s.DeleteExpiring(e.ctx(), "S1"))
		e.must(e.s.DeleteExpiring(e.ctx(), "S9"))
		if got := e.expiring(e.at); len(got) != 0 {
			e.t.Errorf("got %+v, want no record", got)
		}
		if got := e.get("S1"); got.Current.State != machine.Frozen || len(e.history("S1", e.at)) != 2 {
			e.t.Errorf("got %+v, want S1 FROZEN with its two entries", got)
		}
	}},
	{name: "Due lists the records due before now, oldest first, with when each fell due", run: func(e *env) {
		for id, d := range map[string]time.Duration{"S1": time.Hour, "S2": 30 * time.Minute, "S3": 2 * time.Hour} {
			e.report(id)
			e.must(e.change(id, machine.Frozen, e.at, revert(machine.Active, d)))
		}
		got, err := e.s.Due(e.ctx(), e.at+90*60_000)
		e.must(err)
		want := []machine.Due{{SlaveID: "S2", At: e.at + hour/2}, {SlaveID: "S1", At: e.at + hour}}
		if !reflect.DeepEqual(got, want) {
			e.t.Errorf("got %+v, want %+v", got, want)
		}
		if got, err := e.s.Due(e.ctx(), e.at+hour/2); err != nil || len(got) != 0 {
			e.t.Errorf("at the instant S2 falls due: got %+v, %v, want none due yet", got, err)
		}
	}},
	{name: "a due revert applies once", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at, revert(machine.Active, time.Hour)))
		at := e.at + hour + 1
		var first, second machine.Outcome
		e.must(e.s.Apply(e.ctx(), "S1", machine.Expire("S1", func() int64 { return at }, limits, &first)))
		e.must(e.s.Apply(e.ctx(), "S1", machine.Expire("S1", func() int64 { return at }, limits, &second)))
		h := e.history("S1", e.at)
		if first != machine.Applied || second != machine.Superseded || len(h) != 3 || h[0].Message != machine.ExpiryMessage {
			e.t.Errorf("got %s then %s and history %+v, want applied once, by the expiry", first, second, h)
		}
		if got, _ := e.s.Due(e.ctx(), at+hour); len(got) != 0 {
			e.t.Errorf("got due %+v, want none", got)
		}
	}},
	{name: "a revert the limit refuses keeps its record", run: func(e *env) {
		e.decommission("S1", "S2")
		e.report("S3")
		e.must(e.change("S3", machine.Frozen, e.at, revert(machine.StartingDecommission, time.Hour)))
		var outcome machine.Outcome
		err := e.s.Apply(e.ctx(), "S3", machine.Expire("S3", func() int64 { return e.at + hour + 1 }, limits, &outcome))
		e.wantOverLimit(err, 2)
		if got, _ := e.s.Due(e.ctx(), e.at+2*hour); len(got) != 1 || len(e.expiring(e.at)) != 1 {
			e.t.Errorf("got due %+v, want S3's record kept", got)
		}
	}},

	// Deletes.
	{name: "Delete removes the slave, its whole history and its expiring record", run: func(e *env) {
		e.report("S1")
		e.must(e.change("S1", machine.Frozen, e.at+1, revert(machine.Active, time.Hour)))
		if ok, err := e.s.Delete(e.ctx(), "S1", nil); !ok || err != nil {
			e.t.Fatalf("got %v, %v, want deleted", ok, err)
		}
		if got := e.get("S1"); got != nil {
			e.t.Errorf("got %+v, want nil", got)
		}
		if got, _ := e.s.Due(e.ctx(), e.at+2*hour); len(got) != 0 {
			e.t.Errorf("got due %+v, want none", got)
		}
		e.wantHistory("S1")
		e.report("S1") // the same id again starts afresh
		if got := e.history("S1", e.at); len(got) != 1 {
			e.t.Errorf("got %+v, want the new slave's entry alone", got)
		}
	}},
	{name: "a history longer than one transaction is deleted whole", run: func(e *env) {
		e.report("S1")
		for i := range 110 {
			e.must(e.change("S1", []machine.State{machine.Frozen, machine.Active}[i%2], e.at+int64(i+1)))
		}
		if ok, err := e.s.Delete(e.ctx(), "S1", nil); !ok || err != nil {
			e.t.Fatalf("got %v, %v, want deleted", ok, err)
		}
		e.report("S1")
		if got := e.history("S1", e.at); len(got) != 1 {
			e.t.Errorf("got %d entries, want the new slave's alone", len(got))
		}
	}},
	{name: "Delete of an unknown slave removes nothing", run: func(e *env) {
		if ok, err := e.s.Delete(e.ctx(), "S9", nil); ok || err != nil {
			e.t.Errorf("got %v, %v, want false, nil", ok, err)
		}
	}},
	{name: "Delete with match removes the slave only while match holds", run: func(e *env) {
		e.report("S1")
		dead := func(s machine.Slave) bool { return s.Current.State == machine.Dead }
		if ok, err := e.s.Delete(e.ctx(), "S1", dead); ok || err != nil || e.get("S1") == nil {
			e.t.Errorf("got %v, %v, want S1 kept", ok, err)
		}
		e.must(e.change("S1", machine.Dead, e.at+1))
		if ok, err := e.s.Delete(e.ctx(), "S1", dead); !ok || err != nil || e.get("S1") != nil {
			e.t.Errorf("got %v, %v, want S1 deleted", ok, err)
		}
	}},
	{name: "DeleteDead removes the DEAD slaves that died before the cutoff", run: func(e *env) {
		for id, died := range map[string]int64{"S1": e.at + 1, "S2": e.at + 10*60_000} {
			e.report(id)
			e.must(e.change(id, machine.Dead, died))
		}
		e.report("S3")
		n, err := e.s.DeleteDead(e.ctx(), e.at+5*60_000)
		e.must(err)
		if n != 1 {
			e.t.Errorf("got %d removed, want 1", n)
		}
		e.wantIDs(e.list())("S2", "S3")
		if n, err := e.s.DeleteDead(e.ctx(), e.at+5*60_000); n != 0 || err != nil {
			e.t.Errorf("again: got %d, %v, want none removed", n, err)
		}
	}},

	// Concurrency.
	{name: "concurrent changes of one slave lose no update", run: func(e *env) {
		e.report("S1")
		done := e.concurrently(8, func(int) error {
			return e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
				time.Sleep(time.Millisecond) // long enough for the changes to overlap
				slave := *snap.Slave
				n, _ := strconv.Atoi(slave.Attributes["n"])
				slave.Attributes = map[string]string{"n": strconv.Itoa(n + 1)}
				slave.DescribedAt++
				entry := machine.Update{SlaveID: "S1", State: machine.Frozen, Timestamp: e.at + int64(n+1), Message: strconv.Itoa(n + 1)}
				if slave.Current.State == machine.Frozen {
					entry.State = machine.Active
				}
				slave.Current = entry
				return &machine.Plan{Kind: machine.Transitions, Slave: slave, Entry: &entry, Describe: true}, nil
			})
		})
		got := e.get("S1")
		if got.Attributes["n"] != strconv.Itoa(done) || len(e.history("S1", e.at)) != done+1 {
			e.t.Errorf("got n = %s and %d entries after %d changes, want every change counted", got.Attributes["n"], len(e.history("S1", e.at)), done)
		}
	}},
	{name: "concurrent reports and changes of one slave lose neither", run: func(e *env) {
		e.report("S1")
		var mu sync.Mutex
		refreshed := 0
		changed := e.concurrently(8, func(i int) error {
			if i%2 == 0 {
				return e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
					time.Sleep(time.Millisecond) // long enough for the changes to overlap
					entry := machine.Update{SlaveID: "S1", State: machine.Frozen, Timestamp: e.at + int64(i)}
					if snap.Slave.Current.State == machine.Frozen {
						entry.State = machine.Active
					}
					slave := *snap.Slave
					slave.Current = entry
					return &machine.Plan{Kind: machine.Transitions, Slave: slave, Entry: &entry}, nil
				})
			}
			err := e.s.Apply(e.ctx(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
				time.Sleep(time.Millisecond) // long enough for the changes to overlap
				slave := *snap.Slave
				n, _ := strconv.Atoi(slave.Attributes["r"])
				slave.Attributes = map[string]string{"r": strconv.Itoa(n + 1)}
				slave.DescribedAt++
				return &machine.Plan{Kind: machine.Describes, Slave: slave, Describe: true}, nil
			})
			if err == nil {
				mu.Lock()
				refreshed++
				mu.Unlock()
			}
			return err
		})
		changed -= refreshed
		got := e.get("S1")
		if got.Attributes["r"] != strconv.Itoa(refreshed) || len(e.history("S1", e.at)) != changed+1 {
			e.t.Errorf("got r = %s and %d entries after %d refreshes and %d changes, want each counted",
				got.Attributes["r"], len(e.history("S1", e.at)), refreshed, changed)
		}
	}},
	{name: "the decommission limit holds under concurrent decommissions", run: func(e *env) {
		ids := []string{"S1", "S2", "S3", "S4", "S5", "S6"}
		for _, id := range ids {
			e.report(id)
		}
		done := e.concurrently(len(ids), func(i int) error {
			return e.change(ids[i], machine.StartingDecommission, e.at+1)
		})
		in, err := e.inState(machine.StartingDecommission)
		e.must(err)
		if done > limits.MaxDecommissioning || len(in) != done || done == 0 {
			e.t.Errorf("got %d decommissions done and %d slaves decommissioning, want the same number, 1 to %d", done, len(in), limits.MaxDecommissioning)
		}
	}},
	{name: "concurrent retries of one request apply it once and all get its answer", run: func(e *env) {
		e.report("S1")
		once := machine.Idempotency{Key: "k1", Fingerprint: "freeze S1", At: e.at}
		freeze := machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)
		if done := e.concurrently(6, func(int) error { return e.s.ApplyOnce(e.ctx(), "S1", once, freeze) }); done != 6 {
			e.t.Errorf("got %d answered with success, want all 6", done)
		}
		if got := e.history("S1", e.at); len(got) != 2 {
			e.t.Errorf("got %d entries, want the change once", len(got))
		}
	}},
	{name: "concurrent requests under one key for different slaves apply one and refuse the rest", run: func(e *env) {
		ids := []string{"S1", "S2", "S3", "S4", "S5", "S6"}
		for _, id := range ids {
			e.report(id)
		}
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			once := machine.Idempotency{Key: "k1", Caller: "ops", Fingerprint: "freeze " + id, At: e.at}
			freeze := machine.UserChange(e.userChange(id, machine.Frozen, e.at+1), limits)
			wg.Go(func() { errs[i] = e.s.ApplyOnce(e.ctx(), id, once, freeze) })
		}
		wg.Wait()
		done := 0
		for i, err := range errs {
			switch {
			case err == nil:
				done++
			case fault.KindOf(err) != fault.KindConflict:
				e.t.Errorf("%s: got %v, want success or the conflict of a reused key", ids[i], err)
			}
		}
		frozen, err := e.inState(machine.Frozen)
		e.must(err)
		if done != 1 || len(frozen) != 1 {
			e.t.Errorf("got %d successes and %d slaves frozen, want one of each", done, len(frozen))
		}
	}},
	{name: "a list whose request ends part way is an error, not a shorter list", run: func(e *env) {
		for _, id := range []string{"S1", "S2", "S3", "S4"} {
			e.report(id)
		}
		ctx, cancel := context.WithCancel(e.ctx())
		defer cancel()
		seen := 0
		err := e.s.List(ctx, func(machine.Slave) error {
			seen++
			cancel()
			return nil
		})
		if err == nil {
			e.t.Errorf("got no error after %d of 4 slaves, want the context's", seen)
		}
	}},
	{name: "a change under a cancelled context writes nothing", run: func(e *env) {
		e.report("S1")
		ctx, cancel := context.WithCancel(e.ctx())
		cancel()
		if err := e.s.Apply(ctx, "S1", machine.UserChange(e.userChange("S1", machine.Frozen, e.at+1), limits)); err == nil {
			e.t.Error("got no error, want the context's")
		}
		if got := e.get("S1"); got.Current.State != machine.Active {
			e.t.Errorf("got %s, want ACTIVE", got.Current.State)
		}
	}},
}
