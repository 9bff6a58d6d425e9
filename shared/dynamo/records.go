package dynamo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// slaveRecord is one item of the slaves table. The current state is stored
// flat so that the ByState index (state, id) can list a state with one Query.
// version counts state changes: every change is conditioned on it and the
// history entry of a change is keyed by it, so one slave's history is one
// Query in seq order and two changes can never both win from one version.
// describedAt is the time of the report that wrote the description (host,
// rack, attributes, resources): a refresh is conditioned on it, and a state
// change that leaves the description alone does not write it at all.
// runningTasks is stored only while the slave drains
// (machine.Slave.RunningTasks); it is written, or removed, when the plan
// says so (machine.Plan.Tasks), never by a rule of this package. sequence
// is the position of the slave's latest feed entry (machine.Slave.Sequence),
// written with it.
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
	DescribedAt    int64             `dynamodbav:"describedAt,omitempty"`
	RunningTasks   *int              `dynamodbav:"runningTasks,omitempty"`
	Version        int64             `dynamodbav:"version"`
	Sequence       int64             `dynamodbav:"sequence,omitempty"`
}

func (r slaveRecord) slave() machine.Slave {
	s := machine.Slave{
		ID:           r.ID,
		FirstSeenAt:  r.FirstSeenAt,
		Current:      machine.Update{SlaveID: r.ID, State: machine.State(r.State), Timestamp: r.StateTimestamp, User: r.StateUser, Message: r.StateMessage},
		Host:         r.Host,
		RackID:       r.RackID,
		Attributes:   r.Attributes,
		DescribedAt:  r.DescribedAt,
		RunningTasks: r.RunningTasks,
		Sequence:     r.Sequence,
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
		DescribedAt:    s.DescribedAt,
		RunningTasks:   s.RunningTasks,
		Version:        version,
		Sequence:       s.Sequence,
	}
}

// limitRecord is the decommissioning set (see limitID): its members, and
// the timestamp of the last change that entered or left it.
type limitRecord struct {
	Members []string `dynamodbav:"members,stringset"`
	LastAt  int64    `dynamodbav:"lastAt"`
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
	// ImportedAt is when an import wrote the entry before its slave (epoch
	// ms): an entry of a slave not stored with it is what an import left
	// (import.go). 0 for every other entry.
	ImportedAt int64 `dynamodbav:"importedAt,omitempty"`
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

// newExpiringRecord is e as stored, kept pending until retention past
// keptFrom (epoch ms; Plan.ExpiringKeptFrom).
func newExpiringRecord(e machine.Expiring, keptFrom int64) expiringRecord {
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
		ExpiresAt:   keptFrom/1000 + expiringRetentionSeconds,
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

// receiptRecord is one item of the requests table, keyed (slaveId,
// requestKey): the outcome of a change request, remembered for
// machine.IdempotencyWindow so that a retry is answered, not applied again.
// A client's key names one request of that caller whatever slave it is
// for, so its receipt is keyed by a hash of the caller and the key (whose
// length the client chooses), under a slaveId of its own that no slave can
// have (see scopedReceipt). The store's own key of a request without one
// stays under the slave.
type receiptRecord struct {
	SlaveID     string `dynamodbav:"slaveId"`
	Key         string `dynamodbav:"requestKey"`
	Fingerprint string `dynamodbav:"fingerprint"`
	At          int64  `dynamodbav:"at"`                // epoch ms of the first request
	Outcome     string `dynamodbav:"outcome,omitempty"` // "" for success, else the refusal's kind
	Message     string `dynamodbav:"message,omitempty"`
	ExpiresAt   int64  `dynamodbav:"expiresAt"` // TTL, epoch seconds
}

func newReceipt(id string, once machine.Idempotency) receiptRecord {
	window := machine.IdempotencyWindow.Milliseconds()
	r := receiptRecord{Fingerprint: once.Fingerprint, At: once.At, ExpiresAt: (once.At+window)/1000 + 1}
	if once.Key != "" {
		r.SlaveID, r.Key = scopedReceipt(once.Caller, once.Key)
		return r
	}
	// Nobody will retry with this key but the SDK, which repeats a write
	// whose answer was lost: the receipt tells it the write won.
	sum := sha256.Sum256([]byte(machine.NewActionID()))
	r.SlaveID, r.Key = id, hex.EncodeToString(sum[:])
	return r
}

// refusals are the outcomes a receipt can hold besides success: the ones a
// decision or the decommission limit returns.
var refusals = map[fault.Kind]string{fault.KindInvalid: "invalid", fault.KindNotFound: "not-found", fault.KindConflict: "conflict"}

func (r receiptRecord) refused(err error) receiptRecord {
	r.Outcome, r.Message = refusals[fault.KindOf(err)], fault.Message(err)
	return r
}

// outcome is the first request's answer.
func (r receiptRecord) outcome() error {
	if r.Outcome == "" {
		return nil
	}
	for kind, name := range refusals {
		if name == r.Outcome {
			return &fault.Error{Kind: kind, Message: r.Message}
		}
	}
	return fmt.Errorf("receipt of %s holds an unknown outcome %q", r.SlaveID, r.Outcome)
}
