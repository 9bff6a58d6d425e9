package inventory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
)

// FuzzHandle gives arbitrary bytes to the inventory function as its event. It
// must never panic; an event that is not JSON is an error; a report it reads
// applies without error to a store that never fails, every machine entry counted
// once; and, docs/behaviour.md "Machine reports", the same report applied again
// changes nothing and writes no history.
func FuzzHandle(f *testing.F) {
	events, err := filepath.Glob(filepath.Join("..", "..", "events", "inventory-*.json"))
	if err != nil || len(events) == 0 {
		f.Fatalf("got sample events %v (%v), want the inventory events of events/", events, err)
	}
	for _, name := range events {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, s := range []string{
		`{"complete":true,"machines":[{"id":"S1","runningTasks":0},{"slaveId":"S9","host":"node-9","rackId":""}]}`,
		`{"complete":true,"machines":[]}`,
		`{"machines":[{"id":"S3","runningTasks":2,"resources":{"cpus":4}},{"id":"S4","lost":true}]}`,
		`{"machines":[{"id":"#decommissioning"},{"id":"a/b"},{"id":""},{"id":7},{"id":"S1","resources":[1]},null]}`,
		`{"detail-type":"Machine Report","time":"2020-01-01T00:00:00Z","detail":{"machines":[{"id":"S2"}]}}`,
		`{"detail-type":"Machine Report","time":"yesterday","detail":{}}`,
		`{"detail-type":"Scheduled Event","detail":{}}`,
		`{"detail-type":"Machine Report"}`,
		`{"detail":null}`,
		`{"machines":{}}`,
		`[]`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, event []byte) {
		store := newFleet()
		h := inventory.New(store, machine.DefaultLossBrake, quiet)
		res, err := h.Handle(context.Background(), event)
		if !json.Valid(event) && err == nil {
			t.Fatalf("got result %+v, want an error for an event that is not JSON", res)
		}
		if err != nil {
			return
		}
		if res.Failed != 0 || res.Invalid > res.Machines {
			t.Errorf("got %+v, want no failures and at most one invalid per machine", res)
		}
		before := store.snapshot()
		again, err := h.Handle(context.Background(), event)
		if err != nil {
			t.Fatalf("the same report again: got %v, want it applied as the first time", err)
		}
		if changed := changes(before, store.snapshot()); len(changed) > 0 {
			t.Errorf("the same report again (%+v): got %q, want nothing changed", again, changed)
		}
	})
}

// fleet is inventory.Store in memory, with the semantics of the DynamoDB
// adapter: each change is decided on a snapshot of the slave and its
// expiring record and written whole, under one lock.
type fleet struct {
	mu       sync.Mutex
	slaves   map[string]machine.Slave
	history  map[string][]machine.Update // oldest first
	expiring map[string]machine.Expiring
}

// newFleet returns a fleet in states that every report rule of docs/behaviour.md "Machine reports"
// applies to: the three slaves the sample events name, and S4 to S6.
func newFleet() *fleet {
	f := &fleet{slaves: map[string]machine.Slave{}, history: map[string][]machine.Update{}, expiring: map[string]machine.Expiring{}}
	const at = int64(1_763_702_040_000) // 2025-11-21T05:14Z, before the sample events
	const sample = "20261121-051400-16777343-5050-1234-"
	for id, state := range map[string]machine.State{sample + "S1": machine.Active, sample + "S2": machine.Dead,
		sample + "S3": machine.StartingDecommission, "S4": machine.Decommissioning, "S5": machine.Frozen, "S6": machine.MissingOnStartup} {
		u := machine.Update{SlaveID: id, State: state, Timestamp: at, User: "ops@example.com", Message: "seeded"}
		f.slaves[id] = machine.Slave{ID: id, FirstSeenAt: at, Current: u, Host: "node.example.com", RackID: "us-east-1a",
			Attributes: map[string]string{}, Resources: json.RawMessage(`{"cpus":16}`)}
		f.history[id] = []machine.Update{u}
	}
	f.expiring["S5"] = machine.Expiring{MachineID: "S5", StartMillis: at, ActionID: "seeded-action", RevertTo: machine.Active,
		Request: machine.ChangeRequest{DurationMillis: new(int64(3_600_000)), RevertToState: new(machine.Active)}}
	return f
}

// fleetState is everything the fleet holds, for comparing.
type fleetState struct {
	Slaves   map[string]machine.Slave
	History  map[string][]machine.Update
	Expiring map[string]machine.Expiring
}

func (f *fleet) snapshot() fleetState {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fleetState{Slaves: maps.Clone(f.slaves), History: map[string][]machine.Update{}, Expiring: maps.Clone(f.expiring)}
	for id, h := range f.history {
		s.History[id] = slices.Clone(h)
	}
	return s
}

// changes describes, slave by slave, how after differs from before.
func changes(before, after fleetState) []string {
	ids := map[string]bool{}
	for id := range before.Slaves {
		ids[id] = true
	}
	for id := range after.Slaves {
		ids[id] = true
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		b, a := before.Slaves[id], after.Slaves[id]
		if !reflect.DeepEqual(a, b) {
			out = append(out, fmt.Sprintf("slave %s: %s at %d -> %s at %d", id, b.Current.State, b.Current.Timestamp, a.Current.State, a.Current.Timestamp))
		}
		if nb, na := len(before.History[id]), len(after.History[id]); nb != na {
			out = append(out, fmt.Sprintf("history of %s: %d -> %d entries", id, nb, na))
		}
		if !reflect.DeepEqual(before.Expiring[id], after.Expiring[id]) {
			out = append(out, "expiring record of "+id)
		}
	}
	return out
}

func (f *fleet) List(ctx context.Context, each func(machine.Slave) error) error {
	f.mu.Lock()
	var out []machine.Slave
	for _, id := range slices.Sorted(maps.Keys(f.slaves)) {
		out = append(out, f.slaves[id])
	}
	f.mu.Unlock()
	for _, s := range out {
		if err := each(s); err != nil {
			return err
		}
	}
	return nil
}

func (f *fleet) Apply(ctx context.Context, id string, decide machine.Decide) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var snap machine.Snapshot
	if s, ok := f.slaves[id]; ok {
		s.Attributes = maps.Clone(s.Attributes)
		snap.Slave = &s
	}
	if e, ok := f.expiring[id]; ok {
		snap.Expiring = &e
	}
	plan, err := decide(snap)
	if err != nil || plan == nil {
		return err
	}
	if plan.Entry == nil && plan.DropExpiring {
		delete(f.expiring, id) // a plan that only drops the record (machine.Plan)
		return nil
	}
	f.slaves[id] = plan.Slave
	if plan.Entry != nil {
		f.history[id] = append(f.history[id], *plan.Entry)
	}
	switch {
	case plan.PutExpiring != nil:
		f.expiring[id] = *plan.PutExpiring
	case plan.DropExpiring:
		delete(f.expiring, id)
	}
	return nil
}
