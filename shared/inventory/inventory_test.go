package inventory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"
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

func TestAReportLogsItsSummaryWithTheInvocationsRequestIDAndCountsAColdStart(t *testing.T) {
	var out bytes.Buffer // stdout: the log lines and the metrics documents, as in Lambda
	h := inventory.New(newFleet(), lambdalog.New(&out, func(string) string { return "" }))
	h.Metrics, _ = metrics.New(&out, "Fleet", "fleet-InventoryFunction-1")
	for _, id := range []string{"req-inv-1", "req-inv-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
		if _, err := h.Handle(ctx, json.RawMessage(`{"machines":[{"id":"S5","host":"a"},{"id":""}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	var summaries, warnings []string
	coldStarts := 0
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		id, _ := line["requestId"].(string)
		switch {
		case line["message"] == "machine report applied":
			summaries = append(summaries, id)
			if line["machines"] != 2.0 || line["invalid"] != 1.0 || line["backend_calls"] != 0.0 {
				t.Errorf("got %s, want 2 machines, 1 invalid, 0 backend calls (the store is in memory)", l)
			}
		case line["message"] == "skipped machine in report":
			warnings = append(warnings, id)
		case line[metrics.ColdStarts] != nil:
			coldStarts++
		}
	}
	if want := []string{"req-inv-1", "req-inv-2"}; !slices.Equal(summaries, want) || !slices.Equal(warnings, want) {
		t.Errorf("got summaries of %v and warnings of %v, want one of each per invocation %v", summaries, warnings, want)
	}
	if coldStarts != 1 {
		t.Errorf("got %d cold starts, want 1", coldStarts)
	}
}
