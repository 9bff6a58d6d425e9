package logindex

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/logkey"
)

// untouched is S3 and the index of a test in which nothing may be read or
// written: every call fails the test.
type untouched struct {
	Index
	t *testing.T
}

func (u untouched) Stat(context.Context, string, string) (logkey.Entry, string, bool, error) {
	u.t.Error("got a HEAD, want none")
	return logkey.Entry{}, "", false, nil
}

func (u untouched) Page(context.Context, string, string, string, int) ([]logkey.Object, bool, error) {
	u.t.Error("got a listing, want none")
	return nil, true, nil
}

func (u untouched) EventsOn(context.Context, string) (bool, error) {
	u.t.Error("got a read of the notification configuration, want none")
	return false, nil
}

const sampleKey = "web-api/2026/11/web-api-v42-1793491200000-0-node17-r1_0-1793494800000-"

func batchOf(bucket string, keys ...string) string {
	items := make([]map[string]any, len(keys))
	for i, k := range keys {
		items[i] = map[string]any{"Key": k, "Size": 4, "LastModified": 1793491200, "Etag": `"e"`, "StorageClass": "STANDARD"}
	}
	raw, _ := json.Marshal(map[string]any{"BatchInput": map[string]any{"job": "reconcile", "bucket": bucket, "prefix": "web-api/", "started": 1793491200000}, "Items": items})
	return string(raw)
}

func TestTheIndexerRefusesAReconciliationStepItCannotTrustBeforeReadingAnything(t *testing.T) {
	u := untouched{t: t}
	x := NewIndexer(u, u, logkey.Format{}, []string{"task-logs"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	many := make([]string, MaxBatch+1)
	for i := range many {
		many[i] = sampleKey + strings.Repeat("x", i+1)
	}
	for name, raw := range map[string]string{
		"a batch of another bucket":       batchOf("reports", sampleKey+"stdout"),
		"a batch of another job":          strings.Replace(batchOf("task-logs", sampleKey+"stdout"), `"reconcile"`, `"rebuild"`, 1),
		"a batch that is also an event":   strings.Replace(batchOf("task-logs", sampleKey+"stdout"), `{`, `{"source":"aws.s3","detail-type":"Object Created",`, 1),
		"a batch that is also a step":     strings.Replace(batchOf("task-logs", sampleKey+"stdout"), `{`, `{"job":"reconcile-begin",`, 1),
		"a batch without its run's start": strings.Replace(batchOf("task-logs", sampleKey+"stdout"), `"started":1793491200000`, `"started":0`, 1),
		"an empty batch":                  `{"BatchInput":{"job":"reconcile","bucket":"task-logs","started":1},"Items":[]}`,
		"an item without a key":           `{"BatchInput":{"job":"reconcile","bucket":"task-logs","started":1},"Items":[{"Size":3}]}`,
		"keys out of S3's order":          batchOf("task-logs", sampleKey+"stdout", sampleKey+"stderr"),
		"the same key twice":              batchOf("task-logs", sampleKey+"stdout", sampleKey+"stdout"),
		"a key outside the prefix":        batchOf("task-logs", "other/"+sampleKey),
		"too many keys":                   batchOf("task-logs", many...),
		"a step of another bucket":        `{"job":"reconcile-begin","bucket":"reports","prefix":""}`,
		"a step of another job":           `{"job":"reconcile-everything","bucket":"task-logs"}`,
		"another function's job":          `{"job":"expiry"}`,
		"a finish without a start":        `{"job":"reconcile-finish","bucket":"task-logs","prefix":"","events":true}`,
	} {
		t.Run(name, func(t *testing.T) {
			u.t = t
			if res, err := x.Handle(t.Context(), json.RawMessage(raw)); err == nil {
				t.Errorf("got %+v, want an error", res)
			}
		})
	}
}

// listing is a bucket's keys in order, each with its last modification
// (epoch ms); Page lists them as logstore does.
type listing struct {
	untouched
	keys []logkey.Object
}

func (l listing) Page(_ context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error) {
	var out []logkey.Object
	for i, o := range l.keys {
		if o.Key > after {
			out = l.keys[i:min(len(l.keys), i+limit)]
			return out, i+limit >= len(l.keys), nil
		}
	}
	return nil, true, nil
}

func TestABatchRangeEndsAtTheNextKeyS3HeldWhenTheRunBegan(t *testing.T) {
	const started = 1793491200500
	var keys []logkey.Object
	for i := range 25 {
		keys = append(keys, logkey.Object{Key: fmt.Sprintf("k%02d", i), LastModified: started + 1000}) // written since
	}
	keys = append(keys, logkey.Object{Key: "k30", LastModified: started - 5000}, logkey.Object{Key: "k31", LastModified: started})
	x := NewIndexer(listing{keys: keys}, nil, logkey.Format{}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	run := Run{Bucket: "task-logs", Started: started}
	for _, c := range []struct {
		after, want string
		found       bool
	}{
		{"", "k30", true},    // past the 25 keys written since, over three pages
		{"k30", "k31", true}, // written in the second the run began: held then
		{"k31", "", false},
	} {
		got, found, err := x.listedAfter(t.Context(), run, c.after)
		if err != nil || got != c.want || found != c.found {
			t.Errorf("after %q: got %q, %v, %v; want %q, %v", c.after, got, found, err, c.want, c.found)
		}
	}
}
