package machine_test

import (
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/machine"
)

func TestDescriptionsOverTheBoundCannotBeStored(t *testing.T) {
	frame := len("host") + len("rack") + len(`{}`) + len("note") + 4
	for _, tt := range []struct {
		name  string
		note  int // bytes of the one attribute's value
		tiny  int // attributes of a 4-byte name and no value
		valid bool
	}{
		{"a description of exactly the bound is kept", machine.MaxDescription - frame, 0, true},
		{"one byte more is too large", machine.MaxDescription - frame + 1, 0, false},
		{"450 KB of attributes are too large", 450_000, 0, false},
		{"many tiny attributes count their framing", 0, machine.MaxDescription / 5, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := machine.Observation{ID: "S1", Host: "host", RackID: "rack", Resources: []byte(`{}`),
				Attributes: map[string]string{"note": strings.Repeat("x", tt.note)}}
			for i := range tt.tiny {
				o.Attributes[string(rune(0x10000+i))] = ""
			}
			err := o.CheckSize()
			if (err == nil) != tt.valid {
				t.Errorf("got %v for %d bytes, want valid=%v", err, o.DescriptionSize(), tt.valid)
			}
			if err != nil && !strings.Contains(err.Error(), "S1") {
				t.Errorf("got %q, want the machine named", err)
			}
		})
	}
}
