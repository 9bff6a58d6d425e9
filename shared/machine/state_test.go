package machine

import (
	"testing"

	"github.com/fleetops/fleet/shared/fault"
)

// statesMessage is the 400 message of docs/behaviour.md for an unknown state query.
const statesMessage = "query param state must be one of [MISSING_ON_STARTUP, ACTIVE, STARTING_DECOMMISSION, DECOMMISSIONING, DECOMMISSIONED, DEAD, FROZEN]"

func TestStatesFollowTheDeclarationOrderOfTheSpec(t *testing.T) {
	want := []State{"MISSING_ON_STARTUP", "ACTIVE", "STARTING_DECOMMISSION", "DECOMMISSIONING", "DECOMMISSIONED", "DEAD", "FROZEN"}
	if len(States) != len(want) {
		t.Fatalf("got %d states, want %d", len(States), len(want))
	}
	for i := range want {
		if States[i] != want[i] {
			t.Errorf("States[%d]: got %s, want %s", i, States[i], want[i])
		}
	}
	if got, wantNames := Names(), statesMessage[len("query param state must be one of "):]; got != wantNames {
		t.Errorf("Names(): got %q, want %q", got, wantNames)
	}
}

func TestStatePredicatesMatchTheSpecTable(t *testing.T) {
	// docs/behaviour.md "Machine states", copied literally.
	tests := []struct {
		state                     State
		decommissioning, inactive bool
	}{
		{MissingOnStartup, false, true},
		{Active, false, false},
		{StartingDecommission, true, false},
		{Decommissioning, true, false},
		{Decommissioned, true, false},
		{Dead, false, true},
		{Frozen, false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			if !tt.state.Valid() {
				t.Errorf("Valid(): got false, want true")
			}
			if got := tt.state.IsDecommissioning(); got != tt.decommissioning {
				t.Errorf("IsDecommissioning(): got %v, want %v", got, tt.decommissioning)
			}
			if got := tt.state.IsInactive(); got != tt.inactive {
				t.Errorf("IsInactive(): got %v, want %v", got, tt.inactive)
			}
			wantLimit := tt.state == StartingDecommission || tt.state == Decommissioning
			if got := tt.state.CountsTowardLimit(); got != wantLimit {
				t.Errorf("CountsTowardLimit(): got %v, want %v", got, wantLimit)
			}
		})
	}
}

func TestValidAcceptsOnlyTheExactUpperCaseSpelling(t *testing.T) {
	for _, s := range []State{"frozen", "Active", " ACTIVE", "STARTING-DECOMMISSION", "", "UNKNOWN"} {
		t.Run("rejects "+string(s), func(t *testing.T) {
			if s.Valid() {
				t.Errorf("State(%q).Valid(): got true, want false", s)
			}
		})
	}
}

func TestParseQueryIsLenient(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  State // "" means a 400
	}{
		{"lower case is accepted", "frozen", Frozen},
		{"upper case is accepted", "ACTIVE", Active},
		{"surrounding space, dashes and mixed case are accepted", " Starting-Decommission ", StartingDecommission},
		{"tabs and newlines around are dropped", "\tdecommissioned\n", Decommissioned},
		{"dots read as underscores", "missing.on.startup", MissingOnStartup},
		{"dashes and dots may be mixed", "Missing-On.Startup", MissingOnStartup},
		{"underscores are kept", "starting_decommission", StartingDecommission},
		{"every state in lower case", "dead", Dead},
		{"a trailing dot reads as a trailing underscore and matches nothing", "decommissioning.", ""},
		{"a trailing dash matches nothing", "frozen-", ""},
		{"inner space is not an underscore", "starting decommission", ""},
		{"an unknown word matches nothing", "bogus", ""},
		{"a state with extra letters matches nothing", "activated", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseQuery(tt.query)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseQuery(%q): got %s, want a 400", tt.query, got)
				}
				if k := fault.KindOf(err); k != fault.KindInvalid {
					t.Errorf("ParseQuery(%q) kind: got %v, want %v", tt.query, k, fault.KindInvalid)
				}
				if m := fault.Message(err); m != statesMessage {
					t.Errorf("ParseQuery(%q) message: got %q, want %q", tt.query, m, statesMessage)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseQuery(%q): got error %v, want %s", tt.query, err, tt.want)
			}
			if got != tt.want {
				t.Errorf("ParseQuery(%q): got %s, want %s", tt.query, got, tt.want)
			}
		})
	}
}

func TestParseQueryAcceptsEveryStateSpelledExactly(t *testing.T) {
	for _, s := range States {
		t.Run(string(s), func(t *testing.T) {
			got, err := ParseQuery(string(s))
			if err != nil || got != s {
				t.Errorf("ParseQuery(%q): got (%s, %v), want (%s, nil)", s, got, err, s)
			}
		})
	}
}
