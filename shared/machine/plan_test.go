package machine

import (
	"cmp"
	"fmt"
	"testing"
)

// Every decision says which stored parts of the slave it writes; the stores
// decide nothing (Plan). Here: the running-task count is written exactly
// when the description is or the state after the change does not drain, and
// then it is none unless the slave drains after the change.
func TestEveryPlanSaysWhetherItWritesTheRunningTaskCount(t *testing.T) {
	for _, from := range States {
		for _, count := range []*int{nil, new(3)} {
			for _, d := range everyDecision() {
				name := fmt.Sprintf("%s from %s with %s running tasks stored", d.name, from, countText(count))
				t.Run(name, func(t *testing.T) {
					slave := someSlave(from)
					slave.RunningTasks = count
					plan, err := d.decide(Snapshot{Slave: slave, Expiring: d.expiring})
					if err != nil || plan == nil {
						return // a refusal or nothing to write: no count written
					}
					after := from
					if plan.Entry != nil {
						after = plan.Entry.State
					}
					want := plan.Describe || plan.Entry != nil && !after.Draining()
					if plan.Tasks != want {
						t.Errorf("Tasks: got %v, want %v (Describe %v, state after %s)", plan.Tasks, want, plan.Describe, after)
					}
					if plan.Tasks && !after.Draining() && plan.Slave.RunningTasks != nil {
						t.Errorf("count written in %s: got %d, want none", after, *plan.Slave.RunningTasks)
					}
				})
			}
		}
	}
}

func countText(n *int) string {
	if n == nil {
		return "no"
	}
	return fmt.Sprint(*n)
}

// decision is one of the package's decisions, with the expiring record of
// the snapshot it is asked on.
type decision struct {
	name     string
	decide   Decide
	expiring *Expiring
}

// everyDecision returns each kind of decision the package makes: the user
// changes, the expiry's reverts and the reports.
func everyDecision() []decision {
	var ds []decision
	for _, a := range actions {
		ds = append(ds, decision{a.name, UserChange(Change{SlaveID: slaveID, Target: a.target, Now: clockAt(1_700_000_000_000)}, testLimits), nil})
	}
	hour, active := int64(3_600_000), Active
	forAnHour := ChangeRequest{DurationMillis: &hour, RevertToState: &active}
	ds = append(ds, decision{"a freeze for an hour", UserChange(Change{SlaveID: slaveID, Target: Frozen, Request: forAnHour, Now: clockAt(1_700_000_000_000)}, testLimits), nil})
	ds = append(ds, decision{"a decommission for an hour", UserChange(Change{SlaveID: slaveID, Target: StartingDecommission, Request: forAnHour, Now: clockAt(1_700_000_000_000)}, testLimits), nil})
	for _, revert := range []State{Active, Frozen, StartingDecommission, Decommissioned} {
		var outcome Outcome
		ds = append(ds, decision{"expiry reverting to " + string(revert), Expire(slaveID, clockAt(1_700_000_000_000), testLimits, &outcome), someExpiring(revert)})
	}
	at := int64(1_700_000_000_000)
	report := func(name string, change func(*Observation)) decision {
		o := Observation{ID: slaveID, Host: "node-1.example.com", RackID: "us-east-1a",
			Attributes: map[string]string{"instance_type": "m5.4xlarge"}, Resources: []byte(`{"cpus":16,"mem":63000}`), At: at}
		change(&o)
		return decision{name, Observe(o, at), nil}
	}
	return append(ds,
		report("a report without a count", func(*Observation) {}),
		report("a report of 2 tasks", func(o *Observation) { o.RunningTasks = new(2) }),
		report("a report of no task", func(o *Observation) { o.RunningTasks = new(0) }),
		report("a report that moves the machine", func(o *Observation) { o.Host = "node-2.example.com"; o.RunningTasks = new(2) }),
		report("a report of a loss", func(o *Observation) { o.Lost = true }),
		report("a complete report without the machine", func(o *Observation) { *o = Observation{ID: slaveID, Absent: true, At: at} }),
		decision{"deleting the expiring record", DeleteExpiring, someExpiring(Active)},
		importDecision("an import of an ACTIVE slave", Active, nil),
		importDecision("an import of a DECOMMISSIONING slave with its expiring change", Decommissioning, importedExpiring(Active)),
		importDecision("an import of a FROZEN slave", Frozen, nil),
	)
}

// importDecision is the import, replacing what is stored, of a slave whose
// history ends in state, with expiring as its expiring change.
func importDecision(name string, state State, expiring *Expiring) decision {
	imp := anImport(state)
	imp.Expiring = expiring
	var result ImportResult
	return decision{name, ImportSlave(imp, ImportOptions{Replace: true}, testLimits, clockAt(1_700_000_000_000), &result), nil}
}

// Every plan names its kind of write, and its parts fit it: the stores
// carry out the kind and never infer one from which fields are set. The
// decommissioning set is joined or left exactly when the entry's state
// counts toward the limit and the state before did not, or the reverse,
// and then the entry follows the set's last change.
func TestEveryPlanNamesItsKindOfWrite(t *testing.T) {
	const limitAt = 1_700_000_000_500 // the set changed just after the decisions' clock
	for _, from := range append([]State{""}, States...) {
		for _, d := range everyDecision() {
			t.Run(fmt.Sprintf("%s from %s", d.name, cmp.Or(string(from), "no slave")), func(t *testing.T) {
				snap := Snapshot{Expiring: d.expiring, LimitAt: limitAt}
				if from != "" {
					snap.Slave = someSlave(from)
				}
				plan, err := d.decide(snap)
				if err != nil || plan == nil {
					return
				}
				var fits bool
				switch plan.Kind {
				case Creates:
					fits = snap.Slave == nil && plan.Entry != nil && !plan.DropExpiring
				case Transitions:
					fits = snap.Slave != nil && plan.Entry != nil
				case Describes:
					fits = snap.Slave != nil && plan.Entry == nil && !plan.DropExpiring && plan.PutExpiring == nil
				case DropsExpiring:
					fits = snap.Expiring != nil && plan.DropExpiring && plan.Entry == nil && plan.PutExpiring == nil
				case Imports:
					fits = plan.Entry != nil && len(plan.History) > 0 && plan.History[len(plan.History)-1] == *plan.Entry &&
						plan.Slave.Current == *plan.Entry && plan.Replace == (snap.Slave != nil) && plan.DropExpiring == (snap.Expiring != nil)
				}
				if !fits {
					t.Fatalf("got kind %d with entry %v, drop %v, put %v, on slave %v and record %v: the parts do not fit the kind",
						plan.Kind, plan.Entry, plan.DropExpiring, plan.PutExpiring, snap.Slave != nil, snap.Expiring != nil)
				}
				if plan.Entry == nil {
					if plan.Join || plan.Leave {
						t.Errorf("got join %v, leave %v without an entry", plan.Join, plan.Leave)
					}
					return
				}
				was := from.CountsTowardLimit()
				counts := plan.Entry.State.CountsTowardLimit()
				if plan.Join != (counts && !was) || plan.Leave != (was && !counts) {
					t.Errorf("got join %v, leave %v, from %s to %s", plan.Join, plan.Leave, from, plan.Entry.State)
				}
				if (plan.Join || plan.Leave) && plan.SetAt <= limitAt {
					t.Errorf("the set's time moves to %d: want it after its last change at %d", plan.SetAt, limitAt)
				}
				if plan.Kind == Imports {
					return // imported entries and records keep their own times
				}
				if (plan.Join || plan.Leave) && (plan.Entry.Timestamp <= limitAt || plan.Slave.Current.Timestamp != plan.Entry.Timestamp || plan.SetAt != plan.Entry.Timestamp) {
					t.Errorf("entry at %d, current at %d, set at %d: want all three after the set's last change at %d", plan.Entry.Timestamp, plan.Slave.Current.Timestamp, plan.SetAt, limitAt)
				}
				// The expiring record starts when the change was decided:
				// the set's order moves the entry, not the record's start.
				if plan.PutExpiring != nil {
					if decided := max(1_700_000_000_000, snap.Slave.Current.Timestamp); plan.PutExpiring.StartMillis != decided {
						t.Errorf("expiring record starts at %d, want the time the change was decided, %d", plan.PutExpiring.StartMillis, decided)
					}
				}
			})
		}
	}
}
