package machine

import (
	"bytes"
	"encoding/json"
	"maps"
)

// Observation is what one machine report says of one machine (SPEC §7).
type Observation struct {
	ID           string
	Host         string
	RackID       string
	Attributes   map[string]string
	Resources    json.RawMessage
	Lost         bool
	RunningTasks *int  // nil when the report does not say
	Absent       bool  // known machine missing from a complete report
	At           int64 // when the scheduler made the report, epoch ms
}

// DefaultRack is the rack of a machine whose report names none.
const DefaultRack = "DEFAULT"

// Observe decides the system transition of SPEC §5.2 for one observation
// made at o.At and applied at now. System changes are stamped with the time
// the scheduler observed them, and a report older than the slave's current
// state changes nothing, so a delayed report never overwrites a newer user
// change while reports keep applying in the order they were made. A report
// that matches what is stored writes nothing, which makes reports
// idempotent.
func Observe(o Observation, now int64) Decide {
	return func(snap Snapshot) (*Plan, error) {
		if snap.Slave == nil {
			if o.Lost || o.Absent {
				return nil, nil
			}
			entry := Update{SlaveID: o.ID, State: Active, Timestamp: o.At, Message: "New machine reported"}
			slave := Slave{ID: o.ID, FirstSeenAt: now, Current: entry}
			describe(&slave, o)
			return &Plan{Slave: slave, Entry: &entry}, nil
		}
		cur := snap.Slave.Current
		if o.At < cur.Timestamp {
			return nil, nil
		}
		next, reason := systemStep(cur.State, o)
		if next == cur.State {
			slave := *snap.Slave
			if !o.Absent {
				describe(&slave, o)
			}
			if sameDescription(slave, *snap.Slave) {
				return nil, nil
			}
			return &Plan{Slave: slave}, nil
		}
		entry := Update{SlaveID: o.ID, State: next, Timestamp: o.At, Message: reason}
		if cur.State.IsDecommissioning() && next.IsDecommissioning() {
			// The operator's decommission progressing: keep who asked and why.
			entry.User, entry.Message = cur.User, cur.Message
		}
		plan := transition(snap, entry)
		if !o.Absent {
			describe(&plan.Slave, o)
		}
		return plan, nil
	}
}

// systemStep returns the state a report moves a slave to, and why.
func systemStep(cur State, o Observation) (State, string) {
	switch {
	case o.Absent && cur != Dead:
		return Dead, "Machine missing from a complete report"
	case o.Lost && cur != Dead:
		return Dead, "Machine reported lost"
	case o.Lost || o.Absent:
		return cur, ""
	case cur.IsInactive():
		return Active, "Machine reported up"
	case o.RunningTasks == nil:
		return cur, ""
	case cur == StartingDecommission && *o.RunningTasks > 0:
		return Decommissioning, ""
	case (cur == StartingDecommission || cur == Decommissioning) && *o.RunningTasks == 0:
		return Decommissioned, ""
	}
	return cur, ""
}

func describe(s *Slave, o Observation) {
	s.Host = o.Host
	s.RackID = o.RackID
	if s.RackID == "" {
		s.RackID = DefaultRack
	}
	s.Attributes = o.Attributes
	if s.Attributes == nil {
		s.Attributes = map[string]string{}
	}
	s.Resources = o.Resources
}

func sameDescription(a, b Slave) bool {
	return a.Host == b.Host && a.RackID == b.RackID && maps.Equal(a.Attributes, b.Attributes) &&
		bytes.Equal(compact(a.Resources), compact(b.Resources))
}

func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}
