package logindex

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fleetops/fleet/shared/logkey"
)

// fakeObjects holds the objects of one bucket; fakeIndex records the
// sequencer of each log written.
type fakeObjects map[string]bool

func (o fakeObjects) Stat(_ context.Context, bucket, key string) (logkey.Object, *int64, *int64, bool, error) {
	return logkey.Object{Bucket: bucket, Key: key}, nil, nil, o[key], nil
}

type fakeIndex struct {
	mu   sync.Mutex
	seqs map[string]string
}

func (x *fakeIndex) Put(_ context.Context, _ logkey.Parsed, e logkey.Entry, seq string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seqs[e.Key] = seq
	return nil
}

func (x *fakeIndex) Remove(context.Context, logkey.Parsed, string, string, string) error {
	return fmt.Errorf("a backfill removes nothing")
}

const sampleKey = "web-api/2026/11/web-api-v42-1793491200000-0-node17-r1_0-1793494800000-"

func batchOf(bucket string, keys ...string) string {
	items := make([]map[string]any, len(keys))
	for i, k := range keys {
		items[i] = map[string]any{"Key": k, "Size": 4, "LastModified": 1793491200, "Etag": `"e"`, "StorageClass": "STANDARD"}
	}
	raw, _ := json.Marshal(map[string]any{"BatchInput": map[string]any{"job": "backfill", "bucket": bucket}, "Items": items})
	return string(raw)
}

func TestABackfillBatchIndexesWhatTheFormatWroteWithTheLowestSequencer(t *testing.T) {
	objects := fakeObjects{sampleKey + "stdout": true, sampleKey + "stderr": true, "notes.txt": true}
	index := &fakeIndex{seqs: map[string]string{}}
	x := NewIndexer(objects, index, logkey.Format{}, []string{"task-logs"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	raw := batchOf("task-logs", sampleKey+"stderr", sampleKey+"stdout", sampleKey+"gone", "notes.txt")
	res, err := x.Handle(t.Context(), json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Indexed: 2, Skipped: 1, Gone: 1}
	if res.Outcome != "backfilled" || res.Backfill == nil || *res.Backfill != want || res.Key != "notes.txt" {
		t.Errorf("got %+v (%+v), want backfilled %+v up to notes.txt", res, res.Backfill, want)
	}
	for _, k := range []string{sampleKey + "stdout", sampleKey + "stderr"} {
		if index.seqs[k] != strings.Repeat("0", 64) {
			t.Errorf("%s: got sequencer %q, want 64 zeros: any event wins over a backfill", k, index.seqs[k])
		}
	}
}

func TestTheIndexerRefusesABatchItCannotTellIsABackfillOfALogBucket(t *testing.T) {
	index := &fakeIndex{seqs: map[string]string{}}
	x := NewIndexer(fakeObjects{sampleKey + "stdout": true}, index, logkey.Format{}, []string{"task-logs"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	many := make([]string, MaxBatch+1)
	for i := range many {
		many[i] = sampleKey + "stdout"
	}
	for name, raw := range map[string]string{
		"a batch of another bucket":     batchOf("reports", sampleKey+"stdout"),
		"a batch of another job":        strings.Replace(batchOf("task-logs", sampleKey+"stdout"), `"backfill"`, `"rebuild"`, 1),
		"a batch that is also an event": strings.Replace(batchOf("task-logs", sampleKey+"stdout"), `{`, `{"source":"aws.s3","detail-type":"Object Created",`, 1),
		"an empty batch":                `{"BatchInput":{"job":"backfill","bucket":"task-logs"},"Items":[]}`,
		"an item without a key":         `{"BatchInput":{"job":"backfill","bucket":"task-logs"},"Items":[{"Size":3}]}`,
		"too many keys":                 batchOf("task-logs", many...),
	} {
		t.Run(name, func(t *testing.T) {
			if res, err := x.Handle(t.Context(), json.RawMessage(raw)); err == nil {
				t.Errorf("got %+v, want an error", res)
			}
			if len(index.seqs) != 0 {
				t.Errorf("got %d logs written, want none", len(index.seqs))
			}
		})
	}
}
