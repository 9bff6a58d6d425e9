package machine

import (
	"bytes"
	"maps"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

// Import is one slave as the old API describes it, brought into this
// service (docs/behaviour.md "Import"): its record, its whole history and
// its pending expiring change.
type Import struct {
	// Slave is the record. Its Current must be the last entry of History;
	// DescribedAt and Sequence are this service's own and are not imported.
	Slave   Slave
	History []Update // oldest first
	// Expiring is the slave's pending expiring change; nil when it has none.
	Expiring *Expiring
}

// ImportOptions are the choices of one import request.
type ImportOptions struct {
	// Replace replaces a stored slave whose record, history or expiring
	// change differs (mode=replace); without it such a slave is a conflict
	// and left alone.
	Replace bool
	// OverrideLimit lets a slave imported into STARTING_DECOMMISSION or
	// DECOMMISSIONING join the decommissioning set however many slaves it
	// holds (overrideLimit=true).
	OverrideLimit bool
}

// ImportResult is what an import did with one slave.
type ImportResult string

// The results of one imported slave.
const (
	Imported   ImportResult = "imported"  // written, with its history and expiring change
	Unchanged  ImportResult = "unchanged" // stored already exactly so: nothing written
	Conflicted ImportResult = "conflict"  // stored otherwise, and left alone
	Refused    ImportResult = "refused"   // not a slave this service can hold, or over the decommission limit
)

// MaxImportHistory bounds the history of one imported slave: the most
// entries a history read answers (?limit=10000), so that what is imported
// can be read back whole.
const MaxImportHistory = 10_000

// ImportConflict is the refusal to import a slave that is stored with
// another record, history or expiring change.
func ImportConflict(id string) error {
	return fault.Conflict("Slave %s exists with another record, history or expiring change; import it with mode=replace to replace it", id)
}

// Validate returns fault.Invalid, with the reason, unless imp is a slave
// this service can hold: a valid id (ValidateID); a history of 1 to
// MaxImportHistory entries of that slave, each in a known state with a
// timestamp, oldest first (no entry earlier than the one before it), whose
// last entry is the current state; a description within MaxDescription and
// no negative running-task count; and an expiring change of that slave
// that the rules of a change request allow for the current state
// (ValidateExpiring), with an actionId, a start and a request that agrees
// with the record on its revert state and its killTasksOnDecommissionTimeout.
// A history may hold any state, those this service never writes itself
// included.
func (imp Import) Validate(maxExpiring time.Duration) error {
	s := imp.Slave
	if err := ValidateID(s.ID); err != nil {
		return fault.Invalid("%s", err.Error())
	}
	n := len(imp.History)
	switch {
	case n == 0:
		return fault.Invalid("slave %s has no history: its history holds at least its current state", s.ID)
	case n > MaxImportHistory:
		return fault.Invalid("slave %s has %d history entries, at most %d may be imported", s.ID, n, MaxImportHistory)
	}
	for i, u := range imp.History {
		switch {
		case u.SlaveID != s.ID:
			return fault.Invalid("history entry %d of slave %s names slave %q", i, s.ID, u.SlaveID)
		case !u.State.Valid():
			return fault.Invalid("history entry %d of slave %s has state %q, not one of %s", i, s.ID, u.State, Names())
		case u.Timestamp <= 0:
			return fault.Invalid("history entry %d of slave %s has no timestamp", i, s.ID)
		case i > 0 && u.Timestamp < imp.History[i-1].Timestamp:
			return fault.Invalid("history entry %d of slave %s (at %d) is earlier than the entry before it (at %d): history must be oldest first",
				i, s.ID, u.Timestamp, imp.History[i-1].Timestamp)
		}
	}
	if s.Current != imp.History[n-1] {
		return fault.Invalid("the current state of slave %s is not its last history entry", s.ID)
	}
	o := Observation{ID: s.ID, Host: s.Host, RackID: s.RackID, Attributes: s.Attributes, Resources: s.Resources}
	if err := o.CheckSize(); err != nil {
		return fault.Invalid("%s", err.Error())
	}
	if s.RunningTasks != nil && *s.RunningTasks < 0 {
		return fault.Invalid("slave %s has a negative runningTasks", s.ID)
	}
	if e := imp.Expiring; e != nil {
		return validateImportedExpiring(s.ID, s.Current.State, *e, maxExpiring)
	}
	return nil
}

// validateImportedExpiring checks a slave's imported expiring change as a
// change request that made it from state current would be checked.
func validateImportedExpiring(id string, current State, e Expiring, maxExpiring time.Duration) error {
	req := e.Request
	switch {
	case e.MachineID != id:
		return fault.Invalid("the expiring change of slave %s names machine %q", id, e.MachineID)
	case !e.RevertTo.Valid():
		return fault.Invalid("the expiring change of slave %s has revertToState %q, not one of %s", id, e.RevertTo, Names())
	case e.ActionID == "":
		return fault.Invalid("the expiring change of slave %s has no actionId", id)
	case e.StartMillis <= 0:
		return fault.Invalid("the expiring change of slave %s has no startMillis", id)
	case req.DurationMillis == nil:
		return fault.Invalid("the expiring change of slave %s has no durationMillis in its expiringAPIRequestObject", id)
	case req.RevertToState != nil && *req.RevertToState != e.RevertTo,
		req.KillTasksOnDecommissionTimeout != e.KillTasksOnDecommissionTimeout:
		return fault.Invalid("the expiring change of slave %s and its expiringAPIRequestObject disagree", id)
	}
	req.RevertToState = &e.RevertTo
	if err := ValidateExpiring(current, req, false, maxExpiring); err != nil {
		return fault.Invalid("the expiring change of slave %s: %s", id, fault.Message(err))
	}
	return nil
}

// normalized is imp as it is stored: attributes never nil, the rack
// DefaultRack when none is named, resources compacted, a running-task
// count only while the slave drains (as a report stores it), no
// description time (no report has described it) and no sequence (the
// store sets it).
func (imp Import) normalized() Import {
	s := imp.Slave
	if s.Attributes == nil {
		s.Attributes = map[string]string{}
	}
	if s.RackID == "" {
		s.RackID = DefaultRack
	}
	if len(s.Resources) > 0 {
		s.Resources = compact(s.Resources)
	} else {
		s.Resources = nil
	}
	if !s.Current.State.Draining() {
		s.RunningTasks = nil
	}
	s.DescribedAt, s.Sequence = 0, 0
	imp.Slave = s
	return imp
}

// storedAs reports whether snap, read with its history, holds imp already:
// the same record, the same history and the same expiring change.
func (imp Import) storedAs(snap Snapshot) bool {
	s, was := imp.Slave, *snap.Slave
	if s.FirstSeenAt != was.FirstSeenAt || s.Current != was.Current || s.Host != was.Host || s.RackID != was.RackID ||
		!maps.Equal(s.Attributes, was.Attributes) || !bytes.Equal(compact(s.Resources), compact(was.Resources)) ||
		!sameCount(s.RunningTasks, was.RunningTasks) || len(imp.History) != len(snap.History) {
		return false
	}
	for i, u := range imp.History {
		if u != snap.History[i] {
			return false
		}
	}
	return sameExpiring(imp.Expiring, snap.Expiring)
}

func sameExpiring(a, b *Expiring) bool {
	if a == nil || b == nil {
		return a == b
	}
	ra, rb := a.Request, b.Request
	sameState := func(x, y *State) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	sameMillis := func(x, y *int64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.MachineID == b.MachineID && a.User == b.User && a.StartMillis == b.StartMillis && a.ActionID == b.ActionID &&
		a.RevertTo == b.RevertTo && a.KillTasksOnDecommissionTimeout == b.KillTasksOnDecommissionTimeout &&
		ra.Message == rb.Message && ra.ActionID == rb.ActionID && ra.KillTasksOnDecommissionTimeout == rb.KillTasksOnDecommissionTimeout &&
		sameState(ra.RevertToState, rb.RevertToState) && sameMillis(ra.DurationMillis, rb.DurationMillis)
}

// ImportSlave decides the import of imp (docs/behaviour.md "Import") on a
// snapshot read with the slave's stored history (Snapshot.History), and
// stores what it decided in result. A slave that is not stored is
// imported. One stored exactly so is unchanged: nothing to write. One
// stored otherwise is a conflict (ImportConflict), unless opts.Replace,
// which replaces it whole: its record, its history and its expiring
// change. An invalid imp is refused (Validate).
//
// The imported entries keep their own times. A slave imported into
// STARTING_DECOMMISSION or DECOMMISSIONING joins the decommissioning set
// (one replaced out of those states leaves it) at the time now reads,
// after the set's last change (AfterLimitChange); a join is held to
// limits.MaxDecommissioning unless opts.OverrideLimit.
func ImportSlave(imp Import, opts ImportOptions, limits Limits, now func() int64, result *ImportResult) Decide {
	return func(snap Snapshot) (*Plan, error) {
		if err := imp.Validate(limits.MaxExpiring); err != nil {
			*result = Refused
			return nil, err
		}
		imp := imp.normalized()
		if snap.Slave != nil {
			if imp.storedAs(snap) {
				*result = Unchanged
				return nil, nil
			}
			if !opts.Replace {
				*result = Conflicted
				return nil, ImportConflict(imp.Slave.ID)
			}
		}
		*result = Imported
		entry := imp.History[len(imp.History)-1]
		at := now()
		plan := &Plan{
			ImportedAt:   at,
			Kind:         Imports,
			Slave:        imp.Slave,
			Entry:        &entry,
			History:      imp.History,
			Describe:     true, // the whole slave is written
			Tasks:        true,
			Replace:      snap.Slave != nil,
			PutExpiring:  imp.Expiring,
			DropExpiring: snap.Expiring != nil,
		}
		was := snap.Slave != nil && snap.Slave.Current.State.CountsTowardLimit()
		counts := entry.State.CountsTowardLimit()
		plan.Join, plan.Leave = counts && !was, was && !counts
		if plan.Join || plan.Leave {
			plan.SetAt = AfterLimitChange(at, snap.LimitAt)
		}
		if plan.Join && !opts.OverrideLimit {
			plan.Limit = limits.MaxDecommissioning
		}
		return plan, nil
	}
}
