package logindex

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/metrics"
)

func TestSequencersOrderAsTheirEventsOnceNormalized(t *testing.T) {
	// S3 compares sequencers after padding the shorter on the right.
	for _, c := range []struct{ older, newer string }{
		{"0055AED6DCD90281E5", "0055AED6DCD90281E6"},
		{"0055AED6DCD902810200", "0055aed6dcd9028103"},
		{"0055AED6DCD90281", "0055AED6DCD9028100000001"},
	} {
		a, err1 := NormalizeSequencer(c.older)
		b, err2 := NormalizeSequencer(c.newer)
		if err1 != nil || err2 != nil || a >= b {
			t.Errorf("got %q ≥ %q (%v, %v), want %s before %s", a, b, err1, err2, c.older, c.newer)
		}
	}
	for _, bad := range []string{"", "0055-AED6", strings.Repeat("A", 65)} {
		if got, err := NormalizeSequencer(bad); err == nil {
			t.Errorf("got %q for %q, want an error", got, bad)
		}
	}
}

func TestWhatTheReconciliationFillsInIsBelowEveryEvent(t *testing.T) {
	if lowestSeq != strings.Repeat("0", sequencerWidth) {
		t.Fatalf("got lowestSeq %q, want %d zeros", lowestSeq, sequencerWidth)
	}
	for _, s := range []string{"0", "1", "0062E7E3D2FB8C8A00", strings.Repeat("F", sequencerWidth)} {
		n, err := NormalizeSequencer(s)
		if err != nil {
			t.Fatal(err)
		}
		if n < lowestSeq || s != "0" && n == lowestSeq {
			t.Errorf("sequencer %s normalized to %s: got it at or below lowestSeq, want above (or equal, for 0)", s, n)
		}
	}
}

func TestTheIndexerRefusesEventsThatAreNotS3ObjectEvents(t *testing.T) {
	x := NewIndexer(nil, nil, logkey.Format{}, []string{"task-logs"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	for _, raw := range []string{
		`{"source":"aws.events","detail-type":"Scheduled Event","detail":{}}`,
		`{"source":"aws.s3","detail-type":"Object Restore Completed","detail":{}}`,
		`{"machines":[]}`,
		`[`,
	} {
		if res, err := x.Handle(context.Background(), json.RawMessage(raw)); err == nil {
			t.Errorf("got %+v for %s, want an error", res, raw)
		}
	}
}

// throttledObjects is S3 throttling once before it answers that the object
// is gone.
type throttledObjects struct{}

func (throttledObjects) Stat(ctx context.Context, bucket, key string) (logkey.Entry, string, bool, error) {
	callcount.From(ctx).Add(true)
	callcount.From(ctx).Add(false)
	return logkey.Entry{}, "", false, nil
}

func (throttledObjects) Page(context.Context, string, string, string, int) ([]logkey.Object, bool, error) {
	return nil, true, nil
}

func (throttledObjects) EventsOn(context.Context, string) (bool, error) { return true, nil }

func TestTheIndexerCountsThrottledCallsAndLogsEachOutcome(t *testing.T) {
	var out, logged bytes.Buffer
	m, err := metrics.New(&out, "Fleet", "IndexerFunction")
	if err != nil {
		t.Fatal(err)
	}
	x := NewIndexer(throttledObjects{}, nil, logkey.Format{}, []string{"task-logs"}, slog.New(slog.NewJSONHandler(&logged, nil)), m)
	raw := `{"source":"aws.s3","detail-type":"Object Created","detail":{"bucket":{"name":"task-logs"},` +
		`"object":{"key":"web-api/2026/11/web-api-v42-1793491200000-0-node17-r1_0-1793494800000-stdout","sequencer":"0055AED6DCD90281E5"}}}`
	res, err := x.Handle(context.Background(), json.RawMessage(raw))
	if err != nil || res.Outcome != "skipped" {
		t.Fatalf("got %+v, %v, want skipped (the object is gone)", res, err)
	}
	if !strings.Contains(out.String(), `"BackendThrottles":1`) {
		t.Errorf("got metrics %s, want BackendThrottles 1", out.String())
	}
	if !strings.Contains(logged.String(), `"backend_calls":2`) || !strings.Contains(logged.String(), `"outcome":"skipped"`) {
		t.Errorf("got log %s, want the outcome and 2 backend calls", logged.String())
	}
}

func TestLogsOfAnotherGroupGoWhereNoLookupReads(t *testing.T) {
	p := logkey.Parsed{TaskID: "r-d-1-0-h-k", RequestID: "r", DeployID: "d"}
	want := []string{"t#r-d-1-0-h-k", "r#r", "d#r/d"}
	for _, group := range []string{"", logkey.DefaultGroup} {
		p.Group = group
		if got := Partitions(p); !slices.Equal(got, want) {
			t.Errorf("group %q: got %q, want %q", group, got, want)
		}
	}
	p.Group = "batch"
	if got, want := Partitions(p), []string{"t#r-d-1-0-h-k/batch", "r#r/batch", "d#r/d/batch"}; !slices.Equal(got, want) {
		t.Errorf("group batch: got %q, want %q", got, want)
	}
}
