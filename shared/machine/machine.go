package machine

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

// Update is one entry of a slave's state history, and its current state.
type Update struct {
	SlaveID   string
	State     State
	Timestamp int64 // epoch ms
	User      string
	Message   string
}

// Slave is a worker machine known to the scheduler.
type Slave struct {
	ID          string
	FirstSeenAt int64
	Current     Update
	Host        string
	RackID      string
	Attributes  map[string]string
	Resources   json.RawMessage // flat open JSON object, kept as reported
	// DescribedAt is the time of the report that wrote Host, RackID,
	// Attributes and Resources (epoch ms; 0 before any). An older report
	// never overwrites a newer description.
	DescribedAt int64
	// RunningTasks is the running-task count of the report that wrote the
	// description, stored only while the slave drains (State.Draining),
	// where an operator watches it fall; nil in every other state, and
	// cleared by any change that leaves them. So the counts of an ACTIVE
	// fleet, which move with every report, never cost a write.
	RunningTasks *int
	// Sequence is the position of the slave's latest change in the change
	// feed: it only grows, with every change the feed shows, so a client
	// that saw it can ask for a change only if the slave has not moved
	// since (If-Match). The store sets it as it writes; 0 for a slave not
	// changed since the feed began.
	Sequence int64
}

// ChangeRequest is the optional body of freeze, decommission and activate.
type ChangeRequest struct {
	Message                        string
	DurationMillis                 *int64
	RevertToState                  *State
	ActionID                       string
	KillTasksOnDecommissionTimeout bool
}

// Expiring is a pending revert of a slave's state (at most one per slave).
type Expiring struct {
	MachineID                      string
	User                           string
	StartMillis                    int64
	ActionID                       string
	RevertTo                       State
	KillTasksOnDecommissionTimeout bool
	Request                        ChangeRequest
}

// DueAt is the instant after which the record is due, in epoch ms.
func (e Expiring) DueAt() int64 { return e.StartMillis + *e.Request.DurationMillis }

// Due reports whether the record is due at now: strictly more than
// durationMillis has passed since it started.
func (e Expiring) Due(now int64) bool { return now-e.StartMillis > *e.Request.DurationMillis }

// Snapshot is a slave and its expiring record, read together, with the
// time the decommissioning set last changed.
type Snapshot struct {
	Slave    *Slave
	Expiring *Expiring
	// LimitAt is when a slave last entered or left the decommissioning
	// states (epoch ms, 0 never): a change that does so is timed after it
	// (AfterLimitChange).
	LimitAt int64
	// History is the slave's stored history, oldest first, as it reads at
	// the time of the read (entries past their retention left out): read
	// only for an import (ImportSlave), which compares it; nil otherwise.
	History []Update
}

// Kind is the kind of write a plan is. It names the feed entry written
// with it, too.
type Kind int

// The kinds of write.
const (
	// Creates writes a new slave whole, with its first history entry (the
	// feed's "added").
	Creates Kind = iota + 1
	// Transitions appends a history entry and makes it the current state,
	// with the other parts the plan names (the feed's "stateChanged"). The
	// entry it follows is superseded at the new entry's time: that entry's
	// history retention counts from then.
	Transitions
	// Describes writes the description alone (the feed's
	// "descriptionChanged"); the state and version stay.
	Describes
	// DropsExpiring deletes the snapshot's expiring record alone; the feed
	// does not show it.
	DropsExpiring
	// Imports writes a slave whole with its whole history (History, whose
	// last entry is Entry) and its expiring record, in place of the slave
	// read when Replace is set (its history and expiring record go), and
	// conditioned on there being none otherwise (the feed's "added", after
	// a "deleted" of the slave replaced, and an "expiringSet" of the
	// record). The entries keep their own times; the superseded ones
	// expire counted from the import.
	Imports
)

// Plan is one atomic change to a slave, as decided by this package, with
// all its effects. The storage adapter writes all of it or nothing,
// conditioned on the snapshot it was decided from.
//
// The adapter carries out the kind of write the plan names (Kind) and the
// parts it names, and decides nothing: the description when Describe is
// set, the running-task count when Tasks is set, the expiring record's
// creation or deletion, the decommissioning set's join or leave. A new
// slave is written whole. A user change never writes the description it
// happened to read, so a report's refresh that commits between the
// change's read and its write is kept.
type Plan struct {
	Kind         Kind
	Slave        Slave     // the slave as it will be stored
	Entry        *Update   // history entry of Creates and Transitions
	Describe     bool      // Slave's host, rack, attributes, resources and DescribedAt are written
	Tasks        bool      // Slave's RunningTasks is written; nil removes the stored count
	PutExpiring  *Expiring // expiring record created with the change
	DropExpiring bool      // the snapshot's expiring record is deleted
	Reverts      bool      // the change is the snapshot's expiring record applied (its revert)
	History      []Update  // an Imports plan's whole history, oldest first; its last entry is Entry
	Replace      bool      // an Imports plan replaces the slave read, with its history and expiring record
	// ImportedAt is when an Imports plan was decided: its expiring record,
	// even one long past due, stays pending from then on for as long as
	// one that just fell due (ExpiringKeptFrom), so that the next expiry
	// run applies it.
	ImportedAt int64
	// Join and Leave say that the slave enters or leaves the
	// decommissioning set; either moves the set's time to SetAt,
	// conditioned on the snapshot's LimitAt.
	Join, Leave bool
	// SetAt is the decommissioning set's time after a Join or Leave: the
	// entry's time, which follows the set's last change, or for an
	// Imports plan, whose entries keep their own times, the time the
	// import was decided, after the set's last change too.
	SetAt int64
	Limit int // > 0: a Join is refused when Limit slaves already count
}

// ExpiringKeptFrom is the time from which the plan's expiring record is
// kept pending for the stores' retention, until the expiry applies it: its
// due time, or when it was imported if that is later.
func (p *Plan) ExpiringKeptFrom() int64 {
	return max(p.PutExpiring.DueAt(), p.ImportedAt)
}

// followLimit marks whether the plan's entry enters or leaves the
// decommissioning set, and times one that does after the set's last change
// (AfterLimitChange): the set orders those changes, whatever the clocks
// of the instances that decided them say.
func (p *Plan) followLimit(snap Snapshot) {
	was := snap.Slave != nil && snap.Slave.Current.State.CountsTowardLimit()
	counts := p.Entry.State.CountsTowardLimit()
	p.Join, p.Leave = counts && !was, was && !counts
	if p.Join || p.Leave {
		p.Entry.Timestamp = AfterLimitChange(p.Entry.Timestamp, snap.LimitAt)
		p.Slave.Current.Timestamp = p.Entry.Timestamp
		p.SetAt = p.Entry.Timestamp
	}
}

// dropExpiring is the plan that deletes the snapshot's expiring record and
// nothing else.
func dropExpiring(snap Snapshot) *Plan {
	plan := &Plan{Kind: DropsExpiring, DropExpiring: true}
	if snap.Slave != nil {
		plan.Slave = *snap.Slave
	}
	return plan
}

// Decide computes the plan for a snapshot; a nil plan means nothing to write.
type Decide func(Snapshot) (*Plan, error)

// NewActionID returns a random UUID version 4.
func NewActionID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Idempotency identifies a change request so that a retry of it is answered
// with the first request's outcome instead of being applied again. A key
// names one change request of one caller, whatever slave and action it is
// for (docs/behaviour.md "User changes"): stores keep one receipt per
// (Caller, Key), never one per slave.
type Idempotency struct {
	// Key is the client's Idempotency-Key header; "" when it sent none (the
	// adapter then still guards its own retries of the write). A request's
	// actionId is never a key: clients of the old API reuse one actionId for
	// related changes, such as a freeze and the activate that ends it.
	Key string
	// Caller is the identity id of the caller, the scope of Key: another
	// caller's same key is another request, never answered with this one's
	// outcome.
	Caller string
	// Fingerprint is the request in canonical form: a key reused for a
	// different request is refused rather than answered with another's result.
	Fingerprint string
	At          int64 // epoch ms of the request
}

// IdempotencyWindow is how long a change request's outcome is remembered.
const IdempotencyWindow = 10 * time.Minute

// ReusedKey is the refusal of an idempotency key already used, within the
// window, for a different request.
func ReusedKey(key string) error {
	return fault.Conflict("Idempotency key %s was already used for a different request", key)
}

// ValidateID returns an error unless id can name a slave: what an agent id
// can be (non-empty, at most 256 bytes, no '/', NUL, tab or line break) and
// not starting with '#', which the store reserves for its own items
// (docs/tables.md).
func ValidateID(id string) error {
	switch {
	case id == "":
		return errors.New("machine has no id")
	case len(id) > 256, strings.HasPrefix(id, "#"), strings.ContainsAny(id, "/\x00\n\r\t"):
		return fmt.Errorf("machine id %q is not valid", id)
	}
	return nil
}
