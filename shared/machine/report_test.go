package machine

import (
	"encoding/json"
	"reflect"
	"testing"
)

const (
	reportAt  = int64(1_700_000_000_000) // when the scheduler made the report
	appliedAt = reportAt + 250           // when the inventory function applied it
)

// known returns a stored slave in state whose current entry is older than
// any report of these tests.
func known(state State) *Slave {
	s := someSlave(state)
	s.Current.Timestamp = reportAt - 60_000
	return s
}

// sameAsKnown is an "up" report that describes known(...) exactly.
func sameAsKnown() Observation {
	return Observation{ID: slaveID, Host: "node-1.example.com", RackID: "us-east-1a",
		Attributes: map[string]string{"instance_type": "m5.4xlarge"}, Resources: json.RawMessage(`{"cpus":16,"mem":63000}`),
		At: reportAt}
}

// moved is an "up" report of the machine on another host, rack and size.
func moved() Observation {
	return Observation{ID: slaveID, Host: "node-9.example.com", RackID: "us-east-1b",
		Attributes: map[string]string{"instance_type": "m6i.8xlarge"}, Resources: json.RawMessage(`{"cpus":32}`),
		At: reportAt}
}

func with(o Observation, change func(*Observation)) Observation {
	change(&o)
	return o
}

// described returns s with the description o reports.
func described(s *Slave, o Observation) Slave {
	out := *s
	out.Host, out.RackID, out.Attributes, out.Resources, out.DescribedAt = o.Host, o.RackID, o.Attributes, o.Resources, o.At
	return out
}

// counting returns s described by sameAsKnown() with a count of n running
// tasks, as a draining slave is stored.
func counting(s *Slave, n int) Slave {
	out := described(s, sameAsKnown())
	out.RunningTasks = &n
	return out
}

// step returns s moved to state by the system with a reason (the reason's
// text is not part of the contract; the test fills it from the plan). The entry is
// stamped when the scheduler made the report; the test sets that too.
func step(s Slave, state State, user, message string) Slave {
	s.Current = Update{SlaveID: slaveID, State: state, Timestamp: appliedAt, User: user, Message: message}
	return s
}

const anyReason = "\x00any reason"

func TestObserveDecidesTheSpecSystemTransitions(t *testing.T) {
	tests := []struct {
		name string
		snap Snapshot
		obs  Observation
		want *Plan // entries with message anyReason accept any non-empty reason and require no user
	}{
		{
			name: "an unknown machine reported up is created ACTIVE with rack DEFAULT",
			obs:  with(moved(), func(o *Observation) { o.RackID = ""; o.RunningTasks = new(3) }),
			want: &Plan{Slave: Slave{ID: slaveID, FirstSeenAt: appliedAt, Host: "node-9.example.com", RackID: DefaultRack,
				Attributes: map[string]string{"instance_type": "m6i.8xlarge"}, Resources: json.RawMessage(`{"cpus":32}`),
				DescribedAt: reportAt, Current: Update{SlaveID: slaveID, State: Active, Timestamp: appliedAt, Message: anyReason}}},
		},
		{
			name: "an unknown machine reported up with a rack and no attributes keeps the rack and gets {}",
			obs:  Observation{ID: slaveID, Host: "h", RackID: "us-east-1c", At: reportAt},
			want: &Plan{Slave: Slave{ID: slaveID, FirstSeenAt: appliedAt, Host: "h", RackID: "us-east-1c", Attributes: map[string]string{},
				DescribedAt: reportAt, Current: Update{SlaveID: slaveID, State: Active, Timestamp: appliedAt, Message: anyReason}}},
		},
		{
			name: "an unknown machine reported lost is not created",
			obs:  with(moved(), func(o *Observation) { o.Lost = true }),
		},
		{
			name: "an unknown machine absent from a complete report is not created",
			obs:  Observation{ID: slaveID, Absent: true, At: reportAt},
		},
		{
			name: "a DEAD machine reported up becomes ACTIVE with no user and a fresh description",
			snap: Snapshot{Slave: known(Dead)},
			obs:  moved(),
			want: &Plan{Slave: step(described(known(Dead), moved()), Active, "", anyReason)},
		},
		{
			name: "a MISSING_ON_STARTUP machine reported up becomes ACTIVE",
			snap: Snapshot{Slave: known(MissingOnStartup)},
			obs:  sameAsKnown(),
			want: &Plan{Slave: step(*known(MissingOnStartup), Active, "", anyReason)},
		},
		{
			name: "a DEAD machine reported up drops a record reverting to ACTIVE",
			snap: Snapshot{Slave: known(Dead), Expiring: someExpiring(Active)},
			obs:  sameAsKnown(),
			want: &Plan{Slave: step(*known(Dead), Active, "", anyReason), DropExpiring: true},
		},
		{
			name: "an ACTIVE machine reported lost becomes DEAD and drops any expiring record",
			snap: Snapshot{Slave: known(Active), Expiring: someExpiring(Frozen)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true }),
			want: &Plan{Slave: step(*known(Active), Dead, "", anyReason), DropExpiring: true},
		},
		{
			name: "a FROZEN machine reported lost becomes DEAD",
			snap: Snapshot{Slave: known(Frozen)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true }),
			want: &Plan{Slave: step(*known(Frozen), Dead, "", anyReason)},
		},
		{
			name: "a STARTING_DECOMMISSION machine reported lost becomes DEAD, not DECOMMISSIONED, and drops its record",
			snap: Snapshot{Slave: known(StartingDecommission), Expiring: someExpiring(Active)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true; o.RunningTasks = new(0) }),
			want: &Plan{Slave: step(*known(StartingDecommission), Dead, "", anyReason), DropExpiring: true},
		},
		{
			name: "a lost report refreshes the description",
			snap: Snapshot{Slave: known(Active)},
			obs:  with(moved(), func(o *Observation) { o.Lost = true }),
			want: &Plan{Slave: step(described(known(Active), moved()), Dead, "", anyReason)},
		},
		{
			name: "a DEAD machine reported lost again changes nothing",
			snap: Snapshot{Slave: known(Dead)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true }),
		},
		{
			name: "an ACTIVE machine absent from a complete report becomes DEAD with its description untouched",
			snap: Snapshot{Slave: known(Active), Expiring: someExpiring(Frozen)},
			obs:  with(moved(), func(o *Observation) { o.Absent = true }),
			want: &Plan{Slave: step(*known(Active), Dead, "", anyReason), DropExpiring: true},
		},
		{
			name: "a DECOMMISSIONED machine absent from a complete report becomes DEAD",
			snap: Snapshot{Slave: known(Decommissioned)},
			obs:  Observation{ID: slaveID, Absent: true, At: reportAt},
			want: &Plan{Slave: step(*known(Decommissioned), Dead, "", anyReason)},
		},
		{
			name: "a MISSING_ON_STARTUP machine absent from a complete report becomes DEAD",
			snap: Snapshot{Slave: known(MissingOnStartup)},
			obs:  Observation{ID: slaveID, Absent: true, At: reportAt},
			want: &Plan{Slave: step(*known(MissingOnStartup), Dead, "", anyReason)},
		},
		{
			name: "a MISSING_ON_STARTUP machine reported lost becomes DEAD",
			snap: Snapshot{Slave: known(MissingOnStartup)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true }),
			want: &Plan{Slave: step(*known(MissingOnStartup), Dead, "", anyReason)},
		},
		{
			name: "a DEAD machine absent from a complete report changes nothing",
			snap: Snapshot{Slave: known(Dead)},
			obs:  Observation{ID: slaveID, Absent: true, At: reportAt},
		},
		{
			name: "STARTING_DECOMMISSION with running tasks becomes DECOMMISSIONING keeping the operator's user and message",
			snap: Snapshot{Slave: known(StartingDecommission), Expiring: someExpiring(Active)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(3) }),
			want: &Plan{Slave: step(counting(known(StartingDecommission), 3), Decommissioning, "earlier@example.com", "earlier change")},
		},
		{
			name: "STARTING_DECOMMISSION with one running task becomes DECOMMISSIONING",
			snap: Snapshot{Slave: known(StartingDecommission)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(1) }),
			want: &Plan{Slave: step(counting(known(StartingDecommission), 1), Decommissioning, "earlier@example.com", "earlier change")},
		},
		{
			name: "STARTING_DECOMMISSION with no running tasks becomes DECOMMISSIONED keeping the operator's user and message",
			snap: Snapshot{Slave: known(StartingDecommission)},
			obs:  with(moved(), func(o *Observation) { o.RunningTasks = new(0) }),
			want: &Plan{Slave: step(described(known(StartingDecommission), moved()), Decommissioned, "earlier@example.com", "earlier change")},
		},
		{
			name: "DECOMMISSIONING with no running tasks becomes DECOMMISSIONED keeping the operator's user and message",
			snap: Snapshot{Slave: known(Decommissioning)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(0) }),
			want: &Plan{Slave: step(*known(Decommissioning), Decommissioned, "earlier@example.com", "earlier change")},
		},
		{
			name: "DECOMMISSIONING with no running tasks drops a record reverting to DECOMMISSIONED",
			snap: Snapshot{Slave: known(Decommissioning), Expiring: someExpiring(Decommissioned)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(0) }),
			want: &Plan{Slave: step(*known(Decommissioning), Decommissioned, "earlier@example.com", "earlier change"), DropExpiring: true},
		},
		{
			name: "DECOMMISSIONING with running tasks stays, storing the count",
			snap: Snapshot{Slave: known(Decommissioning)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(2) }),
			want: &Plan{Slave: counting(known(Decommissioning), 2)},
		},
		{
			name: "DECOMMISSIONING whose count falls stores the new count",
			snap: Snapshot{Slave: func() *Slave { s := counting(known(Decommissioning), 3); s.DescribedAt = reportAt - 30_000; return &s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(1) }),
			want: &Plan{Slave: counting(known(Decommissioning), 1)},
		},
		{
			name: "DECOMMISSIONING with the count already stored writes nothing",
			snap: Snapshot{Slave: func() *Slave { s := counting(known(Decommissioning), 3); return &s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(3); o.At = reportAt + 1 }),
		},
		{
			name: "DECOMMISSIONING with no running tasks clears the count it had",
			snap: Snapshot{Slave: func() *Slave { s := counting(known(Decommissioning), 1); s.DescribedAt = reportAt - 30_000; return &s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(0) }),
			want: &Plan{Slave: step(described(known(Decommissioning), sameAsKnown()), Decommissioned, "earlier@example.com", "earlier change")},
		},
		{
			name: "DECOMMISSIONING reported lost clears the count even from a report older than the description",
			snap: Snapshot{Slave: func() *Slave { s := counting(known(Decommissioning), 1); return &s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true; o.At = reportAt - 1 }),
			want: &Plan{Slave: func() Slave {
				s := step(counting(known(Decommissioning), 1), Dead, "", anyReason)
				s.RunningTasks = nil
				return s
			}()},
		},
		{
			name: "ACTIVE whose count moves writes nothing",
			snap: Snapshot{Slave: func() *Slave { s := described(known(Active), sameAsKnown()); return &s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(9); o.At = reportAt + 60_000 }),
		},
		{
			name: "DECOMMISSIONED with running tasks stays",
			snap: Snapshot{Slave: known(Decommissioned)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(2) }),
		},
		{
			name: "STARTING_DECOMMISSION without runningTasks in the report takes no step",
			snap: Snapshot{Slave: known(StartingDecommission)},
			obs:  sameAsKnown(),
		},
		{
			name: "DECOMMISSIONING without runningTasks in the report takes no step",
			snap: Snapshot{Slave: known(Decommissioning)},
			obs:  sameAsKnown(),
		},
		{
			name: "ACTIVE with no running tasks stays",
			snap: Snapshot{Slave: known(Active)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(0) }),
		},
		{
			name: "FROZEN with running tasks stays",
			snap: Snapshot{Slave: known(Frozen)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(7) }),
		},
		{
			name: "a changed host alone is written without a history entry",
			snap: Snapshot{Slave: known(Active), Expiring: someExpiring(Frozen)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Host = "node-2.example.com" }),
			want: &Plan{Slave: func() Slave { s := *known(Active); s.Host, s.DescribedAt = "node-2.example.com", reportAt; return s }()},
		},
		{
			name: "changed rack, attributes and resources are written without a history entry",
			snap: Snapshot{Slave: known(Frozen)},
			obs:  moved(),
			want: &Plan{Slave: described(known(Frozen), moved())},
		},
		{
			name: "resources that differ only in JSON spacing change nothing",
			snap: Snapshot{Slave: known(Active)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Resources = json.RawMessage(`{ "cpus": 16, "mem": 63000 }`) }),
		},
		{
			name: "an empty rack reads as DEFAULT and matches a stored DEFAULT",
			snap: Snapshot{Slave: func() *Slave { s := known(Active); s.RackID = DefaultRack; return s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.RackID = "" }),
		},
		{
			name: "a report older than the current state changes nothing",
			snap: Snapshot{Slave: known(Frozen)},
			obs:  with(moved(), func(o *Observation) { o.Lost = true; o.At = known(Frozen).Current.Timestamp - StaleAfter - 1 }),
		},
		{
			name: "a report older than the current state does not revive a DEAD machine",
			snap: Snapshot{Slave: known(Dead)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.At = known(Dead).Current.Timestamp - StaleAfter - 1 }),
		},
		{
			name: "a report made at the current state's timestamp is applied",
			snap: Snapshot{Slave: known(Active)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true; o.At = known(Active).Current.Timestamp }),
			want: &Plan{Slave: step(*known(Active), Dead, "", anyReason)},
		},
		{
			// Event times are truncated to the second: a loss seen just
			// after a user change may carry a time just before it.
			name: "a lost report less than a second older than the current state is applied, stamped after it",
			snap: Snapshot{Slave: known(Frozen)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true; o.At = known(Frozen).Current.Timestamp - StaleAfter }),
			want: &Plan{Slave: step(*known(Frozen), Dead, "", anyReason)},
		},
		{
			name: "a loss held by the brake changes no state",
			snap: Snapshot{Slave: known(Active)},
			obs:  with(sameAsKnown(), func(o *Observation) { o.Lost = true; o.Held = true }),
		},
		{
			name: "an absence held by the brake changes no state",
			snap: Snapshot{Slave: known(Active)},
			obs:  Observation{ID: slaveID, Absent: true, Held: true, At: reportAt},
		},
		{
			name: "a loss held by the brake still refreshes the description",
			snap: Snapshot{Slave: known(Active)},
			obs:  with(moved(), func(o *Observation) { o.Lost = true; o.Held = true }),
			want: &Plan{Slave: described(known(Active), moved())},
		},
		{
			name: "a report older than the description does not replace it",
			snap: Snapshot{Slave: func() *Slave { s := described(known(Active), moved()); return &s }()},
			obs:  with(sameAsKnown(), func(o *Observation) { o.At = reportAt - 1 }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *Slave
			if tt.snap.Slave != nil {
				s := *tt.snap.Slave
				before = &s
			}
			got, err := Observe(tt.obs, appliedAt)(tt.snap)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if tt.want == nil {
				if got != nil {
					t.Fatalf("got %+v, want no plan", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("got no plan, want %+v", tt.want)
			}
			want := *tt.want
			if want.Slave.Current.Message == anyReason {
				if got.Slave.Current.Message == "" {
					t.Errorf("message: got none, want a short reason")
				}
				want.Slave.Current.Message = got.Slave.Current.Message
			}
			if want.Slave.Current != tt.snap.slaveCurrent() {
				// A state change, stamped with the report's time: the
				// history entry is the new current state.
				// never earlier than the entry it follows.
				want.Slave.Current.Timestamp = max(tt.obs.At, tt.snap.slaveCurrent().Timestamp)
				want.Entry = &want.Slave.Current
			}
			if !reflect.DeepEqual(got.Slave, want.Slave) {
				t.Errorf("slave:\n got %+v\nwant %+v", got.Slave, want.Slave)
			}
			if !reflect.DeepEqual(got.Entry, want.Entry) {
				t.Errorf("history entry: got %+v, want %+v", got.Entry, want.Entry)
			}
			if wantDescribe := tt.snap.Slave == nil || got.Slave.DescribedAt != tt.snap.Slave.DescribedAt; got.Describe != wantDescribe {
				t.Errorf("Describe: got %v, want %v", got.Describe, wantDescribe)
			}
			if got.DropExpiring != want.DropExpiring {
				t.Errorf("DropExpiring: got %v, want %v", got.DropExpiring, want.DropExpiring)
			}
			if got.PutExpiring != nil || got.Limit != 0 {
				t.Errorf("got PutExpiring %+v and Limit %d, want neither from a report", got.PutExpiring, got.Limit)
			}
			if before != nil && !reflect.DeepEqual(*tt.snap.Slave, *before) {
				t.Errorf("snapshot slave was modified: got %+v, want %+v", *tt.snap.Slave, *before)
			}
		})
	}
}

// slaveCurrent is the snapshot's current state, or the zero Update.
func (s Snapshot) slaveCurrent() Update {
	if s.Slave == nil {
		return Update{}
	}
	return s.Slave.Current
}

// stored applies a plan to a snapshot as the storage adapter would.
func stored(t *testing.T, snap Snapshot, plan *Plan) Snapshot {
	t.Helper()
	if plan == nil {
		return snap
	}
	s := plan.Slave
	next := Snapshot{Slave: &s, Expiring: snap.Expiring}
	if plan.DropExpiring {
		next.Expiring = nil
	}
	if plan.PutExpiring != nil {
		next.Expiring = plan.PutExpiring
	}
	return next
}

func TestObserveTheSameReportTwiceWritesNothingTheSecondTime(t *testing.T) {
	tests := []struct {
		name string
		snap Snapshot
		obs  Observation
	}{
		{"an unknown machine reported up", Snapshot{}, moved()},
		{"a DEAD machine reported up", Snapshot{Slave: known(Dead)}, moved()},
		{"a machine reported lost", Snapshot{Slave: known(Active), Expiring: someExpiring(Frozen)}, with(moved(), func(o *Observation) { o.Lost = true })},
		{"a machine absent from a complete report", Snapshot{Slave: known(Frozen)}, Observation{ID: slaveID, Absent: true}},
		{"STARTING_DECOMMISSION with running tasks", Snapshot{Slave: known(StartingDecommission)}, with(sameAsKnown(), func(o *Observation) { o.RunningTasks = new(3) })},
		{"STARTING_DECOMMISSION with no running tasks", Snapshot{Slave: known(StartingDecommission)}, with(moved(), func(o *Observation) { o.RunningTasks = new(0) })},
		{"a changed host", Snapshot{Slave: known(Active)}, with(sameAsKnown(), func(o *Observation) { o.Host = "node-2" })},
	}
	for _, tt := range tests {
		// The report may be applied well after it was made, or in the same ms.
		for _, delay := range []int64{250, 0} {
			t.Run(tt.name+" applied after "+map[int64]string{250: "a delay", 0: "no delay"}[delay], func(t *testing.T) {
				obs := tt.obs
				obs.At = reportAt
				now := reportAt + delay
				first, err := Observe(obs, now)(tt.snap)
				if err != nil || first == nil {
					t.Fatalf("first time: got (%+v, %v), want a plan", first, err)
				}
				again, err := Observe(obs, now+1_000)(stored(t, tt.snap, first))
				if err != nil {
					t.Fatalf("second time: got %v, want no error", err)
				}
				if again != nil {
					t.Errorf("second time: got %+v, want no plan", again)
				}
			})
		}
	}
}

func TestObserveAppliesALostReportMadeAfterTheOneThatSetTheState(t *testing.T) {
	// docs/behaviour.md "Machine reports": a machine reported lost becomes DEAD.
	// Here report 1 (made at reportAt) brought the machine up and was applied
	// 250 ms later; report 2 was made 100 ms after report 1, so it is newer than
	// everything stored, but it arrives after report 1 was applied.
	up, err := Observe(sameAsKnown(), appliedAt)(Snapshot{Slave: known(Dead)})
	if err != nil || up == nil {
		t.Fatalf("report 1: got (%+v, %v), want a plan", up, err)
	}
	lost := with(sameAsKnown(), func(o *Observation) { o.Lost = true; o.At = reportAt + 100 })
	plan, err := Observe(lost, appliedAt+200)(stored(t, Snapshot{Slave: known(Dead)}, up))
	if err != nil {
		t.Fatalf("report 2: got %v, want no error", err)
	}
	if plan == nil || plan.Slave.Current.State != Dead {
		t.Fatalf("got %+v, want the newer lost report to make the machine DEAD", plan)
	}
}
