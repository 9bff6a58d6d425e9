package machine

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

const slaveID = "20261121-051400-16777343-5050-1234-S3"

const (
	msgNoRevert      = "Must include a machine state to revert to for an expiring machine state change"
	msgExpiringExist = "A current expiring object already exists, delete it first"
)

// maxExpiring is the default MAX_EXPIRING_DURATION.
const maxExpiring = 30 * 24 * time.Hour

var maxMillis = maxExpiring.Milliseconds()

var testLimits = Limits{MaxDecommissioning: 2, MaxExpiring: maxExpiring}

// action is one of the user actions of docs/behaviour.md and the state it targets.
type action struct {
	name   string
	target State
}

var actions = []action{{"freeze", Frozen}, {"decommission", StartingDecommission}, {"activate", Active}}

func TestCheckTransitionFollowsTheWholeSpecMatrix(t *testing.T) {
	type outcome string
	const (
		ok      outcome = "ok"
		already outcome = "409 already"
		illegal outcome = "409 illegal"
	)
	// docs/behaviour.md "User changes", copied literally: columns freeze, decommission, activate.
	matrix := map[State][3]outcome{
		Active:               {ok, ok, already},
		Frozen:               {already, ok, ok},
		StartingDecommission: {illegal, already, ok},
		Decommissioning:      {illegal, illegal, ok},
		Decommissioned:       {illegal, illegal, ok},
		Dead:                 {ok, ok, ok},
		MissingOnStartup:     {ok, ok, ok},
	}
	if len(matrix) != len(States) {
		t.Fatalf("matrix has %d rows, want one per state (%d)", len(matrix), len(States))
	}
	for _, current := range States {
		for i, a := range actions {
			want := matrix[current][i]
			t.Run(fmt.Sprintf("%s from %s is %s", a.name, current, want), func(t *testing.T) {
				err := CheckTransition(slaveID, current, a.target)
				switch want {
				case ok:
					if err != nil {
						t.Fatalf("got %v, want no error", err)
					}
				case already:
					wantFault(t, err, fault.KindConflict, "FAILURE_ALREADY_AT_STATE - Slave "+slaveID+" is in "+string(a.target)+" state")
				case illegal:
					wantFault(t, err, fault.KindConflict, "FAILURE_ILLEGAL_TRANSITION - Slave "+slaveID+" is in "+string(a.target)+" state")
				}
			})
		}
	}
}

// call is one ValidateExpiring invocation.
type call struct {
	target   State
	revert   *State
	kill     bool
	duration int64
	exists   bool
}

func (c call) run() error {
	req := ChangeRequest{DurationMillis: new(c.duration), RevertToState: c.revert, KillTasksOnDecommissionTimeout: c.kill}
	return ValidateExpiring(c.target, req, c.exists, maxExpiring)
}

func TestValidateExpiringChecksTheSpecRulesInOrder(t *testing.T) {
	const minute = int64(60_000)
	tests := []struct {
		name string
		call call
		ok   bool
		kind fault.Kind
		msg  string // exact message when the contract fixes one
		// sameAs breaks only the rule that must win; its error must be the one returned.
		sameAs *call
		// notAs breaks only the rule that must lose; its error must not be the one returned.
		notAs *call
	}{
		// Rule 1.
		{name: "a missing revertToState is a 400", call: call{target: Frozen, duration: minute},
			kind: fault.KindInvalid, msg: msgNoRevert},
		{name: "a missing revertToState wins over an existing record", call: call{target: Frozen, duration: minute, exists: true},
			kind: fault.KindInvalid, msg: msgNoRevert},
		{name: "a missing revertToState wins over a zero duration", call: call{target: StartingDecommission, duration: 0},
			kind: fault.KindInvalid, msg: msgNoRevert},
		// Rule 2.
		{name: "an existing expiring record is a 409", call: call{target: Frozen, revert: new(Active), duration: minute, exists: true},
			kind: fault.KindConflict, msg: msgExpiringExist},
		{name: "an existing record wins over reverting to STARTING_DECOMMISSION from decommission", call: call{target: StartingDecommission, revert: new(StartingDecommission), duration: minute, exists: true},
			kind: fault.KindConflict, msg: msgExpiringExist},
		{name: "an existing record wins over a system-only revert state", call: call{target: Frozen, revert: new(Dead), duration: minute, exists: true},
			kind: fault.KindConflict, msg: msgExpiringExist},
		{name: "an existing record wins over a negative duration", call: call{target: Active, revert: new(Frozen), duration: -1, exists: true},
			kind: fault.KindConflict, msg: msgExpiringExist},
		// Rule 3.
		{name: "reverting to STARTING_DECOMMISSION from decommission is a 400", call: call{target: StartingDecommission, revert: new(StartingDecommission), duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to STARTING_DECOMMISSION from decommission wins over a zero duration", call: call{target: StartingDecommission, revert: new(StartingDecommission), duration: 0},
			kind: fault.KindInvalid, sameAs: &call{target: StartingDecommission, revert: new(StartingDecommission), duration: minute}},
		// Rule 4.
		{name: "reverting to DECOMMISSIONED from freeze is a 400 even with killTasks", call: call{target: Frozen, revert: new(Decommissioned), kill: true, duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to DECOMMISSIONED from activate is a 400 even with killTasks", call: call{target: Active, revert: new(Decommissioned), kill: true, duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to DECOMMISSIONING from freeze is a 400", call: call{target: Frozen, revert: new(Decommissioning), duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to DECOMMISSIONING from activate is a 400", call: call{target: Active, revert: new(Decommissioning), duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to DECOMMISSIONING from freeze gets the rule 4 error, not the system-only one", call: call{target: Frozen, revert: new(Decommissioning), duration: minute},
			kind: fault.KindInvalid, notAs: &call{target: StartingDecommission, revert: new(Decommissioning), duration: minute}},
		{name: "reverting to DECOMMISSIONED from activate without killTasks gets the rule 4 error, not the killTasks one", call: call{target: Active, revert: new(Decommissioned), duration: minute},
			kind: fault.KindInvalid, sameAs: &call{target: Active, revert: new(Decommissioned), kill: true, duration: minute}},
		{name: "reverting to DECOMMISSIONED from freeze wins over a too long duration", call: call{target: Frozen, revert: new(Decommissioned), kill: true, duration: maxMillis + 1},
			kind: fault.KindInvalid, sameAs: &call{target: Frozen, revert: new(Decommissioned), kill: true, duration: minute}},
		// Rule 5.
		{name: "reverting to FROZEN from decommission is a 400", call: call{target: StartingDecommission, revert: new(Frozen), duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to FROZEN from decommission wins over a too long duration", call: call{target: StartingDecommission, revert: new(Frozen), duration: maxMillis + 1},
			kind: fault.KindInvalid, sameAs: &call{target: StartingDecommission, revert: new(Frozen), duration: minute}},
		// Rule 6.
		{name: "reverting to DEAD from freeze is a 400", call: call{target: Frozen, revert: new(Dead), duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to DEAD from decommission is a 400", call: call{target: StartingDecommission, revert: new(Dead), duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to DEAD from activate is a 400", call: call{target: Active, revert: new(Dead), duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to MISSING_ON_STARTUP from freeze is a 400", call: call{target: Frozen, revert: new(MissingOnStartup), duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to MISSING_ON_STARTUP from decommission is a 400", call: call{target: StartingDecommission, revert: new(MissingOnStartup), duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to MISSING_ON_STARTUP from activate is a 400", call: call{target: Active, revert: new(MissingOnStartup), duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to DECOMMISSIONING from decommission is a 400 even with killTasks", call: call{target: StartingDecommission, revert: new(Decommissioning), kill: true, duration: minute}, kind: fault.KindInvalid},
		{name: "reverting to DEAD wins over a zero duration", call: call{target: Active, revert: new(Dead), duration: 0},
			kind: fault.KindInvalid, sameAs: &call{target: Active, revert: new(Dead), duration: minute}},
		// Rule 7.
		{name: "reverting to DECOMMISSIONED from decommission without killTasks is a 400", call: call{target: StartingDecommission, revert: new(Decommissioned), duration: minute},
			kind: fault.KindInvalid},
		{name: "reverting to DECOMMISSIONED without killTasks wins over a negative duration", call: call{target: StartingDecommission, revert: new(Decommissioned), duration: -5},
			kind: fault.KindInvalid, sameAs: &call{target: StartingDecommission, revert: new(Decommissioned), duration: minute}},
		// Rule 8.
		{name: "a zero duration is a 400", call: call{target: Frozen, revert: new(Active), duration: 0}, kind: fault.KindInvalid},
		{name: "a negative duration is a 400", call: call{target: Frozen, revert: new(Active), duration: -minute}, kind: fault.KindInvalid},
		{name: "a duration one ms over MAX_EXPIRING_DURATION is a 400", call: call{target: Active, revert: new(Frozen), duration: maxMillis + 1}, kind: fault.KindInvalid},
		{name: "a duration far over MAX_EXPIRING_DURATION is a 400", call: call{target: StartingDecommission, revert: new(Active), duration: 1 << 62}, kind: fault.KindInvalid},
		// Valid requests.
		{name: "a duration of exactly MAX_EXPIRING_DURATION passes", call: call{target: Frozen, revert: new(Active), duration: maxMillis}, ok: true},
		{name: "a duration of one ms passes", call: call{target: Frozen, revert: new(Active), duration: 1}, ok: true},
		{name: "freeze reverting to ACTIVE passes", call: call{target: Frozen, revert: new(Active), duration: minute}, ok: true},
		{name: "decommission reverting to ACTIVE passes", call: call{target: StartingDecommission, revert: new(Active), duration: minute}, ok: true},
		{name: "decommission reverting to DECOMMISSIONED with killTasks passes", call: call{target: StartingDecommission, revert: new(Decommissioned), kill: true, duration: minute}, ok: true},
		{name: "activate reverting to FROZEN passes", call: call{target: Active, revert: new(Frozen), duration: minute}, ok: true},
		{name: "activate reverting to STARTING_DECOMMISSION passes", call: call{target: Active, revert: new(StartingDecommission), duration: minute}, ok: true},
		{name: "freeze reverting to STARTING_DECOMMISSION passes", call: call{target: Frozen, revert: new(StartingDecommission), duration: minute}, ok: true},
		{name: "killTasks with a non-decommissioned revert passes", call: call{target: Frozen, revert: new(Active), kill: true, duration: minute}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call.run()
			if tt.ok {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			wantFault(t, err, tt.kind, tt.msg)
			if tt.sameAs != nil {
				want := tt.sameAs.run()
				if want == nil {
					t.Fatalf("the request breaking only the earlier rule passed; the test case is wrong")
				}
				if fault.KindOf(err) != fault.KindOf(want) || fault.Message(err) != fault.Message(want) {
					t.Errorf("got %q, want the earlier rule's error %q", fault.Message(err), fault.Message(want))
				}
			}
			if tt.notAs != nil {
				later := tt.notAs.run()
				if later == nil {
					t.Fatalf("the request breaking only the later rule passed; the test case is wrong")
				}
				if fault.Message(err) == fault.Message(later) {
					t.Errorf("got the later rule's error %q, want the earlier rule's", fault.Message(err))
				}
			}
		})
	}
}

func TestValidateExpiringAcceptsExactlyTheRevertStatesTheSpecAllows(t *testing.T) {
	// Rules 3–7 of docs/behaviour.md "Expiring changes" worked out by hand for each action: the revert
	// states that pass without and with killTasksOnDecommissionTimeout.
	allowed := map[State]map[bool][]State{
		Frozen:               {false: {Active, StartingDecommission, Frozen}, true: {Active, StartingDecommission, Frozen}},
		StartingDecommission: {false: {Active}, true: {Active, Decommissioned}},
		Active:               {false: {Active, StartingDecommission, Frozen}, true: {Active, StartingDecommission, Frozen}},
	}
	for _, a := range actions {
		for _, kill := range []bool{false, true} {
			for _, revert := range States {
				want := slices.Contains(allowed[a.target][kill], revert)
				t.Run(fmt.Sprintf("%s reverting to %s with killTasks %v passes: %v", a.name, revert, kill, want), func(t *testing.T) {
					err := call{target: a.target, revert: new(revert), kill: kill, duration: 60_000}.run()
					if want && err != nil {
						t.Fatalf("got %v, want no error", err)
					}
					if !want {
						wantFault(t, err, fault.KindInvalid, "")
					}
				})
			}
		}
	}
}

func TestClearsExpiringFollowsTheSpecCleanupRule(t *testing.T) {
	// docs/behaviour.md "Expiring changes" cleanup, worked out by hand: rows are the record's revert
	// state R, columns the new state N in declaration order; x deletes.
	//                            MOS ACT STD DNG DED DEA FRZ
	table := map[State]string{
		MissingOnStartup:     " x   .   .   .   .   x   . ",
		Active:               " x   x   .   .   .   x   . ",
		StartingDecommission: " x   .   x   x   x   x   . ",
		Decommissioning:      " x   x   .   x   .   x   x ",
		Decommissioned:       " x   x   .   .   x   x   x ",
		Dead:                 " x   .   .   .   .   x   . ",
		Frozen:               " x   .   x   x   x   x   x ",
	}
	if len(table) != len(States) {
		t.Fatalf("table has %d rows, want %d", len(table), len(States))
	}
	for _, revert := range States {
		cells := strings.Fields(table[revert])
		if len(cells) != len(States) {
			t.Fatalf("row %s has %d cells, want %d", revert, len(cells), len(States))
		}
		for i, next := range States {
			want := cells[i] == "x"
			t.Run(fmt.Sprintf("a record reverting to %s moved to %s is deleted: %v", revert, next, want), func(t *testing.T) {
				if got := ClearsExpiring(revert, next); got != want {
					t.Errorf("ClearsExpiring(%s, %s): got %v, want %v", revert, next, got, want)
				}
			})
		}
	}
}

// someSlave returns a fully described slave in state with a history entry
// made by a user.
func someSlave(state State) *Slave {
	return &Slave{
		ID:          slaveID,
		FirstSeenAt: 1_600_000_000_000,
		Current:     Update{SlaveID: slaveID, State: state, Timestamp: 1_650_000_000_000, User: "earlier@example.com", Message: "earlier change"},
		Host:        "node-1.example.com",
		RackID:      "us-east-1a",
		Attributes:  map[string]string{"instance_type": "m5.4xlarge"},
		Resources:   json.RawMessage(`{"cpus":16,"mem":63000}`),
	}
}

func someExpiring(revert State) *Expiring {
	return &Expiring{MachineID: slaveID, User: "earlier@example.com", StartMillis: 1_650_000_000_000, ActionID: "old-action",
		RevertTo: revert, Request: ChangeRequest{DurationMillis: new(int64(3_600_000)), RevertToState: new(revert)}}
}

func TestUserChangeAnswersInTheSpecCheckOrder(t *testing.T) {
	notFound := "Couldn't find an active Slave with id " + slaveID + " (result: FAILURE_NOT_FOUND)"
	tests := []struct {
		name   string
		target State
		req    ChangeRequest
		snap   Snapshot
		kind   fault.Kind
		msg    string
	}{
		{name: "an unknown slave is a 404", target: Frozen,
			snap: Snapshot{}, kind: fault.KindNotFound, msg: notFound},
		{name: "an unknown slave is a 404 even with a stray expiring record and no duration", target: Frozen,
			snap: Snapshot{Expiring: someExpiring(Active)}, kind: fault.KindNotFound, msg: notFound},
		{name: "a missing revertToState wins over an unknown slave", target: Frozen,
			req: ChangeRequest{DurationMillis: new(int64(60_000))}, snap: Snapshot{}, kind: fault.KindInvalid, msg: msgNoRevert},
		{name: "an existing expiring record wins over an unknown slave", target: Frozen,
			req:  ChangeRequest{DurationMillis: new(int64(60_000)), RevertToState: new(Active)},
			snap: Snapshot{Expiring: someExpiring(Active)}, kind: fault.KindConflict, msg: msgExpiringExist},
		{name: "a zero duration wins over an unknown slave", target: Active,
			req: ChangeRequest{DurationMillis: new(int64(0)), RevertToState: new(Frozen)}, snap: Snapshot{}, kind: fault.KindInvalid},
		{name: "an expiring validation error wins over a transition conflict", target: Active,
			req: ChangeRequest{DurationMillis: new(int64(60_000))}, snap: Snapshot{Slave: someSlave(Active)}, kind: fault.KindInvalid, msg: msgNoRevert},
		{name: "an existing expiring record wins over a transition conflict", target: Frozen,
			req:  ChangeRequest{DurationMillis: new(int64(60_000)), RevertToState: new(Active)},
			snap: Snapshot{Slave: someSlave(Frozen), Expiring: someExpiring(Active)}, kind: fault.KindConflict, msg: msgExpiringExist},
		{name: "an already-at-state change of a known slave is a 409", target: Frozen,
			snap: Snapshot{Slave: someSlave(Frozen)}, kind: fault.KindConflict, msg: "FAILURE_ALREADY_AT_STATE - Slave " + slaveID + " is in FROZEN state"},
		{name: "an illegal change of a known slave is a 409", target: StartingDecommission,
			snap: Snapshot{Slave: someSlave(Decommissioned)}, kind: fault.KindConflict, msg: "FAILURE_ILLEGAL_TRANSITION - Slave " + slaveID + " is in STARTING_DECOMMISSION state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Change{SlaveID: slaveID, Target: tt.target, Request: tt.req, User: "ops@example.com", Now: clockAt(1_700_000_000_000)}
			plan, err := UserChange(c, testLimits)(tt.snap)
			if plan != nil {
				t.Errorf("plan: got %+v, want nil", plan)
			}
			wantFault(t, err, tt.kind, tt.msg)
		})
	}
}

func TestUserChangePlansTheSpecWrite(t *testing.T) {
	const now = int64(1_700_000_000_000)
	tests := []struct {
		name      string
		from      State
		target    State
		user      string
		message   string
		expiring  *Expiring // the snapshot's record
		wantDrop  bool
		wantLimit int
	}{
		{name: "freeze of an active slave", from: Active, target: Frozen, user: "ops@example.com", message: "kernel patch"},
		{name: "decommission of an active slave carries the limit", from: Active, target: StartingDecommission, user: "ops@example.com", message: "retire", wantLimit: 2},
		{name: "activate of a frozen slave", from: Frozen, target: Active, user: "ops@example.com"},
		{name: "decommission of a frozen slave carries the limit", from: Frozen, target: StartingDecommission, wantLimit: 2},
		{name: "activate of a decommissioned slave", from: Decommissioned, target: Active, message: "back in service"},
		{name: "freeze of a dead slave", from: Dead, target: Frozen, user: "ops@example.com"},
		{name: "decommission of a slave missing on startup", from: MissingOnStartup, target: StartingDecommission, wantLimit: 2},
		{name: "an anonymous change writes no user", from: Active, target: Frozen, user: "", message: "anonymous"},
		{name: "activate deletes a record reverting to ACTIVE", from: Frozen, target: Active, expiring: someExpiring(Active), wantDrop: true},
		{name: "activate deletes a record reverting to DECOMMISSIONED", from: Decommissioned, target: Active, expiring: someExpiring(Decommissioned), wantDrop: true},
		{name: "decommission deletes a record reverting to FROZEN", from: Active, target: StartingDecommission, expiring: someExpiring(Frozen), wantDrop: true, wantLimit: 2},
		{name: "decommission deletes a record reverting to STARTING_DECOMMISSION", from: Frozen, target: StartingDecommission, expiring: someExpiring(StartingDecommission), wantDrop: true, wantLimit: 2},
		{name: "freeze deletes a record reverting to DECOMMISSIONING", from: Active, target: Frozen, expiring: someExpiring(Decommissioning), wantDrop: true},
		{name: "freeze keeps a record reverting to ACTIVE", from: Active, target: Frozen, expiring: someExpiring(Active)},
		{name: "decommission keeps a record reverting to ACTIVE", from: Frozen, target: StartingDecommission, expiring: someExpiring(Active), wantLimit: 2},
		{name: "activate keeps a record reverting to FROZEN", from: StartingDecommission, target: Active, expiring: someExpiring(Frozen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := someSlave(tt.from)
			snap := Snapshot{Slave: before, Expiring: tt.expiring}
			c := Change{SlaveID: slaveID, Target: tt.target, Request: ChangeRequest{Message: tt.message}, User: tt.user, Now: clockAt(now)}
			plan, err := UserChange(c, testLimits)(snap)
			if err != nil {
				t.Fatalf("got %v, want a plan", err)
			}
			if plan == nil {
				t.Fatal("got a nil plan, want one")
			}
			wantEntry := Update{SlaveID: slaveID, State: tt.target, Timestamp: now, User: tt.user, Message: tt.message}
			wantSlave := *someSlave(tt.from)
			wantSlave.Current = wantEntry
			if !reflect.DeepEqual(plan.Slave, wantSlave) {
				t.Errorf("slave: got %+v, want %+v", plan.Slave, wantSlave)
			}
			if plan.Entry == nil || *plan.Entry != wantEntry {
				t.Errorf("history entry: got %+v, want %+v", plan.Entry, wantEntry)
			}
			if plan.PutExpiring != nil {
				t.Errorf("expiring record: got %+v, want none without durationMillis", plan.PutExpiring)
			}
			if plan.DropExpiring != tt.wantDrop {
				t.Errorf("DropExpiring: got %v, want %v", plan.DropExpiring, tt.wantDrop)
			}
			if plan.Limit != tt.wantLimit {
				t.Errorf("Limit: got %d, want %d", plan.Limit, tt.wantLimit)
			}
			if !reflect.DeepEqual(before, someSlave(tt.from)) {
				t.Errorf("snapshot slave was modified: got %+v", before)
			}
		})
	}
}

func TestUserChangeWithDurationStoresTheExpiringRecord(t *testing.T) {
	const now = int64(1_700_000_000_000)
	tests := []struct {
		name     string
		target   State
		revert   State
		kill     bool
		actionID string
		limit    int
	}{
		{name: "freeze reverting to ACTIVE with a generated actionId", target: Frozen, revert: Active},
		{name: "decommission reverting to DECOMMISSIONED with killTasks and the caller's actionId", target: StartingDecommission, revert: Decommissioned, kill: true, actionID: "change-42", limit: 2},
		{name: "activate reverting to FROZEN with the caller's actionId", target: Active, revert: Frozen, actionID: "3f1c9e1e-0000-4000-8000-000000000001"},
	}
	from := map[State]State{Frozen: Active, StartingDecommission: Active, Active: Frozen}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := ChangeRequest{Message: "for a while", DurationMillis: new(int64(3_600_000)), RevertToState: new(tt.revert),
				ActionID: tt.actionID, KillTasksOnDecommissionTimeout: tt.kill}
			c := Change{SlaveID: slaveID, Target: tt.target, Request: req, User: "ops@example.com", Now: clockAt(now)}
			plan, err := UserChange(c, testLimits)(Snapshot{Slave: someSlave(from[tt.target])})
			if err != nil {
				t.Fatalf("got %v, want a plan", err)
			}
			got := plan.PutExpiring
			if got == nil {
				t.Fatal("expiring record: got none, want one")
			}
			if tt.actionID == "" && !uuidV4.MatchString(got.ActionID) {
				t.Errorf("actionId: got %q, want a generated UUID v4", got.ActionID)
			}
			if tt.actionID != "" && got.ActionID != tt.actionID {
				t.Errorf("actionId: got %q, want the caller's %q", got.ActionID, tt.actionID)
			}
			want := Expiring{MachineID: slaveID, User: "ops@example.com", StartMillis: now, ActionID: got.ActionID,
				RevertTo: tt.revert, KillTasksOnDecommissionTimeout: tt.kill, Request: got.Request}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("expiring record: got %+v, want %+v", *got, want)
			}
			r := got.Request
			if r.Message != req.Message || r.DurationMillis == nil || *r.DurationMillis != *req.DurationMillis ||
				r.RevertToState == nil || *r.RevertToState != tt.revert || r.KillTasksOnDecommissionTimeout != tt.kill {
				t.Errorf("request kept in the record: got %+v, want the request as received %+v", r, req)
			}
			if tt.actionID != "" && r.ActionID != tt.actionID {
				t.Errorf("request actionId: got %q, want %q", r.ActionID, tt.actionID)
			}
			if plan.DropExpiring {
				t.Error("DropExpiring: got true, want false with no record in the snapshot")
			}
			if plan.Limit != tt.limit {
				t.Errorf("Limit: got %d, want %d", plan.Limit, tt.limit)
			}
			wantEntry := Update{SlaveID: slaveID, State: tt.target, Timestamp: now, User: "ops@example.com", Message: "for a while"}
			if plan.Entry == nil || *plan.Entry != wantEntry || plan.Slave.Current != wantEntry {
				t.Errorf("history entry: got %+v and current %+v, want %+v", plan.Entry, plan.Slave.Current, wantEntry)
			}
		})
	}
}

func TestUserChangeKeepsTheRequestAsReceivedInTheRecord(t *testing.T) {
	// openapi.yaml, SchedulerExpiringMachineState: expiringAPIRequestObject is "the request as received"; a
	// request without actionId has none, the generated id belongs to the record.
	req := ChangeRequest{DurationMillis: new(int64(60_000)), RevertToState: new(Active)}
	c := Change{SlaveID: slaveID, Target: Frozen, Request: req, Now: clockAt(1_700_000_000_000)}
	plan, err := UserChange(c, testLimits)(Snapshot{Slave: someSlave(Active)})
	if err != nil {
		t.Fatalf("got %v, want a plan", err)
	}
	if got := plan.PutExpiring.Request.ActionID; got != "" {
		t.Errorf("got request actionId %q, want none: the generated id belongs to the record only", got)
	}
}

func TestUserChangeGeneratesADistinctActionIDEachTime(t *testing.T) {
	c := Change{SlaveID: slaveID, Target: Frozen, Request: ChangeRequest{DurationMillis: new(int64(60_000)), RevertToState: new(Active)}, Now: clockAt(1)}
	decide := UserChange(c, testLimits)
	first, err1 := decide(Snapshot{Slave: someSlave(Active)})
	second, err2 := decide(Snapshot{Slave: someSlave(Active)})
	if err1 != nil || err2 != nil {
		t.Fatalf("got %v and %v, want plans", err1, err2)
	}
	if first.PutExpiring.ActionID == second.PutExpiring.ActionID {
		t.Errorf("actionId: got %q twice, want a fresh one per decision", first.PutExpiring.ActionID)
	}
}

func TestUserChangeLeavesTheDescriptionUntouched(t *testing.T) {
	before := someSlave(Active)
	plan, err := UserChange(Change{SlaveID: slaveID, Target: Frozen, Now: clockAt(2)}, testLimits)(Snapshot{Slave: before})
	if err != nil {
		t.Fatalf("got %v, want a plan", err)
	}
	s := plan.Slave
	if s.ID != before.ID || s.FirstSeenAt != before.FirstSeenAt || s.Host != before.Host || s.RackID != before.RackID ||
		!maps.Equal(s.Attributes, before.Attributes) || string(s.Resources) != string(before.Resources) {
		t.Errorf("got %+v, want the description of %+v", s, before)
	}
}

func TestUserChangeOutOfTheDrainingStatesClearsTheRunningTaskCount(t *testing.T) {
	for _, from := range []State{StartingDecommission, Decommissioning} {
		t.Run("activate from "+string(from), func(t *testing.T) {
			before := someSlave(from)
			before.RunningTasks = new(3)
			plan, err := UserChange(Change{SlaveID: slaveID, Target: Active, Now: clockAt(2)}, testLimits)(Snapshot{Slave: before})
			if err != nil {
				t.Fatalf("got %v, want a plan", err)
			}
			if plan.Slave.RunningTasks != nil {
				t.Errorf("running tasks: got %d, want none", *plan.Slave.RunningTasks)
			}
			if *before.RunningTasks != 3 {
				t.Errorf("the snapshot's count: got %d, want it untouched (3)", *before.RunningTasks)
			}
		})
	}
}

func TestAfterLimitChangeFollowsTheLastLimitChangeUnlessItIsBeyondAnyClock(t *testing.T) {
	const at = int64(1_000_000)
	skew := MaxClockSkew.Milliseconds()
	tests := []struct {
		name   string
		lastAt int64
		want   int64
	}{
		{"no change entered or left the states yet", 0, at},
		{"a last change before this one leaves its time", at - 5, at},
		{"a last change at the same time comes first", at, at + 1},
		{"a last change ahead of this clock comes first", at + 30_000, at + 30_001},
		{"a last change just within the skew is followed", at + skew - 1, at + skew},
		{"a last change as far ahead as the skew is not followed", at + skew, at},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AfterLimitChange(at, tt.lastAt); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
