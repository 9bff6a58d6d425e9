package inventory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
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
		h := inventory.New(store, machine.DefaultLossBrake, quiet, nil)
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
		before := contents(t, store)
		again, err := h.Handle(context.Background(), event)
		if err != nil {
			t.Fatalf("the same report again: got %v, want it applied as the first time", err)
		}
		if changed := changes(before, contents(t, store)); len(changed) > 0 {
			t.Errorf("the same report again (%+v): got %q, want nothing changed", again, changed)
		}
	})
}

// newFleet returns a store in states that every report rule of
// docs/behaviour.md "Machine reports" applies to: the three slaves the sample
// events name, and S4 to S6.
func newFleet() *memstore.Store {
	store := memstore.New(0)
	const at = int64(1_763_702_040_000) // 2025-11-21T05:14Z, before the sample events
	const sample = "20261121-051400-16777343-5050-1234-"
	for id, state := range map[string]machine.State{sample + "S1": machine.Active, sample + "S2": machine.Dead,
		sample + "S3": machine.StartingDecommission, "S4": machine.Decommissioning, "S5": machine.Frozen, "S6": machine.MissingOnStartup} {
		u := machine.Update{SlaveID: id, State: state, Timestamp: at, User: "ops@example.com", Message: "seeded"}
		store.Put(machine.Slave{ID: id, FirstSeenAt: at, Current: u, Host: "node.example.com", RackID: "us-east-1a",
			Attributes: map[string]string{}, Resources: json.RawMessage(`{"cpus":16}`)})
	}
	store.PutExpiring(machine.Expiring{MachineID: "S5", StartMillis: at, ActionID: "seeded-action", RevertTo: machine.Active,
		Request: machine.ChangeRequest{DurationMillis: new(int64(3_600_000)), RevertToState: new(machine.Active)}})
	return store
}

// fleetState is everything the store holds, for comparing.
type fleetState struct {
	Slaves   map[string]machine.Slave
	History  map[string][]machine.Update
	Expiring map[string]machine.Expiring
}

// contents reads everything store holds, through its methods.
func contents(t *testing.T, store *memstore.Store) fleetState {
	t.Helper()
	s := fleetState{Slaves: map[string]machine.Slave{}, History: map[string][]machine.Update{}, Expiring: map[string]machine.Expiring{}}
	err := store.List(t.Context(), func(sl machine.Slave) error {
		s.Slaves[sl.ID] = sl
		var err error
		s.History[sl.ID], err = store.History(t.Context(), sl.ID, time.Now(), math.MaxInt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	records, err := store.ListExpiring(t.Context(), time.UnixMilli(0)) // at the epoch, no record is past its retention
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range records {
		s.Expiring[e.MachineID] = e
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
