package machine

import (
	"bytes"
	"encoding/json"
	"maps"
	"time"
)

// Observation is what one machine report says of one machine (docs/behaviour.md "Machine reports").
type Observation struct {
	ID           string
	Host         string
	RackID       string
	Attributes   map[string]string
	Resources    json.RawMessage
	Lost         bool
	RunningTasks *int  // nil when the report does not say
	Absent       bool  // known machine missing from a complete report
	Held         bool  // a loss the mass-loss brake holds back: the machine is not marked DEAD
	At           int64 // when the scheduler made the report, epoch ms, never later than its receipt
}

// DefaultRack is the rack of a machine whose report names none.
const DefaultRack = "DEFAULT"

// StaleAfter is how much older than a slave's last change a report must be
// to change nothing. Report times are truncated to the second, so a report
// made in the same second as a user change may carry an earlier time and
// still be the newer of the two.
const StaleAfter = 1000 // ms

// Observe decides the system transition of docs/behaviour.md "Machine reports" for one observation
// made at o.At and applied at now. System changes are stamped with the time
// the scheduler observed them (never earlier than the entry they follow), and
// a report older than the slave's current state changes nothing, so a delayed
// report never overwrites a newer user change while reports keep applying in
// the order they were made. A description is never replaced by a report
// older than the one that wrote it. A report that matches what is stored
// writes nothing, which makes reports idempotent; so a report that only
// confirms the description does not move DescribedAt, and a report delayed
// past it may still replace that description until the next report.
func Observe(o Observation, now int64) Decide {
	return func(snap Snapshot) (*Plan, error) {
		if snap.Slave == nil {
			if o.Lost || o.Absent {
				return nil, nil
			}
			entry := Update{SlaveID: o.ID, State: Active, Timestamp: o.At, Message: "New machine reported"}
			slave := Slave{ID: o.ID, FirstSeenAt: now, Current: entry}
			describe(&slave, o, Active)
			plan := &Plan{Kind: Creates, Slave: slave, Entry: &entry, Describe: true, Tasks: true}
			plan.followLimit(snap)
			return plan, nil
		}
		cur := snap.Slave.Current
		if o.staleFor(cur) {
			return nil, nil
		}
		slave, refresh := *snap.Slave, false
		next, reason := systemStep(cur.State, o)
		if !o.Absent && o.At >= slave.DescribedAt {
			described := slave
			describe(&described, o, next)
			if !sameDescription(described, slave) {
				slave, refresh = described, true
			}
		}
		if next == cur.State {
			if !refresh {
				return nil, nil
			}
			return &Plan{Kind: Describes, Slave: slave, Describe: true, Tasks: true}, nil
		}
		entry := Update{SlaveID: o.ID, State: next, Timestamp: o.At, Message: reason}
		if cur.State.IsDecommissioning() && next.IsDecommissioning() {
			// The operator's decommission progressing: keep who asked and why.
			entry.User, entry.Message = cur.User, cur.Message
		}
		plan := transition(Snapshot{Slave: &slave, Expiring: snap.Expiring, LimitAt: snap.LimitAt}, entry)
		plan.Describe = refresh
		plan.Tasks = plan.Tasks || refresh // the count is part of a refreshed description
		return plan, nil
	}
}

// staleFor reports whether the observation is too old to change a slave
// whose current state is cur.
func (o Observation) staleFor(cur Update) bool { return o.At < cur.Timestamp-StaleAfter }

// systemStep returns the state a report moves a slave to, and why.
func systemStep(cur State, o Observation) (State, string) {
	switch {
	case (o.Lost || o.Absent) && (o.Held || cur == Dead):
		return cur, ""
	case o.Absent:
		return Dead, "Machine missing from a complete report"
	case o.Lost:
		return Dead, "Machine reported lost"
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

// LossBrake is the mass-loss brake. Losing many machines at once is far more
// often a broken reporter, a network partition or a control-plane outage than
// real hardware loss, and every machine marked DEAD is removed by the
// retention job a week later. So when the losses of one report, together with
// the machines marked DEAD within Window before it, would exceed MaxFraction
// of the fleet that was live before them, none of the report's losses is
// applied until an operator confirms them (or the condition passes).
type LossBrake struct {
	MaxFraction float64       // MAX_LOST_FRACTION, in (0, 1]
	Window      time.Duration // LOST_WINDOW
}

// DefaultLossBrake is the brake when MAX_LOST_FRACTION and LOST_WINDOW are
// unset: more than a fifth of the fleet within a minute.
var DefaultLossBrake = LossBrake{MaxFraction: 0.2, Window: time.Minute}

// NoLossBrake never holds: no loss exceeds the whole fleet.
var NoLossBrake = LossBrake{MaxFraction: 1}

// The brake leaves small fleets and small losses alone: losing two machines
// of nine is a plausible real event, and the brake's false alarm would cost
// more than it saves.
const (
	minBrakedFleet = 10
	minBrakedLoss  = 3
)

// Hold marks Held every loss among obs (a machine reported lost, or absent
// from a complete report, that the report would mark DEAD) when together
// they are more than the brake allows at, the report's time, given the known
// fleet. It returns the ids it held, none when the brake lets them through.
func (b LossBrake) Hold(fleet []Slave, obs []Observation, at int64) []string {
	known := make(map[string]Slave, len(fleet))
	live, recent := 0, 0
	for _, s := range fleet {
		known[s.ID] = s
		switch {
		case s.Current.State != Dead:
			live++
		case s.Current.Timestamp > at-b.Window.Milliseconds():
			recent++
		}
	}
	var losing []int
	for i, o := range obs {
		s, ok := known[o.ID]
		if (o.Lost || o.Absent) && ok && s.Current.State != Dead && !o.staleFor(s.Current) {
			losing = append(losing, i)
		}
	}
	lost, before := recent+len(losing), live+recent
	if len(losing) == 0 || before < minBrakedFleet || lost < minBrakedLoss || float64(lost) <= b.MaxFraction*float64(before) {
		return nil
	}
	ids := make([]string, len(losing))
	for k, i := range losing {
		obs[i].Held = true
		ids[k] = obs[i].ID
	}
	return ids
}

// describe writes o's description into s, which will be in state next: the
// running-task count only when next drains, so that the moving counts of
// machines in any other state are never a change to write.
func describe(s *Slave, o Observation, next State) {
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
	s.DescribedAt = o.At
	s.RunningTasks = nil
	if next.Draining() && o.RunningTasks != nil {
		s.RunningTasks = new(*o.RunningTasks)
	}
}

func sameDescription(a, b Slave) bool {
	return a.Host == b.Host && a.RackID == b.RackID && maps.Equal(a.Attributes, b.Attributes) &&
		bytes.Equal(compact(a.Resources), compact(b.Resources)) && sameCount(a.RunningTasks, b.RunningTasks)
}

func sameCount(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}
