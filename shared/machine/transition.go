package machine

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

// CheckTransition returns fault.Conflict when a slave in current may not be
// moved to target by a user or an expiring revert (docs/behaviour.md "User changes"). The messages
// name the requested state, as clients of the old API expect.
func CheckTransition(id string, current, target State) error {
	switch {
	case current == target:
		return fault.Conflict("FAILURE_ALREADY_AT_STATE - Slave %s is in %s state", id, target)
	case target == Frozen && current.IsDecommissioning(),
		target == StartingDecommission && current.IsDecommissioning():
		return fault.Conflict("FAILURE_ILLEGAL_TRANSITION - Slave %s is in %s state", id, target)
	}
	return nil
}

// ClearsExpiring reports whether moving to next makes an expiring record that
// reverts to revert pointless, so that it is deleted with the change
// (docs/behaviour.md "Expiring changes").
func ClearsExpiring(revert, next State) bool {
	switch {
	case next == revert, next.IsInactive():
		return true
	case revert == StartingDecommission, revert == Frozen:
		return next.IsDecommissioning()
	case revert == Decommissioning, revert == Decommissioned:
		return next == Frozen || next == Active
	}
	return false
}

// Limits are the configured bounds on user changes.
type Limits struct {
	MaxDecommissioning int           // slaves in STARTING_DECOMMISSION or DECOMMISSIONING at once; 0 means no limit
	MaxExpiring        time.Duration // longest durationMillis accepted
}

// ErrOverLimit is in the chain of every refusal by the decommission limit,
// so that the expiry trigger can tell a revert waiting for a slot from any
// other refusal.
var ErrOverLimit = errors.New("over the decommission limit")

// LimitError is the refusal of a decommission over the limit: n slaves
// already count toward max. It is fault.Invalid and ErrOverLimit.
func LimitError(n, max int) error {
	return fmt.Errorf("%w: %w", ErrOverLimit, fault.Invalid("%d slaves are already decommissioning state (%d allowed at once). Allow these slaves to finish before decommissioning another", n, max))
}

// MaxClockSkew bounds how far ahead of one instance's clock another's may be.
const MaxClockSkew = time.Minute

// AfterLimitChange returns the time of a change decided at at that enters or
// leaves the decommissioning states, when the last change that did so took
// effect at lastAt (0 when none has). Those changes are ordered by the
// store's decommissioning set, so their times follow the order in which they
// took effect even across instances whose clocks differ. A lastAt more than
// MaxClockSkew ahead is not followed: it would push every later change into
// the future.
func AfterLimitChange(at, lastAt int64) int64 {
	if lastAt >= at+MaxClockSkew.Milliseconds() {
		return at
	}
	return max(at, lastAt+1)
}

// Change is a user's request to move a slave to Target.
type Change struct {
	SlaveID string
	Target  State
	Request ChangeRequest
	User    string // acting user's email, "" when none
	// Now reads the clock (epoch ms). It is read when the change is
	// decided, again on every attempt after a lost race, so that the
	// entry's time is the time the change took effect.
	Now func() int64
}

// UserChange decides a freeze, decommission or activate, in the check order
// of docs/behaviour.md "User changes": expiring-request validation, slave exists, transition legal.
// The decommission limit is enforced by the adapter from Plan.Limit.
func UserChange(c Change, limits Limits) Decide {
	return func(snap Snapshot) (*Plan, error) {
		if c.Request.DurationMillis != nil {
			if err := ValidateExpiring(c.Target, c.Request, snap.Expiring != nil, limits.MaxExpiring); err != nil {
				return nil, err
			}
		}
		if snap.Slave == nil {
			return nil, NotFound(c.SlaveID)
		}
		if err := CheckTransition(c.SlaveID, snap.Slave.Current.State, c.Target); err != nil {
			return nil, err
		}
		// The expiring record starts when the change was decided, before
		// the decommissioning set's order may move the entry on (followLimit).
		decided := max(c.Now(), snap.Slave.Current.Timestamp)
		plan := transition(snap, Update{SlaveID: c.SlaveID, State: c.Target, Timestamp: decided, User: c.User, Message: c.Request.Message})
		if c.Target == StartingDecommission {
			plan.Limit = limits.MaxDecommissioning
		}
		if c.Request.DurationMillis != nil {
			req := c.Request
			actionID := req.ActionID
			if actionID == "" {
				actionID = NewActionID()
			}
			plan.PutExpiring = &Expiring{
				MachineID:                      c.SlaveID,
				User:                           c.User,
				StartMillis:                    decided,
				ActionID:                       actionID,
				RevertTo:                       *req.RevertToState,
				KillTasksOnDecommissionTimeout: req.KillTasksOnDecommissionTimeout,
				Request:                        req, // as received
			}
		}
		return plan, nil
	}
}

// transition returns the plan that moves snap's slave to entry's state, with the
// expiring cleanup of docs/behaviour.md "Expiring changes". The entry is never
// older than the one it follows: clocks of concurrent instances differ, and
// "newest first" must mean the same by position and by time.
//
// A state that does not drain clears the running-task count (Slave.RunningTasks),
// whatever count was read: a report's refresh of the description does not
// move the slave's version, so it may store a count between this change's
// read and its write, and only an unconditional clear leaves none behind.
func transition(snap Snapshot, entry Update) *Plan {
	slave := *snap.Slave
	entry.Timestamp = max(entry.Timestamp, slave.Current.Timestamp)
	slave.Current = entry
	drains := entry.State.Draining()
	if !drains {
		slave.RunningTasks = nil
	}
	plan := &Plan{
		Kind:         Transitions,
		Slave:        slave,
		Entry:        &entry,
		Tasks:        !drains,
		DropExpiring: snap.Expiring != nil && ClearsExpiring(snap.Expiring.RevertTo, entry.State),
	}
	plan.followLimit(snap)
	return plan
}

// ValidateExpiring checks an expiring change request in the order of
// docs/behaviour.md "Expiring changes" for an action whose state is target.
// exists says whether the slave already has an expiring record. It returns
// fault.Invalid or fault.Conflict.
func ValidateExpiring(target State, req ChangeRequest, exists bool, max time.Duration) error {
	if req.RevertToState == nil {
		return fault.Invalid("Must include a machine state to revert to for an expiring machine state change")
	}
	if exists {
		return fault.Conflict("A current expiring object already exists, delete it first")
	}
	revert := *req.RevertToState
	switch {
	case revert == StartingDecommission && target.IsDecommissioning():
		return fault.Invalid("Cannot revert to %s from a decommissioning state", revert)
	case (revert == Decommissioning || revert == Decommissioned) && (target == Frozen || target == Active):
		return fault.Invalid("Cannot revert to %s from %s: a machine must be decommissioned to get there", revert, target)
	case revert == Frozen && target.IsDecommissioning():
		return fault.Invalid("Cannot revert to %s from a decommissioning state", revert)
	case revert == Dead || revert == MissingOnStartup || revert == Decommissioning:
		return fault.Invalid("Cannot revert to %s: that state is set only by the system", revert)
	case revert == Decommissioned && !req.KillTasksOnDecommissionTimeout:
		return fault.Invalid("Must set killTasksOnDecommissionTimeout to revert to %s", revert)
	}
	if d := *req.DurationMillis; d <= 0 || d > max.Milliseconds() {
		return fault.Invalid("durationMillis must be between 1 and %d (MAX_EXPIRING_DURATION), got %d", max.Milliseconds(), d)
	}
	return nil
}

// NotFound is the answer to a read or change of an unknown slave.
func NotFound(id string) error {
	return fault.NotFound("Couldn't find an active Slave with id %s (result: FAILURE_NOT_FOUND)", id)
}

// NotFoundForDelete is the answer to deleting an unknown slave, worded as
// the old API words it.
func NotFoundForDelete(id string) error {
	return fault.NotFound("Couldn't find dead Slave with id %s", id)
}

// DeleteExpiring decides the deletion of a slave's expiring record: the
// record read, if there is one, and nothing else.
func DeleteExpiring(snap Snapshot) (*Plan, error) {
	if snap.Expiring == nil {
		return nil, nil
	}
	return dropExpiring(snap), nil
}

// Conditional is decide made only while the slave is at sequence, the
// position of its latest change as the caller saw it (If-Match): a slave
// that moved since is refused with fault.PreconditionFailed, which says
// where it is now, and nothing is written. An unknown slave is decide's to
// answer.
func Conditional(id string, sequence int64, decide Decide) Decide {
	return func(snap Snapshot) (*Plan, error) {
		if s := snap.Slave; s != nil && s.Sequence != sequence {
			return nil, Moved(id, sequence, *s)
		}
		return decide(snap)
	}
}

// Moved is the refusal of a change conditioned on a sequence the slave has
// moved past.
func Moved(id string, sequence int64, now Slave) error {
	return fault.PreconditionFailed(fault.Now{Sequence: now.Sequence, State: string(now.Current.State)},
		"Slave %s moved since sequence %d: it is at sequence %d, in state %s", id, sequence, now.Sequence, now.Current.State)
}
