package machine

// Outcome is what the expiry trigger did with one due record.
type Outcome string

// The outcomes of one due record (docs/behaviour.md "Expiring changes"). Every
// outcome but Superseded and Deferred deletes the record.
const (
	Applied    Outcome = "applied"    // the slave was reverted
	Skipped    Outcome = "skipped"    // the revert was illegal or the slave already at its state
	Dropped    Outcome = "dropped"    // the slave is gone
	Superseded Outcome = "superseded" // the record was already handled, or replaced by one not yet due
	Deferred   Outcome = "deferred"   // the decommission limit is full: the record waits for the next run
)

// Due is an expiring record whose time has come: the slave it reverts and
// when it fell due (epoch ms).
type Due struct {
	SlaveID string
	At      int64
}

// ExpiryMessage is the message of a revert's history entry.
const ExpiryMessage = "Updated due to expiring action"

// Expire decides the revert of slave id's expiring record at now
// (docs/behaviour.md "Expiring changes") and stores what it decided in outcome.
// The record is only acted on while it is due in the snapshot, so a record
// already applied by a concurrent trigger, deleted by a user, or replaced by a
// newer one is left alone: the adapter's write is conditioned on the record
// read, which makes every record apply at most once. A revert into
// STARTING_DECOMMISSION honours the decommission limit like a user's
// decommission does.
//
// now reads the clock (epoch ms) when the revert is decided, as for a user
// change.
func Expire(id string, now func() int64, limits Limits, outcome *Outcome) Decide {
	return func(snap Snapshot) (*Plan, error) {
		at := now()
		e := snap.Expiring
		switch {
		case e == nil || !e.Due(at):
			*outcome = Superseded
			return nil, nil
		case snap.Slave == nil:
			*outcome = Dropped
			return dropExpiring(snap), nil
		case CheckTransition(id, snap.Slave.Current.State, e.RevertTo) != nil:
			*outcome = Skipped
			return dropExpiring(snap), nil
		}
		*outcome = Applied
		plan := transition(snap, Update{SlaveID: id, State: e.RevertTo, Timestamp: at, User: e.User, Message: ExpiryMessage})
		plan.DropExpiring, plan.Reverts = true, true
		if e.RevertTo == StartingDecommission {
			plan.Limit = limits.MaxDecommissioning
		}
		return plan, nil
	}
}
