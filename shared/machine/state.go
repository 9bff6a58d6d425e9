// Package machine owns the business of worker machines ("slaves"): their
// states, which transitions users and the system may make, expiring changes
// and their cleanup. It decides; the storage adapter applies a decision
// atomically. Standard library only.
package machine

import (
	"strings"

	"github.com/fleetops/fleet/shared/fault"
)

// State is a machine state. The declaration order of States is the order
// used in messages.
type State string

const (
	MissingOnStartup     State = "MISSING_ON_STARTUP"
	Active               State = "ACTIVE"
	StartingDecommission State = "STARTING_DECOMMISSION"
	Decommissioning      State = "DECOMMISSIONING"
	Decommissioned       State = "DECOMMISSIONED"
	Dead                 State = "DEAD"
	Frozen               State = "FROZEN"
)

// States lists every state in declaration order.
var States = []State{MissingOnStartup, Active, StartingDecommission, Decommissioning, Decommissioned, Dead, Frozen}

// Valid reports whether s is one of States, spelled exactly.
func (s State) Valid() bool {
	switch s {
	case MissingOnStartup, Active, StartingDecommission, Decommissioning, Decommissioned, Dead, Frozen:
		return true
	}
	return false
}

// IsDecommissioning reports whether s is one of the decommissioning states.
func (s State) IsDecommissioning() bool {
	return s == StartingDecommission || s == Decommissioning || s == Decommissioned
}

// IsInactive reports whether the machine is gone from the scheduler's view.
func (s State) IsInactive() bool { return s == Dead || s == MissingOnStartup }

// CountsTowardLimit reports whether s occupies one of the
// MAX_DECOMMISSIONING_SLAVES places.
func (s State) CountsTowardLimit() bool { return s == StartingDecommission || s == Decommissioning }

// Draining reports whether a slave in s is being emptied of its tasks
// (STARTING_DECOMMISSION or DECOMMISSIONING): the only states in which its
// reported running-task count is stored.
func (s State) Draining() bool { return s == StartingDecommission || s == Decommissioning }

// ParseQuery reads the lenient `state` query parameter: surrounding space
// dropped, '-' and '.' read as '_', case ignored. It returns fault.Invalid
// naming every state when q matches none.
func ParseQuery(q string) (State, error) {
	s := State(strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(strings.TrimSpace(q))))
	if !s.Valid() {
		return "", fault.Invalid("query param state must be one of %s", Names())
	}
	return s, nil
}

// Names lists every state for messages: "[MISSING_ON_STARTUP, ACTIVE, ...]".
func Names() string {
	names := make([]string, len(States))
	for i, st := range States {
		names[i] = string(st)
	}
	return "[" + strings.Join(names, ", ") + "]"
}
