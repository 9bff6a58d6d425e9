package machine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/fault"
)

// anImport is a slave of the old API whose history ends in state: reported,
// frozen by an operator, then in state.
func anImport(state State) Import {
	history := []Update{
		{SlaveID: slaveID, State: Active, Timestamp: 1_600_000_000_000, Message: "New machine reported"},
		{SlaveID: slaveID, State: Frozen, Timestamp: 1_600_000_100_000, User: "ops@example.com", Message: "disk check"},
		{SlaveID: slaveID, State: state, Timestamp: 1_600_000_200_000, User: "ops@example.com", Message: "done"},
	}
	return Import{
		Slave: Slave{ID: slaveID, FirstSeenAt: 1_600_000_000_000, Current: history[2], Host: "node-1.example.com", RackID: "us-east-1a",
			Attributes: map[string]string{"instance_type": "m5.4xlarge"}, Resources: json.RawMessage(`{"cpus": 16}`)},
		History: history,
	}
}

func importedExpiring(revert State) *Expiring {
	return &Expiring{MachineID: slaveID, User: "ops@example.com", StartMillis: 1_600_000_200_000, ActionID: "ticket-7",
		RevertTo: revert, Request: ChangeRequest{DurationMillis: new(int64(3_600_000)), RevertToState: new(revert)}}
}

// storedImport is the snapshot of imp once imported: its record as stored, its
// history and its expiring change.
func storedImport(imp Import) Snapshot {
	n := imp.normalized()
	slave := n.Slave
	return Snapshot{Slave: &slave, History: n.History, Expiring: n.Expiring}
}

func TestAnImportIsRefusedWithItsReason(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Import)
		reason string
	}{
		{"an id no slave can have", func(i *Import) { i.Slave.ID = "#decommissioning" }, "is not valid"},
		{"no history", func(i *Import) { i.History = nil }, "has no history"},
		{"too long a history", func(i *Import) {
			for len(i.History) <= MaxImportHistory {
				i.History = append(i.History, i.History[len(i.History)-1])
			}
			i.Slave.Current = i.History[len(i.History)-1]
		}, "at most 10000"},
		{"an entry of another slave", func(i *Import) { i.History[0].SlaveID = "S9" }, `names slave "S9"`},
		{"an unknown state", func(i *Import) { i.History[1].State = "PAUSED" }, `state "PAUSED"`},
		{"a state in lower case", func(i *Import) { i.History[1].State = "frozen" }, `state "frozen"`},
		{"an entry without a time", func(i *Import) { i.History[0].Timestamp = 0 }, "no timestamp"},
		{"a history newest first", func(i *Import) { i.History[0], i.History[1] = i.History[1], i.History[0] }, "oldest first"},
		{"a current state that is not the last entry", func(i *Import) { i.Slave.Current.Message = "other" }, "not its last history entry"},
		{"a description over the bound", func(i *Import) { i.Slave.Host = strings.Repeat("h", MaxDescription+1) }, "description of"},
		{"a negative running-task count", func(i *Import) { i.Slave.RunningTasks = new(-1) }, "negative runningTasks"},
		{"an expiring change of another machine", func(i *Import) { i.Expiring = importedExpiring(Active); i.Expiring.MachineID = "S9" }, `names machine "S9"`},
		{"an expiring change without an actionId", func(i *Import) { i.Expiring = importedExpiring(Active); i.Expiring.ActionID = "" }, "no actionId"},
		{"an expiring change without a duration", func(i *Import) { i.Expiring = importedExpiring(Active); i.Expiring.Request.DurationMillis = nil }, "no durationMillis"},
		{"an expiring change whose request reverts elsewhere", func(i *Import) {
			i.Expiring = importedExpiring(Active)
			i.Expiring.Request.RevertToState = new(Frozen)
		}, "disagree"},
		{"an expiring change the rules refuse: a revert to a state only the system sets", func(i *Import) { i.Expiring = importedExpiring(Dead) }, "set only by the system"},
		{"an expiring change longer than the longest", func(i *Import) {
			i.Expiring = importedExpiring(Active)
			i.Expiring.Request.DurationMillis = new(maxExpiring.Milliseconds() + 1)
		}, "durationMillis must be between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			imp := anImport(Frozen)
			tt.change(&imp)
			var result ImportResult
			plan, err := ImportSlave(imp, ImportOptions{Replace: true}, testLimits, clockAt(1_700_000_000_000), &result)(Snapshot{})
			if plan != nil || result != Refused || fault.KindOf(err) != fault.KindInvalid || !strings.Contains(fault.Message(err), tt.reason) {
				t.Errorf("got plan %v, %s, %v; want no plan, refused, invalid with %q", plan != nil, result, err, tt.reason)
			}
		})
	}
}

func TestAnImportAcceptsEveryStateInItsHistory(t *testing.T) {
	for _, st := range States {
		t.Run(string(st), func(t *testing.T) {
			imp := anImport(st)
			imp.History[0].State = st
			if err := imp.Validate(maxExpiring); err != nil {
				t.Errorf("got %v, want it valid", err)
			}
		})
	}
}

func TestAnImportDecidesOnWhatIsStored(t *testing.T) {
	imp := anImport(Frozen)
	imp.Expiring = importedExpiring(Active)
	// Each differs from imp in one part alone.
	other := anImport(Frozen)
	other.Expiring = importedExpiring(Active)
	other.History[1].Message = "another reason"
	otherRecord := anImport(Frozen)
	otherRecord.Expiring = importedExpiring(Active)
	otherRecord.Slave.Host = "node-2.example.com"
	otherExpiring := anImport(Frozen)
	tests := []struct {
		name    string
		snap    Snapshot
		replace bool
		want    ImportResult
		kind    fault.Kind
	}{
		{"a slave not stored is imported", Snapshot{}, false, Imported, 0},
		{"the same slave stored is unchanged", storedImport(imp), false, Unchanged, 0},
		{"the same slave stored is unchanged with mode=replace too", storedImport(imp), true, Unchanged, 0},
		{"a slave stored with another history is a conflict", storedImport(other), false, Conflicted, fault.KindConflict},
		{"a slave stored with another record is a conflict", storedImport(otherRecord), false, Conflicted, fault.KindConflict},
		{"a slave stored without its expiring change is a conflict", storedImport(otherExpiring), false, Conflicted, fault.KindConflict},
		{"a slave stored with another history is replaced with mode=replace", storedImport(other), true, Imported, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var result ImportResult
			plan, err := ImportSlave(imp, ImportOptions{Replace: tt.replace}, testLimits, clockAt(1_700_000_000_000), &result)(tt.snap)
			if result != tt.want || fault.KindOf(err) != tt.kind || (plan != nil) != (tt.want == Imported) {
				t.Fatalf("got %s, plan %v, %v; want %s", result, plan != nil, err, tt.want)
			}
			if plan == nil {
				return
			}
			if plan.Kind != Imports || plan.Replace != (tt.snap.Slave != nil) || len(plan.History) != 3 || *plan.Entry != imp.History[2] ||
				plan.PutExpiring == nil || plan.DropExpiring != (tt.snap.Expiring != nil) {
				t.Errorf("got %+v, want the slave imported whole in place of what was read", plan)
			}
		})
	}
}

// An imported slave is stored as a report stores one: its resources
// compacted, a rack when none is named, a running-task count only while it
// drains; a second import of the same slave, spelled otherwise, is
// unchanged.
func TestAnImportedSlaveIsStoredAsAReportStoresOne(t *testing.T) {
	imp := anImport(Frozen)
	imp.Slave.RackID, imp.Slave.RunningTasks, imp.Slave.Attributes = "", new(3), nil
	var result ImportResult
	plan, err := ImportSlave(imp, ImportOptions{}, testLimits, clockAt(1_700_000_000_000), &result)(Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	s := plan.Slave
	if string(s.Resources) != `{"cpus":16}` || s.RackID != DefaultRack || s.RunningTasks != nil || s.Attributes == nil {
		t.Errorf("got %+v, want compacted resources, rack DEFAULT, no count, attributes {}", s)
	}
	again, _ := ImportSlave(imp, ImportOptions{}, testLimits, clockAt(1_700_000_000_000), &result)(Snapshot{Slave: &s, History: plan.History})
	if again != nil || result != Unchanged {
		t.Errorf("again: got %s, want unchanged", result)
	}
}

func TestAnImportJoinsTheDecommissioningSetUnderItsLimit(t *testing.T) {
	const now, limitAt = int64(1_700_000_000_000), int64(1_700_000_000_500)
	tests := []struct {
		name        string
		state       State
		stored      *Slave
		override    bool
		join, leave bool
		limit       int
	}{
		{"a slave imported STARTING_DECOMMISSION joins, under the limit", StartingDecommission, nil, false, true, false, testLimits.MaxDecommissioning},
		{"a slave imported DECOMMISSIONING joins, under the limit", Decommissioning, nil, false, true, false, testLimits.MaxDecommissioning},
		{"with overrideLimit it joins whatever the limit", Decommissioning, nil, true, true, false, 0},
		{"a slave imported DECOMMISSIONED does not join", Decommissioned, nil, false, false, false, 0},
		{"a draining slave replaced by an ACTIVE one leaves", Active, someSlave(Decommissioning), false, false, true, 0},
		{"a draining slave replaced by a draining one stays", StartingDecommission, someSlave(Decommissioning), false, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var result ImportResult
			imp := anImport(tt.state)
			plan, err := ImportSlave(imp, ImportOptions{Replace: true, OverrideLimit: tt.override}, testLimits, clockAt(now), &result)(Snapshot{Slave: tt.stored, LimitAt: limitAt})
			if err != nil {
				t.Fatal(err)
			}
			if plan.Join != tt.join || plan.Leave != tt.leave || plan.Limit != tt.limit {
				t.Errorf("got join %v, leave %v, limit %d; want %v, %v, %d", plan.Join, plan.Leave, plan.Limit, tt.join, tt.leave, tt.limit)
			}
			if (tt.join || tt.leave) && plan.SetAt != limitAt+1 {
				t.Errorf("got the set moved to %d, want %d, after its last change", plan.SetAt, limitAt+1)
			}
			if plan.Entry.Timestamp != imp.History[2].Timestamp {
				t.Errorf("got the entry at %d, want its own time %d", plan.Entry.Timestamp, imp.History[2].Timestamp)
			}
		})
	}
}
