package logindex

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/logkey"
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

func TestTheIndexerRefusesEventsThatAreNotS3ObjectEvents(t *testing.T) {
	x := NewIndexer(nil, nil, logkey.Format{}, []string{"task-logs"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
