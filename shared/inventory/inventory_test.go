package inventory_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
)

func handle(t *testing.T, f *fleet, report string) inventory.Result {
	t.Helper()
	res, err := inventory.New(f, slog.New(slog.NewTextHandler(io.Discard, nil))).Handle(context.Background(), json.RawMessage(report))
	if err != nil {
		t.Fatalf("report %s: %v", report, err)
	}
	return res
}

func TestAMachineNamedTwiceTakesItsLaterEntryOnce(t *testing.T) {
	f := newFleet()
	report := `{"machines":[{"id":"S5","host":"a"},{"id":"S5","host":"b","lost":true}]}`
	start := f.snapshot()
	res := handle(t, f, report)
	if res.Invalid != 1 {
		t.Errorf("got %d invalid entries, want 1 (the earlier duplicate)", res.Invalid)
	}
	after := f.snapshot()
	if got := after.Slaves["S5"]; got.Current.State != machine.Dead || len(after.History["S5"]) != len(start.History["S5"])+1 {
		t.Fatalf("got %s with %d entries, want DEAD (the later entry) with one new entry", got.Current.State, len(after.History["S5"]))
	}
	handle(t, f, report)
	handle(t, f, report)
	if diff := changes(after, f.snapshot()); len(diff) > 0 {
		t.Errorf("the same report again changed %v, want nothing", diff)
	}
}

func TestACompleteReportNeverTakesAnUnreadableEntryForAbsent(t *testing.T) {
	f := newFleet()
	machines := []string{`{"id":"S5","host":"h","resources":[1]}`} // FROZEN, badly described
	for id := range f.snapshot().Slaves {
		if id != "S5" {
			machines = append(machines, `{"id":"`+id+`","host":"h"}`)
		}
	}
	res := handle(t, f, `{"complete":true,"machines":[`+strings.Join(machines, ",")+`]}`)
	if res.Invalid != 1 || res.Absent != 0 {
		t.Errorf("got %d invalid and %d absent, want 1 and 0", res.Invalid, res.Absent)
	}
	if got := f.snapshot().Slaves["S5"].Current.State; got != machine.Frozen {
		t.Errorf("got S5 in %s, want it left FROZEN", got)
	}
}
