package inventory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/metrics"
)

func handle(t *testing.T, f *memstore.Store, report string) inventory.Result {
	t.Helper()
	res, err := inventory.New(f, machine.DefaultLossBrake, slog.New(slog.NewTextHandler(io.Discard, nil)), nil).Handle(context.Background(), json.RawMessage(report))
	if err != nil {
		t.Fatalf("report %s: %v", report, err)
	}
	return res
}

func TestAMachineNamedTwiceTakesItsLaterEntryOnce(t *testing.T) {
	f := newFleet()
	report := `{"machines":[{"id":"S5","host":"a"},{"id":"S5","host":"b","lost":true}]}`
	start := contents(t, f)
	res := handle(t, f, report)
	if res.Invalid != 1 {
		t.Errorf("got %d invalid entries, want 1 (the earlier duplicate)", res.Invalid)
	}
	after := contents(t, f)
	if got := after.Slaves["S5"]; got.Current.State != machine.Dead || len(after.History["S5"]) != len(start.History["S5"])+1 {
		t.Fatalf("got %s with %d entries, want DEAD (the later entry) with one new entry", got.Current.State, len(after.History["S5"]))
	}
	handle(t, f, report)
	handle(t, f, report)
	if diff := changes(after, contents(t, f)); len(diff) > 0 {
		t.Errorf("the same report again changed %v, want nothing", diff)
	}
}

func TestACompleteReportNeverTakesAnUnreadableEntryForAbsent(t *testing.T) {
	f := newFleet()
	machines := []string{`{"id":"S5","host":"h","resources":[1]}`} // FROZEN, badly described
	for id := range contents(t, f).Slaves {
		if id != "S5" {
			machines = append(machines, `{"id":"`+id+`","host":"h"}`)
		}
	}
	res := handle(t, f, `{"complete":true,"machines":[`+strings.Join(machines, ",")+`]}`)
	if res.Invalid != 1 || res.Absent != 0 {
		t.Errorf("got %d invalid and %d absent, want 1 and 0", res.Invalid, res.Absent)
	}
	if got := contents(t, f).Slaves["S5"].Current.State; got != machine.Frozen {
		t.Errorf("got S5 in %s, want it left FROZEN", got)
	}
}

func TestANegativeRunningTaskCountIsAnInvalidEntryAndChangesNothing(t *testing.T) {
	f := newFleet()
	before := contents(t, f)
	res := handle(t, f, `{"machines":[{"id":"S5","host":"elsewhere","runningTasks":-2}]}`)
	if res.Invalid != 1 {
		t.Errorf("got %d invalid entries, want 1", res.Invalid)
	}
	if diff := changes(before, contents(t, f)); len(diff) > 0 {
		t.Errorf("got %v changed, want nothing", diff)
	}
}

func TestAReportLogsItsSummaryWithTheInvocationsRequestIDAndCountsAColdStart(t *testing.T) {
	var out bytes.Buffer // stdout: the log lines and the metrics documents, as in Lambda
	m, _ := metrics.New(&out, "Fleet", "fleet-InventoryFunction-1")
	h := inventory.New(newFleet(), machine.DefaultLossBrake, lambdalog.New(&out, func(string) string { return "" }), m)
	for _, id := range []string{"req-inv-1", "req-inv-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
		if _, err := h.Handle(ctx, json.RawMessage(`{"machines":[{"id":"S5","host":"a"},{"id":"S6","resources":[1]}]}`)); err != nil {
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

func TestAReportThatIsNotOneIsRefusedWholeAndChangesNothing(t *testing.T) {
	reports := map[string]string{
		"no machines key, complete":     `{"complete":true}`,
		"machines null":                 `{"complete":true,"machines":null}`,
		"machines not a list":           `{"machines":{"S1":{}}}`,
		"an entry without an id":        `{"complete":true,"machines":[{"id":"S1","host":"h"},{"host":"ghost"}]}`,
		"an entry with an empty id":     `{"machines":[{"id":"S1","lost":true},{"id":""}]}`,
		"an entry whose id is a number": `{"machines":[{"id":"S1","lost":true},{"id":7}]}`,
		"an entry that is not object":   `{"machines":[{"id":"S1","lost":true},null]}`,
		"an API Gateway event":          `{"httpMethod":"GET","path":"/api/slaves","headers":{},"requestContext":{}}`,
		"machines in another case":      `{"complete":true,"MACHINES":[{"id":"S1"}]}`,
	}
	for name, report := range reports {
		t.Run(name, func(t *testing.T) {
			f := newFleet()
			before := contents(t, f)
			_, err := inventory.New(f, machine.DefaultLossBrake, slog.New(slog.NewTextHandler(io.Discard, nil)), nil).
				Handle(context.Background(), json.RawMessage(report))
			if err == nil {
				t.Errorf("got no error, want the report refused")
			}
			if diff := changes(before, contents(t, f)); len(diff) > 0 {
				t.Errorf("got %v changed, want nothing", diff)
			}
		})
	}
}

// event wraps a report detail in an EventBridge event made at time.
func event(at time.Time, detail string) string {
	return `{"detail-type":"Machine Report","time":"` + at.UTC().Format(time.RFC3339) + `","detail":` + detail + `}`
}

func TestReportFieldsMatchOnlyTheirExactNames(t *testing.T) {
	f := newFleet()
	before := contents(t, f)
	res := handle(t, f, `{"Complete":true,"machines":[{"id":"S5","LOST":true,"Lost":true,"host":"node.example.com","rackId":"us-east-1a","resources":{"cpus":16}}]}`)
	if res.Absent != 0 {
		t.Errorf("got %d absent, want none: Complete is not complete", res.Absent)
	}
	if diff := changes(before, contents(t, f)); len(diff) > 0 {
		t.Errorf("got %v changed, want nothing: LOST and Lost are not lost", diff)
	}
}

func TestAReportFromTheFutureIsStampedWhenItIsReceived(t *testing.T) {
	f := newFleet()
	h := inventory.New(f, machine.DefaultLossBrake, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	received := time.Now()
	if _, err := h.Handle(context.Background(), json.RawMessage(event(received.Add(24*time.Hour), `{"machines":[{"id":"S6","host":"h"}]}`))); err != nil {
		t.Fatal(err)
	}
	up := contents(t, f).Slaves["S6"].Current
	if up.State != machine.Active || up.Timestamp > time.Now().UnixMilli() {
		t.Fatalf("got %s at %d, want ACTIVE stamped no later than its receipt (%d)", up.State, up.Timestamp, received.UnixMilli())
	}
	// A report made a moment later, with a true clock, still applies.
	if _, err := h.Handle(context.Background(), json.RawMessage(event(time.Now().Add(time.Second), `{"machines":[{"id":"S6","lost":true}]}`))); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, f).Slaves["S6"].Current.State; got != machine.Dead {
		t.Errorf("got %s after a later lost report, want DEAD", got)
	}
}

// fleetOf adds n ACTIVE slaves L0..L<n-1> to f.
func fleetOf(f *memstore.Store, n int) []string {
	var ids []string
	for i := range n {
		id := fmt.Sprintf("L%d", i)
		u := machine.Update{SlaveID: id, State: machine.Active, Timestamp: 1_763_702_040_000}
		f.Put(machine.Slave{ID: id, FirstSeenAt: u.Timestamp, Current: u, Host: id, RackID: "r", Attributes: map[string]string{}})
		ids = append(ids, id)
	}
	return ids
}

func lostEntries(ids []string) string {
	var parts []string
	for _, id := range ids {
		parts = append(parts, `{"id":"`+id+`","lost":true}`)
	}
	return strings.Join(parts, ",")
}

func TestTheMassLossBrake(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dead := func(t *testing.T, f *memstore.Store) int {
		n := 0
		for _, s := range contents(t, f).Slaves {
			if s.Current.State == machine.Dead {
				n++
			}
		}
		return n
	}
	t.Run("a complete report naming no machine marks none DEAD and says so", func(t *testing.T) {
		f := newFleet()
		fleetOf(f, 20)
		before := dead(t, f)
		var out bytes.Buffer
		m, _ := metrics.New(&out, "Fleet", "fleet-InventoryFunction-1")
		h := inventory.New(f, machine.DefaultLossBrake, quiet, m)
		res, err := h.Handle(context.Background(), json.RawMessage(`{"complete":true,"machines":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := dead(t, f); got != before || res.Held != res.Absent || res.Held < 20 {
			t.Errorf("got %d DEAD (was %d) and %+v, want none more, every absence held", got, before, res)
		}
		if !strings.Contains(out.String(), `"`+metrics.LossesHeld+`":`) {
			t.Errorf("got metrics %s, want a %s value", out.String(), metrics.LossesHeld)
		}
	})
	t.Run("confirmLoss applies the loss", func(t *testing.T) {
		f := newFleet()
		ids := fleetOf(f, 20)
		res, err := inventory.New(f, machine.DefaultLossBrake, quiet, nil).
			Handle(context.Background(), json.RawMessage(`{"confirmLoss":true,"machines":[`+lostEntries(ids[:10])+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Held != 0 || contents(t, f).Slaves[ids[0]].Current.State != machine.Dead {
			t.Errorf("got %+v, %s, want the 10 losses applied", res, contents(t, f).Slaves[ids[0]].Current.State)
		}
	})
	t.Run("a loss under the fraction is applied, and the window adds up the next reports", func(t *testing.T) {
		f := newFleet()
		ids := fleetOf(f, 24) // 28 live with the sample slaves: 20% is 5.6
		h := inventory.New(f, machine.DefaultLossBrake, quiet, nil)
		now := time.Now()
		res, err := h.Handle(context.Background(), json.RawMessage(event(now, `{"machines":[`+lostEntries(ids[:4])+`]}`)))
		if err != nil || res.Held != 0 {
			t.Fatalf("got %+v, %v, want 4 of 28 applied", res, err)
		}
		res, err = h.Handle(context.Background(), json.RawMessage(event(now.Add(2*time.Second), `{"machines":[`+lostEntries(ids[4:6])+`]}`)))
		if err != nil || res.Held != 2 {
			t.Fatalf("got %+v, %v, want the next 2 held: 6 of 28 within the window", res, err)
		}
		if got := contents(t, f).Slaves[ids[4]].Current.State; got != machine.Active {
			t.Errorf("got %s, want ACTIVE while held", got)
		}
	})
	t.Run("a small fleet is not braked", func(t *testing.T) {
		f := newFleet() // 5 live slaves
		res, err := inventory.New(f, machine.DefaultLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(`{"complete":true,"machines":[]}`))
		if err != nil || res.Held != 0 || res.Absent == 0 {
			t.Errorf("got %+v, %v, want every absence applied", res, err)
		}
	})
}

// applyCounter counts the machines a store is asked to apply one at a time, and
// those it is asked to create together.
type applyCounter struct {
	*memstore.Store
	alone, together atomic.Int64
}

func (c *applyCounter) Apply(ctx context.Context, id string, decide machine.Decide) error {
	c.alone.Add(1)
	return c.Store.Apply(ctx, id, decide)
}

func (c *applyCounter) ApplyAbsent(ctx context.Context, ids []string, decide func(string) machine.Decide) []error {
	c.together.Add(int64(len(ids)))
	return c.Store.ApplyAbsent(ctx, ids, decide)
}

func TestAReportCreatesTheMachinesItsScanDidNotFindTogether(t *testing.T) {
	f := &applyCounter{Store: newFleet()}
	var machines []string
	for i := range inventory.ScanFrom + 200 {
		machines = append(machines, fmt.Sprintf(`{"id":"N%04d","host":"n%d"}`, i, i))
	}
	machines = append(machines, `{"id":"S5","host":"elsewhere.example.com"}`) // known: described again
	h := inventory.New(f, machine.DefaultLossBrake, slog.New(slog.DiscardHandler), nil)
	res, err := h.Handle(t.Context(), json.RawMessage(`{"machines":[`+strings.Join(machines, ",")+`]}`))
	if err != nil || res.Changed != inventory.ScanFrom+201 || res.Failed != 0 {
		t.Fatalf("got %+v, %v, want %d changed", res, err, inventory.ScanFrom+201)
	}
	if alone, together := f.alone.Load(), f.together.Load(); alone != 1 || together != inventory.ScanFrom+200 {
		t.Errorf("got %d machines applied alone and %d created together, want 1 (S5) and %d", alone, together, inventory.ScanFrom+200)
	}
	after := contents(t, f.Store)
	for i := range inventory.ScanFrom + 200 {
		id := fmt.Sprintf("N%04d", i)
		if s := after.Slaves[id]; s.Current.State != machine.Active || s.Host != fmt.Sprintf("n%d", i) || len(after.History[id]) != 1 {
			t.Fatalf("%s: got %+v with %d entries, want it ACTIVE on n%d with one", id, s, len(after.History[id]), i)
		}
	}
	if got := after.Slaves["S5"]; got.Host != "elsewhere.example.com" || got.Current.State != machine.Frozen {
		t.Errorf("S5: got %+v, want it FROZEN still, on its new host", got)
	}
}

// Each input goes to the entry point of its shape, and one whose fields
// name two shapes changes nothing: a step that also carries a report was
// once taken for the step, silently.
func TestHandleAppliesEachShapeThroughItsEntryPointAndRefusesAnAmbiguousOne(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	report := `{"machines":[{"id":"S9","host":"new.example.com"}]}`
	for _, in := range []string{
		`{"step":"plan","event":` + report + `,"machines":[{"id":"S10","host":"h"}]}`,
		`{"detail-type":"Machine Report","detail":` + report + `,"machines":[{"id":"S10","host":"h"}]}`,
	} {
		f := newFleet()
		before := contents(t, f)
		if _, err := inventory.New(f, machine.DefaultLossBrake, quiet, nil).Handle(t.Context(), json.RawMessage(in)); err == nil || !strings.Contains(err.Error(), "it must be one") {
			t.Errorf("%s: got %v, want it refused as two shapes", in, err)
		}
		if diff := changes(before, contents(t, f)); len(diff) > 0 {
			t.Errorf("%s: changed %v, want nothing", in, diff)
		}
	}
	for _, in := range []string{report, event(time.Now(), report), `{"step":"plan","event":` + report + `}`} {
		f := newFleet()
		res, err := inventory.New(f, machine.DefaultLossBrake, quiet, nil).Handle(t.Context(), json.RawMessage(in))
		if err != nil || res.Machines != 1 || contents(t, f).Slaves["S9"].Host != "new.example.com" {
			t.Errorf("%s: got %+v, %v, want S9 applied", in, res, err)
		}
	}
}
