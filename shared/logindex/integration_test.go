//go:build integration

package logindex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logstore"
)

var local *stack.Local

// TestMain starts moto holding the template's tables (LogIndexTable among
// them) and the log buckets. Moto does not deliver S3's events to
// EventBridge, so the tests hand the indexer the event S3 would send, in
// the shape of events/indexer-object-created.json: the local equivalent of
// the template's rule.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var err error
	local, err = stack.Up(ctx, "127.0.0.1:0")
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = local.Close()
	os.Exit(code)
}

// rig is an indexer over the local stack and what it logged.
type rig struct {
	indexer *logindex.Indexer
	table   *logindex.Table
	bucket  string
	logged  *bytes.Buffer
}

func newRig(t *testing.T) rig {
	t.Helper()
	var buf bytes.Buffer
	table := logindex.NewTable(local.DynamoDB, stack.LocalName("LogIndexTable"))
	bucket := local.LogBuckets[0]
	x := logindex.NewIndexer(logstore.NewBuckets(local.S3), table, logkey.Format{}, local.LogBuckets, slog.New(slog.NewJSONHandler(&buf, nil)), nil)
	return rig{indexer: x, table: table, bucket: bucket, logged: &buf}
}

// upload writes a log of task as the uploader does, with its start and end
// times, and returns its key.
func (r rig) upload(t *testing.T, task logkey.Task, name string, start, end int64) string {
	t.Helper()
	key := (logkey.Format{}).Key(logkey.File{Task: task, Filename: name, Modified: time.UnixMilli(start)})
	_, err := local.S3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &r.bucket, Key: &key, Body: strings.NewReader("log\n"),
		Metadata: map[string]string{"starttime": fmt.Sprint(start), "endtime": fmt.Sprint(end)}})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (r rig) remove(t *testing.T, key string) {
	t.Helper()
	if _, err := local.S3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &r.bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}
}

// send hands the indexer the event S3 sends for key.
func (r rig) send(t *testing.T, detailType, key, seq string) logindex.Result {
	t.Helper()
	ev := map[string]any{
		"version": "0", "source": "aws.s3", "detail-type": detailType,
		"detail": map[string]any{
			"bucket": map[string]any{"name": r.bucket},
			"object": map[string]any{"key": key, "sequencer": seq},
		},
	}
	raw, _ := json.Marshal(ev)
	res, err := r.indexer.Handle(context.Background(), raw)
	if err != nil {
		t.Fatalf("event %s %s: %v", detailType, key, err)
	}
	return res
}

// keys returns the keys the index holds in partition over w, sorted.
func (r rig) keys(t *testing.T, partition string, w logkey.Window) []string {
	t.Helper()
	entries, err := r.table.Logs(context.Background(), partition, w)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Key)
	}
	slices.Sort(out)
	return out
}

var always = logkey.Window{Start: 0, End: 1 << 62}

func task(t *testing.T, id string) logkey.Task {
	t.Helper()
	tk, err := logkey.ParseTaskID(id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestAnUploadedLogIsFoundByItsTaskRequestAndDeploy(t *testing.T) {
	r := newRig(t)
	tk := task(t, "upload-d1-1793491200000-0-h1-r1")
	key := r.upload(t, tk, "stdout", 1793491200000, 1793491260000)
	if res := r.send(t, "Object Created", key, "0055AED6DCD90281E5"); res.Outcome != "indexed" {
		t.Fatalf("got %+v, want indexed", res)
	}
	for _, p := range []string{logindex.TaskPartition(tk.ID), logindex.RequestPartition("upload"), logindex.DeployPartition("upload", "d1")} {
		if got := r.keys(t, p, always); !slices.Equal(got, []string{key}) {
			t.Errorf("%s: got %q, want %q", p, got, key)
		}
	}
	entries, err := r.table.Logs(context.Background(), logindex.TaskPartition(tk.ID), always)
	if err != nil {
		t.Fatal(err)
	}
	if e := entries[0]; e.Bucket != r.bucket || e.Size != 4 || e.LastModified == 0 || *e.Start != 1793491200000 || *e.End != 1793491260000 {
		t.Errorf("got %+v, want the object's bucket, size, last-modified time, start and end", e)
	}
	if got := r.keys(t, logindex.RequestPartition("upload-d1"), always); len(got) != 0 {
		t.Errorf("got %q under another request, want nothing", got)
	}
}

func TestADeletedLogLeavesTheIndex(t *testing.T) {
	r := newRig(t)
	tk := task(t, "deleted-d1-1793491200000-0-h1-r1")
	key := r.upload(t, tk, "stdout", 1793491200000, 1793491260000)
	r.send(t, "Object Created", key, "0055AED6DCD90281E5")
	r.remove(t, key)
	if res := r.send(t, "Object Deleted", key, "0055AED6DCD90281E6"); res.Outcome != "removed" {
		t.Fatalf("got %+v, want removed", res)
	}
	if got := r.keys(t, logindex.RequestPartition("deleted"), always); len(got) != 0 {
		t.Errorf("got %q, want nothing", got)
	}
}

func TestDuplicateAndReorderedEventsLeaveTheLatestState(t *testing.T) {
	r := newRig(t)
	tk := task(t, "reorder-d1-1793491200000-0-h1-r1")
	// Created (…01), deleted (…02), created again (…03, a shorter
	// sequencer that is still later once padded): the log exists. The
	// events arrive late, twice and in the wrong order.
	key := r.upload(t, tk, "stdout", 1793491200000, 1793491260000)
	r.send(t, "Object Created", key, "0055AED6DCD9028103")
	r.send(t, "Object Created", key, "0055AED6DCD9028103")
	r.send(t, "Object Deleted", key, "0055AED6DCD902810200")
	r.send(t, "Object Created", key, "0055AED6DCD9028101")
	r.send(t, "Object Deleted", key, "0055AED6DCD902810200")
	if got := r.keys(t, logindex.TaskPartition(tk.ID), always); !slices.Equal(got, []string{key}) {
		t.Errorf("got %q, want %q: an older delete removed a newer log", got, key)
	}

	// Deleted for good (…04), then an old created event arrives: it stays gone.
	other := r.upload(t, tk, "stderr", 1793491200000, 1793491260000)
	r.send(t, "Object Created", other, "0055AED6DCD9028110")
	r.send(t, "Object Deleted", other, "0055AED6DCD9028120")
	r.send(t, "Object Created", other, "0055AED6DCD9028110")
	if got := r.keys(t, logindex.TaskPartition(tk.ID), always); !slices.Equal(got, []string{key}) {
		t.Errorf("got %q, want only %q: an older created event brought a deleted log back", got, key)
	}
}

func TestAKeyTheFormatDidNotWriteIsLoggedAndSkipped(t *testing.T) {
	r := newRig(t)
	key := "stray/readme.txt"
	if _, err := local.S3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &r.bucket, Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if res := r.send(t, "Object Created", key, "0055AED6DCD9028101"); res.Outcome != "skipped" {
		t.Errorf("got %+v, want skipped", res)
	}
	if got := r.keys(t, logindex.RequestPartition("stray"), always); len(got) != 0 {
		t.Errorf("got %q, want nothing indexed", got)
	}
	if !strings.Contains(r.logged.String(), `"key":"stray/readme.txt"`) {
		t.Errorf("got log %s, want a line naming the key", r.logged)
	}
}

func TestLookupsAreExactToTheMillisecond(t *testing.T) {
	r := newRig(t)
	tk := task(t, "window-d1-1793491200000-0-h1-r1")
	// Three logs in one month: 10:00–10:05, 10:30–11:30, 12:00–12:01.
	at := func(h, m int) int64 { return time.Date(2026, 11, 1, h, m, 0, 0, time.UTC).UnixMilli() }
	early := r.upload(t, tk, "a", at(10, 0), at(10, 5))
	long := r.upload(t, tk, "b", at(10, 30), at(11, 30))
	late := r.upload(t, tk, "c", at(12, 0), at(12, 1))
	for i, k := range []string{early, long, late} {
		r.send(t, "Object Created", k, fmt.Sprintf("0055AED6DCD90281%02d", i))
	}
	for _, c := range []struct {
		name string
		w    logkey.Window
		want []string
	}{
		{"an hour overlapping one log's end and another's start", logkey.Window{Start: at(10, 4), End: at(11, 0)}, []string{early, long}},
		{"the end is excluded", logkey.Window{Start: at(9, 0), End: at(10, 0)}, nil},
		{"the start is included", logkey.Window{Start: at(12, 1), End: at(13, 0)}, []string{late}},
		{"inside one long log", logkey.Window{Start: at(11, 0), End: at(11, 1)}, []string{long}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := slices.Sorted(slices.Values(c.want))
			if got := r.keys(t, logindex.TaskPartition(tk.ID), c.w); !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
