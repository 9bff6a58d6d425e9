package dynamo

import (
	"encoding/json"

	"github.com/fleetops/fleet/shared/machine"
)

// slaveRecord is one item of the slaves table. The current state is stored
// flat so that the ByState index (state, id) can list a state with one Query.
// version counts state changes: every change is conditioned on it and the
// history entry of a change is keyed by it, so one slave's history is one
// Query in seq order and two changes can never both win from one version.
type slaveRecord struct {
	ID             string            `dynamodbav:"id"`
	State          string            `dynamodbav:"state,omitempty"`
	StateTimestamp int64             `dynamodbav:"stateTimestamp"`
	StateUser      string            `dynamodbav:"stateUser,omitempty"`
	StateMessage   string            `dynamodbav:"stateMessage,omitempty"`
	FirstSeenAt    int64             `dynamodbav:"firstSeenAt"`
	Host           string            `dynamodbav:"host"`
	RackID         string            `dynamodbav:"rackId"`
	Attributes     map[string]string `dynamodbav:"attributes"`
	Resources      string            `dynamodbav:"resources,omitempty"` // the reported JSON object, verbatim
	Version        int64             `dynamodbav:"version"`
}

func (r slaveRecord) slave() machine.Slave {
	s := machine.Slave{
		ID:          r.ID,
		FirstSeenAt: r.FirstSeenAt,
		Current:     machine.Update{SlaveID: r.ID, State: machine.State(r.State), Timestamp: r.StateTimestamp, User: r.StateUser, Message: r.StateMessage},
		Host:        r.Host,
		RackID:      r.RackID,
		Attributes:  r.Attributes,
	}
	if s.Attributes == nil {
		s.Attributes = map[string]string{}
	}
	if r.Resources != "" {
		s.Resources = json.RawMessage(r.Resources)
	}
	return s
}

func newSlaveRecord(s machine.Slave, version int64) slaveRecord {
	return slaveRecord{
		ID:             s.ID,
		State:          string(s.Current.State),
		StateTimestamp: s.Current.Timestamp,
		StateUser:      s.Current.User,
		StateMessage:   s.Current.Message,
		FirstSeenAt:    s.FirstSeenAt,
		Host:           s.Host,
		RackID:         s.RackID,
		Attributes:     s.Attributes,
		Resources:      string(s.Resources),
		Version:        version,
	}
}

// historyRecord is one item of the history table: key (slaveId, seq).
type historyRecord struct {
	SlaveID   string `dynamodbav:"slaveId"`
	Seq       int64  `dynamodbav:"seq"`
	State     string `dynamodbav:"state"`
	Timestamp int64  `dynamodbav:"timestamp"`
	User      string `dynamodbav:"user,omitempty"`
	Message   string `dynamodbav:"message,omitempty"`
	ExpiresAt int64  `dynamodbav:"expiresAt,omitempty"` // TTL, epoch seconds; set once the entry is superseded
}

func (r historyRecord) update() machine.Update {
	return machine.Update{SlaveID: r.SlaveID, State: machine.State(r.State), Timestamp: r.Timestamp, User: r.User, Message: r.Message}
}

// expiringRecord is one item of the expiring table, keyed by machineId.
// dueAt is kept for the expiry trigger; expiresAt is the TTL attribute, a
// garbage collector that runs well after dueAt, never the timer.
type expiringRecord struct {
	MachineID   string        `dynamodbav:"machineId"`
	User        string        `dynamodbav:"user,omitempty"`
	StartMillis int64         `dynamodbav:"startMillis"`
	ActionID    string        `dynamodbav:"actionId"`
	RevertTo    string        `dynamodbav:"revertToState"`
	KillTasks   bool          `dynamodbav:"killTasksOnDecommissionTimeout"`
	Request     requestRecord `dynamodbav:"request"`
	DueAt       int64         `dynamodbav:"dueAt"`
	DueShard    int64         `dynamodbav:"dueShard"`  // partition of the ByDue index
	ExpiresAt   int64         `dynamodbav:"expiresAt"` // epoch seconds
}

type requestRecord struct {
	Message        string `dynamodbav:"message,omitempty"`
	DurationMillis *int64 `dynamodbav:"durationMillis,omitempty"`
	RevertToState  string `dynamodbav:"revertToState,omitempty"`
	ActionID       string `dynamodbav:"actionId,omitempty"`
	KillTasks      bool   `dynamodbav:"killTasksOnDecommissionTimeout"`
}

// expiringRetention is how long a record outlives its due time before TTL
// may collect it, in case the trigger was down.
const expiringRetentionSeconds = 7 * 24 * 3600

func newExpiringRecord(e machine.Expiring) expiringRecord {
	req := requestRecord{
		Message:        e.Request.Message,
		DurationMillis: e.Request.DurationMillis,
		ActionID:       e.Request.ActionID,
		KillTasks:      e.Request.KillTasksOnDecommissionTimeout,
	}
	if e.Request.RevertToState != nil {
		req.RevertToState = string(*e.Request.RevertToState)
	}
	return expiringRecord{
		MachineID:   e.MachineID,
		User:        e.User,
		StartMillis: e.StartMillis,
		ActionID:    e.ActionID,
		RevertTo:    string(e.RevertTo),
		KillTasks:   e.KillTasksOnDecommissionTimeout,
		Request:     req,
		DueAt:       e.DueAt(),
		DueShard:    dueShard(e.MachineID),
		ExpiresAt:   e.DueAt()/1000 + expiringRetentionSeconds,
	}
}

func (r expiringRecord) expiring() machine.Expiring {
	req := machine.ChangeRequest{
		Message:                        r.Request.Message,
		DurationMillis:                 r.Request.DurationMillis,
		ActionID:                       r.Request.ActionID,
		KillTasksOnDecommissionTimeout: r.Request.KillTasks,
	}
	if r.Request.RevertToState != "" {
		st := machine.State(r.Request.RevertToState)
		req.RevertToState = &st
	}
	if req.DurationMillis == nil {
		d := r.DueAt - r.StartMillis
		req.DurationMillis = &d
	}
	return machine.Expiring{
		MachineID:                      r.MachineID,
		User:                           r.User,
		StartMillis:                    r.StartMillis,
		ActionID:                       r.ActionID,
		RevertTo:                       machine.State(r.RevertTo),
		KillTasksOnDecommissionTimeout: r.KillTasks,
		Request:                        req,
	}
}
