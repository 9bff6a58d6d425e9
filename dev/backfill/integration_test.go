//go:build integration

package backfill_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/dev/backfill"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
)

var local *stack.Local

func TestMain(m *testing.M) {
	os.Exit(stack.Main(func(l *stack.Local) int {
		local = l
		return m.Run()
	}))
}

// logs is a request's logs in the first log bucket: its task's files in
// the template's key format, all under the prefix "<request>/".
type logs struct {
	bucket string
	task   logkey.Task
}

func newLogs(t *testing.T, request string) logs {
	t.Helper()
	tk, err := logkey.ParseTaskID(request + "-d1-1793491200000-0-h1-r1")
	if err != nil {
		t.Fatal(err)
	}
	return logs{bucket: local.LogBuckets[0], task: tk}
}

func (l logs) prefix() string { return l.task.RequestID + "/" }

func (l logs) key(i int) string {
	return (logkey.Format{}).Key(logkey.File{Task: l.task, Filename: fmt.Sprintf("part%05d", i), Modified: time.UnixMilli(1793491200000)})
}

// put uploads key as the uploader does, starting at start.
func (l logs) put(ctx context.Context, key string, start int64) error {
	_, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &l.bucket, Key: &key, Body: strings.NewReader("log\n"),
		Metadata: map[string]string{"starttime": fmt.Sprint(start)}})
	return err
}

// upload writes n logs and the given other keys, 16 at a time, and
// returns the logs' keys.
func (l logs) upload(t *testing.T, n int, others ...string) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = l.key(i)
	}
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(16)
	for _, k := range append(slices.Clone(keys), others...) {
		g.Go(func() error { return l.put(ctx, k, 1793491200000) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// indexed returns the index's entries of the request's partition, by key.
func (l logs) indexed(t *testing.T) map[string]logkey.Entry {
	t.Helper()
	entries, err := logindex.NewTable(local.DynamoDB, stack.LocalName("LogIndexTable")).
		Logs(t.Context(), logindex.RequestPartition(l.task.RequestID), logkey.Window{Start: 0, End: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]logkey.Entry{}
	for _, e := range entries {
		if _, twice := out[e.Key]; twice {
			t.Errorf("got %s twice in the index", e.Key)
		}
		out[e.Key] = e
	}
	return out
}

// machine is BackfillStateMachine over the local stack, with s3 for the
// indexer's S3 client (nil for the stack's), retrying without waiting.
func machine(t *testing.T, client *s3.Client) *statemachine.Machine {
	t.Helper()
	if client == nil {
		client = local.S3
	}
	m, err := backfill.Machine(t.Context(), local, backfill.Clients{DynamoDB: local.DynamoDB, S3: client})
	if err != nil {
		t.Fatal(err)
	}
	m.List = statemachine.ListObjects(local.S3)
	m.Sleep = func(time.Duration) {}
	return m
}

func TestTheBackfillIndexesEveryKeyTheFormatWroteAndSkipsTheOthers(t *testing.T) {
	l := newLogs(t, "bfall")
	// More than a page of the listing (1,000) and more than two batches.
	keys := l.upload(t, 1234, l.prefix()+"README", l.prefix()+"zz/notes.txt")
	totals, err := backfill.Run(t.Context(), machine(t, nil), backfill.Input(l.bucket, l.prefix()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (logindex.Counts{Indexed: 1234, Skipped: 2}); totals.Counts != want || totals.Batches != 3 {
		t.Errorf("got %s, want %+v in 3 batches", totals, want)
	}
	got := l.indexed(t)
	for _, k := range keys {
		if _, ok := got[k]; !ok {
			t.Errorf("got %s missing from the index", k)
		}
	}
	if len(got) != len(keys) {
		t.Errorf("got %d logs indexed, want %d", len(got), len(keys))
	}
}

// racing is an S3 client whose HEAD of a key of race runs the race's
// change, and its event, right after S3 answered: the backfill then writes
// what it read of an object the index already knows has changed.
func racing(race map[string]func(context.Context)) *s3.Client {
	return s3.New(local.S3.Options(), func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("race", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if head, ok := in.Parameters.(*s3.HeadObjectInput); ok && race[aws.ToString(head.Key)] != nil {
					race[aws.ToString(head.Key)](ctx)
				}
				return out, md, err
			}), middleware.After)
		})
	})
}

func TestADeleteAndAnOverwriteDuringTheBackfillWin(t *testing.T) {
	l := newLogs(t, "bfrace")
	keys := l.upload(t, 20)
	events, err := indexerapp.New(t.Context(), func(name string) string {
		env, _ := local.Template.FunctionEnv(backfill.Function, stack.LocalName)
		return env[name]
	}, indexerapp.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DynamoDB: local.DynamoDB, S3: local.S3})
	if err != nil {
		t.Fatal(err)
	}
	send := func(ctx context.Context, detailType, key, seq string) {
		ev, _ := json.Marshal(map[string]any{"source": "aws.s3", "detail-type": detailType,
			"detail": map[string]any{"bucket": map[string]any{"name": l.bucket}, "object": map[string]any{"key": key, "sequencer": seq}}})
		if _, err := events(ctx, ev); err != nil {
			t.Errorf("event %s %s: %v", detailType, key, err)
		}
	}
	deleted, overwritten := keys[3], keys[11]
	const newStart = 1793491300000
	race := map[string]func(context.Context){
		deleted: func(ctx context.Context) {
			local.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &l.bucket, Key: &deleted})
			send(ctx, "Object Deleted", deleted, "0055AED6DCD9028101")
		},
		overwritten: func(ctx context.Context) {
			if err := l.put(ctx, overwritten, newStart); err != nil {
				t.Error(err)
			}
			send(ctx, "Object Created", overwritten, "0055AED6DCD9028102")
		},
	}
	if _, err := backfill.Run(t.Context(), machine(t, racing(race)), backfill.Input(l.bucket, l.prefix()), nil); err != nil {
		t.Fatal(err)
	}
	got := l.indexed(t)
	if _, ok := got[deleted]; ok {
		t.Errorf("got %s in the index, want it deleted: its tombstone is newer than the backfill", deleted)
	}
	if e := got[overwritten]; e.Start == nil || *e.Start != newStart {
		t.Errorf("got %s starting at %s, want the overwrite's %d: its event is newer than the backfill", overwritten, millis(e.Start), newStart)
	}
	if len(got) != len(keys)-1 {
		t.Errorf("got %d logs indexed, want %d", len(got), len(keys)-1)
	}
}

func TestAnInterruptedBackfillResumesWithoutRedoingFinishedBatches(t *testing.T) {
	l := newLogs(t, "bfresume")
	keys := l.upload(t, 2100) // 5 batches of at most 500
	path := t.TempDir() + "/journal.jsonl"

	journal, err := statemachine.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	m := machine(t, nil)
	m.Journal = journal
	ctx, interrupt := context.WithCancel(t.Context())
	first, err := backfill.Run(ctx, m, backfill.Input(l.bucket, l.prefix()), func(t backfill.Totals) {
		if t.Batches == 2 {
			interrupt()
		}
	})
	interrupt()
	journal.Close()
	if err == nil || first.Batches < 2 || first.Batches == 5 {
		t.Fatalf("got %s, %v; want an execution interrupted after 2 batches", first, err)
	}

	if journal, err = statemachine.OpenJournal(path); err != nil {
		t.Fatal(err)
	}
	defer journal.Remove()
	m = machine(t, nil)
	m.Journal = journal
	var batches atomic.Int64
	invoke := m.Invoke
	m.Invoke = func(ctx context.Context, fn string, payload json.RawMessage) (json.RawMessage, error) {
		batches.Add(1)
		return invoke(ctx, fn, payload)
	}
	second, err := backfill.Run(t.Context(), m, backfill.Input(l.bucket, l.prefix()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if second.Batches != 5 || second.Earlier != first.Batches || batches.Load() != int64(5-first.Batches) {
		t.Errorf("got %s after %d invocations, want the %d batches not done before run, and only those", second, batches.Load(), 5-first.Batches)
	}
	if second.Indexed != int64(len(keys)) {
		t.Errorf("got %d indexed in all, want %d", second.Indexed, len(keys))
	}
	if got := l.indexed(t); len(got) != len(keys) {
		t.Errorf("got %d logs indexed, want %d", len(got), len(keys))
	}
}

func TestABackfillOfAnotherBucketIsRefused(t *testing.T) {
	key := "bfother/2026/11/x"
	if _, err := local.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &local.ReportsBucket, Key: &key, Body: strings.NewReader("{}")}); err != nil {
		t.Fatal(err)
	}
	totals, err := backfill.Run(t.Context(), machine(t, nil), backfill.Input(local.ReportsBucket, "bfother/"), nil)
	if err == nil || !strings.Contains(err.Error(), "not one of LOG_BUCKETS") || totals.Batches != 0 {
		t.Errorf("got %s, %v; want the execution failed by its refused batch", totals, err)
	}
}

func millis(p *int64) string {
	if p == nil {
		return "no time"
	}
	return fmt.Sprint(*p)
}
