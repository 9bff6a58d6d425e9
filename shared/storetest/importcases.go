package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// imported is slave id as the old API describes it: reported at at and
// then moved through states, one entry a minute, n entries in all, with
// the last one's state last.
func imported(id string, at int64, n int, last machine.State) machine.Import {
	var history []machine.Update
	for i := range n {
		st := []machine.State{machine.Active, machine.Frozen}[i%2]
		if i == n-1 {
			st = last
		}
		history = append(history, machine.Update{SlaveID: id, State: st, Timestamp: at + int64(i)*60_000, User: "ops@example.com", Message: fmt.Sprintf("entry %d", i)})
	}
	return machine.Import{
		Slave: machine.Slave{ID: id, FirstSeenAt: at, Current: history[n-1], Host: "old-" + id, RackID: "r1",
			Attributes: map[string]string{"zone": "a"}, Resources: []byte(`{"cpus":4}`)},
		History: history,
	}
}

// importAt imports imp, decided at at with opts, and returns its result
// and error.
func (e *env) importAt(imp machine.Import, at int64, opts machine.ImportOptions) (machine.ImportResult, error) {
	var result machine.ImportResult
	err := e.s.Import(e.ctx(), imp.Slave.ID, machine.ImportSlave(imp, opts, limits, func() int64 { return at }, &result))
	return result, err
}

// wantImported checks that id is stored as imp describes it: its record,
// its whole history, and its expiring record or none.
func (e *env) wantImported(imp machine.Import) {
	e.t.Helper()
	id := imp.Slave.ID
	got := e.get(id)
	if got == nil || got.Current != imp.Slave.Current || got.FirstSeenAt != imp.Slave.FirstSeenAt || got.Host != imp.Slave.Host ||
		!reflect.DeepEqual(got.Attributes, imp.Slave.Attributes) || string(got.Resources) != string(imp.Slave.Resources) {
		e.t.Errorf("got %+v, want %+v", got, imp.Slave)
	}
	h := e.history(id, e.at)
	slices.Reverse(h)
	if !reflect.DeepEqual(h, imp.History) {
		e.t.Errorf("got a history of %d entries, want the %d imported, in their order", len(h), len(imp.History))
	}
	var record []machine.Expiring
	for _, x := range e.expiring(e.at) {
		if x.MachineID == id {
			record = append(record, x)
		}
	}
	if imp.Expiring == nil && len(record) != 0 || imp.Expiring != nil && (len(record) != 1 || !reflect.DeepEqual(record[0], *imp.Expiring)) {
		e.t.Errorf("got expiring records %+v, want %+v", record, imp.Expiring)
	}
}

var importCases = []struct {
	name      string
	retention time.Duration
	run       func(e *env)
}{
	{name: "an import stores the slave, its history as given and its expiring record, and the feed shows it added, then the record set", run: func(e *env) {
		from := e.now()
		imp := imported("S1", e.at-10*hour, 3, machine.Frozen)
		imp.Expiring = &machine.Expiring{MachineID: "S1", User: "ops@example.com", StartMillis: imp.Slave.Current.Timestamp, ActionID: "ticket-1",
			RevertTo: machine.Active, Request: revert(machine.Active, 30*24*time.Hour)}
		imp.Expiring.Request.ActionID = "ticket-1"
		result, err := e.importAt(imp, e.at, machine.ImportOptions{})
		e.must(err)
		if result != machine.Imported {
			e.t.Errorf("got %s, want imported", result)
		}
		e.wantImported(imp)
		changes, _ := e.feed(from)
		if got := kinds(changes); fmt.Sprint(got) != "[S1 added S1 expiringSet]" {
			e.t.Fatalf("got changes %v, want S1 added, then its record set", got)
		}
		if c := changes[0]; *c.Entry != imp.Slave.Current || c.Slave.Sequence != c.Seq {
			e.t.Errorf("got added %+v, want the current entry and the slave at its position", c)
		}
		if got := e.get("S1").Sequence; got != changes[1].Seq {
			e.t.Errorf("got sequence %d, want the record's change's %d", got, changes[1].Seq)
		}
	}},
	{name: "the same import again is unchanged and writes nothing, not even a feed entry", run: func(e *env) {
		imp := imported("S1", e.at-10*hour, 3, machine.Frozen)
		_, err := e.importAt(imp, e.at, machine.ImportOptions{})
		e.must(err)
		from := e.now()
		for _, opts := range []machine.ImportOptions{{}, {Replace: true}} {
			if result, err := e.importAt(imp, e.at+1, opts); result != machine.Unchanged || err != nil {
				e.t.Errorf("%+v: got %s, %v, want unchanged", opts, result, err)
			}
		}
		if changes, _ := e.feed(from); len(changes) != 0 {
			e.t.Errorf("got changes %v, want none", kinds(changes))
		}
	}},
	{name: "a history longer than one transaction is imported whole, and again is unchanged", run: func(e *env) {
		imp := imported("S1", e.at-500*hour, 250, machine.Active)
		result, err := e.importAt(imp, e.at, machine.ImportOptions{})
		e.must(err)
		if result != machine.Imported {
			e.t.Errorf("got %s, want imported", result)
		}
		e.wantImported(imp)
		if result, err := e.importAt(imp, e.at+1, machine.ImportOptions{}); result != machine.Unchanged || err != nil {
			e.t.Errorf("again: got %s, %v, want unchanged", result, err)
		}
		other := imported("S1", e.at-500*hour, 250, machine.Active)
		other.History[7].Message = "another reason" // an older entry alone differs
		if result, err := e.importAt(other, e.at+1, machine.ImportOptions{}); result != machine.Conflicted || fault.KindOf(err) != fault.KindConflict {
			e.t.Errorf("with one older entry otherwise: got %s, %v, want a conflict", result, err)
		}
		e.must(e.change("S1", machine.Frozen, e.at+2)) // the imported history goes on
		if h := e.history("S1", e.at); len(h) != 251 || h[0].State != machine.Frozen || h[1] != imp.Slave.Current {
			e.t.Errorf("got %d entries, newest %+v, want 251, the freeze after the imported current state", len(h), h[0])
		}
	}},
	{name: "a slave stored with another history is a conflict and left alone; mode=replace replaces it whole, as a deletion and an addition", run: func(e *env) {
		e.report("S1")
		for i := range 110 { // longer than one transaction
			e.must(e.change("S1", []machine.State{machine.Frozen, machine.Active}[i%2], e.at+int64(i+1)))
		}
		e.must(e.change("S1", machine.Frozen, e.at+200, revert(machine.Active, time.Hour)))
		before := e.get("S1")
		imp := imported("S1", e.at-10*hour, 3, machine.Active)
		result, err := e.importAt(imp, e.at+300, machine.ImportOptions{})
		if result != machine.Conflicted || fault.KindOf(err) != fault.KindConflict {
			e.t.Errorf("got %s, %v, want a conflict", result, err)
		}
		if got := e.get("S1"); !reflect.DeepEqual(got, before) || len(e.history("S1", e.at)) != 112 || len(e.expiring(e.at)) != 1 {
			e.t.Errorf("got %+v, want it left as it was", got)
		}
		from := e.now()
		result, err = e.importAt(imp, e.at+300, machine.ImportOptions{Replace: true})
		e.must(err)
		if result != machine.Imported {
			e.t.Errorf("got %s, want imported", result)
		}
		e.wantImported(imp) // its history and its expiring record replaced
		changes, _ := e.feed(from)
		if got := kinds(changes); fmt.Sprint(got) != "[S1 deleted S1 added]" {
			e.t.Errorf("got changes %v, want S1 deleted, then added", got)
		}
		long := imported("S1", e.at-500*hour, 150, machine.Frozen)
		if _, err := e.importAt(long, e.at+400, machine.ImportOptions{Replace: true}); err != nil {
			e.t.Fatal(err)
		}
		e.wantImported(long)
		e.must(e.change("S1", machine.Active, e.at+500))
		if h := e.history("S1", e.at); len(h) != 151 || h[0].State != machine.Active {
			e.t.Errorf("got %d entries, want the 150 imported and the activation", len(h))
		}
	}},
	{name: "a slave imported decommissioning joins the set under its limit, or over it when told to", run: func(e *env) {
		e.decommission("S1")
		imp := imported("S2", e.at-10*hour, 2, machine.Decommissioning)
		_, err := e.importAt(imp, e.at, machine.ImportOptions{})
		e.must(err)
		over := imported("S3", e.at-10*hour, 2, machine.StartingDecommission)
		result, err := e.importAt(over, e.at+1, machine.ImportOptions{})
		e.wantOverLimit(err, 2)
		if result != machine.Imported || e.get("S3") != nil { // decided, and refused as it was written
			e.t.Errorf("got %s and %+v, want S3 not stored", result, e.get("S3"))
		}
		_, err = e.importAt(over, e.at+2, machine.ImportOptions{OverrideLimit: true})
		e.must(err)
		e.wantImported(over)
		e.report("S4")
		e.wantOverLimit(e.change("S4", machine.StartingDecommission, e.at+3), 3) // the set holds all three
		replaced := imported("S2", e.at-10*hour, 3, machine.Active)
		_, err = e.importAt(replaced, e.at+4, machine.ImportOptions{Replace: true})
		e.must(err)
		e.wantOverLimit(e.change("S4", machine.StartingDecommission, e.at+5), 2) // S2 left it
	}},
	{name: "an expiring change imported long past due stays pending and due until the expiry applies it", run: func(e *env) {
		imp := imported("S1", e.at-40*24*hour, 2, machine.Frozen)
		imp.Expiring = &machine.Expiring{MachineID: "S1", User: "ops@example.com", StartMillis: imp.Slave.Current.Timestamp, ActionID: "ticket-1",
			RevertTo: machine.Active, Request: revert(machine.Active, time.Hour)}
		imp.Expiring.Request.ActionID = "ticket-1"
		_, err := e.importAt(imp, e.at, machine.ImportOptions{})
		e.must(err)
		e.wantImported(imp)
		if got := e.expiring(e.at + 6*24*hour); len(got) != 1 {
			e.t.Errorf("six days after the import: got %+v, want the record still listed", got)
		}
		due, err := e.s.Due(e.ctx(), e.at+1)
		e.must(err)
		if len(due) != 1 || due[0].SlaveID != "S1" {
			e.t.Fatalf("got due %+v, want S1's record", due)
		}
		var outcome machine.Outcome
		e.must(e.s.Apply(e.ctx(), "S1", machine.Expire("S1", func() int64 { return e.at + 1 }, limits, &outcome)))
		if got := e.get("S1"); outcome != machine.Applied || got.Current.State != machine.Active || len(e.expiring(e.at+1)) != 0 {
			e.t.Errorf("got %s, %s, want the revert applied and its record gone", outcome, got.Current.State)
		}
	}},
}
