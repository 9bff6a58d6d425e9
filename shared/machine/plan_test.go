package machine

import (
	"fmt"
	"testing"
)

// Every decision says which stored parts of the slave it writes; the stores
// decide nothing (Plan). Here: the running-task count is written exactly
// when the description is or the state after the change does not drain, and
// then it is none unless the slave drains after the change.
func TestEveryPlanSaysWhetherItWritesTheRunningTaskCount(t *testing.T) {
	type decision struct {
		name     string
		decide   Decide
		expiring *Expiring // the snapshot's expiring record
	}
	decisions := func() []decision {
		var ds []decision
		for _, a := range actions {
			ds = append(ds, decision{a.name, UserChange(Change{SlaveID: slaveID, Target: a.target, Now: clockAt(1_700_000_000_000)}, testLimits), nil})
		}
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
		)
	}
	for _, from := range States {
		for _, count := range []*int{nil, new(3)} {
			for _, d := range decisions() {
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
