package storetest

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/machine"
)

// sameShard returns n slave ids whose changes go to one feed shard.
func sameShard(n int) []string {
	byShard := map[int][]string{}
	for i := 0; ; i++ {
		id := fmt.Sprintf("S%d", i)
		s := change.ShardOf(id)
		if byShard[s] = append(byShard[s], id); len(byShard[s]) == n {
			return byShard[s]
		}
	}
}

// feed returns every change after cursor, following the feed to its end,
// and the cursor after them.
func (e *env) feed(cursor string) ([]change.Change, string) {
	e.t.Helper()
	var all []change.Change
	for {
		p, err := e.s.Changes(e.ctx(), cursor, 0, machine.Selector{})
		e.must(err)
		all, cursor = append(all, p.Changes...), p.Cursor
		if len(p.Changes) == 0 {
			return all, cursor
		}
	}
}

// now is the feed's cursor of the store as it is.
func (e *env) now() string {
	e.t.Helper()
	_, cursor, err := e.s.Listed(e.ctx(), func(ctx context.Context) error { return nil })
	e.must(err)
	return cursor
}

// kinds are the slave and kind of each change.
func kinds(cs []change.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.SlaveID+" "+string(c.Kind))
	}
	return out
}

var feedCases = []struct {
	name      string
	retention time.Duration
	run       func(e *env)
}{
	{name: "a slave's sequence is the position of its latest change, in the list, its details and the slave each change left", run: func(e *env) {
		from := e.now()
		ids := sameShard(2)
		e.report(ids[0])
		e.report(ids[1])                                                                       // a slave of the same shard moves the shard's positions
		e.must(e.s.ApplyAbsent(e.ctx(), []string{"N1", "N2"}, func(id string) machine.Decide { // created in a batch
			return machine.Observe(machine.Observation{ID: id, Host: "h-" + id, At: e.at}, e.at)
		})[0])
		e.must(e.s.Apply(e.ctx(), ids[0], e.observe(ids[0], "elsewhere", e.at+1000)))
		e.must(e.change(ids[0], machine.Frozen, e.at+2000))
		got, _ := e.feed(from)
		last := map[string]int64{}
		for _, c := range got {
			last[c.SlaveID] = c.Seq
			if c.Slave != nil && c.Slave.Sequence != c.Seq {
				e.t.Errorf("%s %s at %d left the slave at sequence %d, want its own", c.SlaveID, c.Kind, c.Seq, c.Slave.Sequence)
			}
		}
		listed := map[string]int64{}
		e.must(e.s.List(e.ctx(), func(s machine.Slave) error { listed[s.ID] = s.Sequence; return nil }))
		for _, id := range append(ids, "N1", "N2") {
			if s := e.get(id); s == nil || s.Sequence != last[id] || listed[id] != last[id] {
				e.t.Errorf("%s: details %+v, listed at %d, want sequence %d", id, s, listed[id], last[id])
			}
		}
	}},
	{name: "every change is in the feed once, in order, with what it did and the slave it left", run: func(e *env) {
		from := e.now()
		e.report("S1")
		e.must(e.s.Apply(e.ctx(), "S1", e.observe("S1", "elsewhere", e.at+1000)))
		e.must(e.change("S1", machine.Frozen, e.at+2000))
		_, err := e.s.Delete(e.ctx(), "S1", nil)
		e.must(err)
		got, _ := e.feed(from)
		if want := []string{"S1 added", "S1 descriptionChanged", "S1 stateChanged", "S1 deleted"}; !reflect.DeepEqual(kinds(got), want) {
			e.t.Fatalf("got %v, want %v", kinds(got), want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Seq <= got[i-1].Seq {
				e.t.Errorf("sequence %d after %d: want it to grow", got[i].Seq, got[i-1].Seq)
			}
		}
		if s := got[1].Slave; s == nil || s.Host != "elsewhere" || s.Current.State != machine.Active {
			e.t.Errorf("description change left %+v, want ACTIVE on elsewhere", s)
		}
		frozen := got[2]
		if frozen.Previous != machine.Active || frozen.Entry == nil || frozen.Entry.State != machine.Frozen || frozen.Entry.User != "ops@example.com" ||
			frozen.Slave == nil || frozen.Slave.Current != *frozen.Entry || frozen.Slave.Host != "elsewhere" {
			e.t.Errorf("state change: got %+v, want FROZEN by ops@example.com from ACTIVE, on elsewhere", frozen)
		}
		if got[3].Slave != nil || got[3].At == 0 {
			e.t.Errorf("deletion: got %+v, want a time and no slave", got[3])
		}
	}},
	{name: "a change whose feed shard moved after its read is decided again, and both changes are in the feed", run: func(e *env) {
		ids := sameShard(2)
		e.report(ids[0])
		e.report(ids[1])
		from := e.now()
		calls := e.applyAround(ids[0], func() error {
			return e.s.Apply(e.ctx(), ids[1], machine.UserChange(e.userChange(ids[1], machine.Frozen, e.at+1000), limits))
		}, machine.UserChange(e.userChange(ids[0], machine.Frozen, e.at+1000), limits))
		if calls != 2 {
			e.t.Errorf("decided %d times, want 2: the write of a change decided on a moved head must lose", calls)
		}
		got, _ := e.feed(from)
		if want := []string{ids[1] + " stateChanged", ids[0] + " stateChanged"}; !reflect.DeepEqual(kinds(got), want) {
			e.t.Errorf("got %v, want %v", kinds(got), want)
		}
	}},
	{name: "a cursor answers the same changes however often it is followed, and nothing after the last", run: func(e *env) {
		e.report("S1")
		from := e.now()
		e.must(e.change("S1", machine.Frozen, e.at+1000))
		first, next := e.feed(from)
		again, _ := e.feed(from)
		if len(first) != 1 || !reflect.DeepEqual(first, again) {
			e.t.Errorf("got %v, then %v, want one change twice", kinds(first), kinds(again))
		}
		if rest, _ := e.feed(next); len(rest) != 0 {
			e.t.Errorf("after the last change: got %v, want none", kinds(rest))
		}
	}},
	{name: "slaves created together are in the feed each once", run: func(e *env) {
		from := e.now()
		var ids []string
		for i := range change.CreateBatch + 3 {
			ids = append(ids, fmt.Sprintf("S%d", i))
		}
		for _, err := range e.s.ApplyAbsent(e.ctx(), ids, func(id string) machine.Decide { return e.observe(id, "h", e.at) }) {
			e.must(err)
		}
		got, _ := e.feed(from)
		seen := map[string]int{}
		for _, c := range got {
			seen[c.SlaveID+" "+string(c.Kind)]++
		}
		for _, id := range ids {
			if seen[id+" added"] != 1 {
				e.t.Errorf("%s added %d times, want once", id, seen[id+" added"])
			}
		}
		if len(got) != len(ids) {
			e.t.Errorf("got %d changes, want %d", len(got), len(ids))
		}
	}},
}
