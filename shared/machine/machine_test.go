package machine

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/fault"
)

// uuidV4 is the canonical text form of a random (version 4, RFC 4122 variant) UUID.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// wantFault fails unless err is a fault of kind with message msg; an empty
// msg accepts any non-empty message.
func wantFault(t *testing.T, err error, kind fault.Kind, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %v %q", kind, msg)
	}
	if got := fault.KindOf(err); got != kind {
		t.Errorf("kind: got %v, want %v (error %q)", got, kind, err)
	}
	got := fault.Message(err)
	switch {
	case msg == "" && got == "":
		t.Errorf("message: got empty, want a reason")
	case msg != "" && got != msg:
		t.Errorf("message: got %q, want %q", got, msg)
	}
}

func TestExpiringIsDueOnlyStrictlyAfterItsDuration(t *testing.T) {
	const start, duration = int64(1_700_000_000_000), int64(60_000)
	tests := []struct {
		name string
		now  int64
		want bool
	}{
		{"at the start it is not due", start, false},
		{"one ms before the duration has passed it is not due", start + duration - 1, false},
		{"exactly when the duration has passed it is not due", start + duration, false},
		{"one ms after the duration has passed it is due", start + duration + 1, true},
		{"long after it is due", start + 10*duration, true},
		{"a clock before the start is not due", start - 1, false},
	}
	e := Expiring{MachineID: "S1", StartMillis: start, ActionID: "a", RevertTo: Active,
		Request: ChangeRequest{DurationMillis: new(duration), RevertToState: new(Active)}}
	if got := e.DueAt(); got != start+duration {
		t.Errorf("DueAt(): got %d, want %d", got, start+duration)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.Due(tt.now); got != tt.want {
				t.Errorf("Due(start%+d): got %v, want %v", tt.now-start, got, tt.want)
			}
		})
	}
}

func TestNewActionIDIsARandomUUIDv4(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		id := NewActionID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("NewActionID(): got %q, want a lower-case UUID v4", id)
		}
		if seen[id] {
			t.Fatalf("NewActionID(): got %q twice, want distinct ids", id)
		}
		seen[id] = true
	}
}

func TestValidateIDAcceptsWhatAnAgentIDCanBe(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"node-1", true}, {"nöde-1", true}, {"a b", true}, {"..", true}, {"a%2Fb", true},
		{strings.Repeat("x", 256), true},
		{"", false}, {"#decommissioning", false}, {"a/b", false}, {"a\x00b", false}, {"a\nb", false},
		{"a\rb", false}, {"a\tb", false}, {strings.Repeat("x", 257), false},
	}
	for _, tt := range tests {
		if err := ValidateID(tt.id); (err == nil) != tt.want {
			t.Errorf("ValidateID(%q): got %v, want valid %v", tt.id, err, tt.want)
		}
	}
}
