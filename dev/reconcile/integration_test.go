//go:build integration

package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/dev/reconcile"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	logroutes "github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
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

func (l logs) key(name string) string {
	return (logkey.Format{}).Key(logkey.File{Task: l.task, Filename: name, Modified: time.UnixMilli(1793491200000)})
}

func (l logs) keys(from, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = l.key(fmt.Sprintf("part%05d", from+i))
	}
	return keys
}

// put uploads key as the uploader does, starting at start.
func (l logs) put(ctx context.Context, key, body string, start int64) error {
	_, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &l.bucket, Key: &key, Body: strings.NewReader(body),
		Metadata: map[string]string{"starttime": fmt.Sprint(start)}})
	return err
}

// upload writes keys, 16 at a time.
func (l logs) upload(t *testing.T, keys ...string) {
	t.Helper()
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(16)
	for _, k := range keys {
		g.Go(func() error { return l.put(ctx, k, "log\n", 1793491200000) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func (l logs) remove(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := local.S3.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: &l.bucket, Key: &k}); err != nil {
			t.Fatal(err)
		}
	}
}

func table() *logindex.Table {
	return logindex.NewTable(local.DynamoDB, stack.LocalName("LogIndexTable"))
}

// indexed returns the index's entries of the request's partition, by key.
func (l logs) indexed(t *testing.T) map[string]logkey.Entry {
	t.Helper()
	entries, err := table().Logs(t.Context(), logindex.RequestPartition(l.task.RequestID), logkey.Window{Start: 0, End: 1 << 62})
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

// inS3 returns the logs S3 holds under the request's prefix, as a HEAD
// tells them, by key: the ground truth the index must equal.
func (l logs) inS3(t *testing.T) map[string]logkey.Entry {
	t.Helper()
	store := logstore.New(local.S3, nil)
	objs, err := store.All(t.Context(), l.bucket, l.prefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]logkey.Entry{}
	for _, o := range objs {
		if _, ok := (logkey.Format{}).Parse(o.Key); !ok {
			continue // not a log: the index never holds it
		}
		e, _, found, err := store.Stat(t.Context(), l.bucket, o.Key)
		if err != nil || !found {
			t.Fatalf("head %q: %v, found %v", o.Key, err, found)
		}
		out[o.Key] = e
	}
	return out
}

// equalsS3 fails t unless the index holds exactly what S3 holds under the
// request's prefix, times, sizes and metadata included.
func (l logs) equalsS3(t *testing.T) {
	t.Helper()
	got, want := l.indexed(t), l.inS3(t)
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("got %q missing from the index, want it: S3 holds it", k)
		case g.Size != w.Size || g.LastModified != w.LastModified || millis(g.Start) != millis(w.Start):
			t.Errorf("got %q indexed as %d bytes modified at %d starting at %s, want S3's %d, %d, %s",
				k, g.Size, g.LastModified, millis(g.Start), w.Size, w.LastModified, millis(w.Start))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("got %q in the index, want it gone: S3 no longer holds it", k)
		}
	}
}

// machine is ReconcileStateMachine over the local stack, with client for
// the indexer's S3 client (nil for the stack's), retrying without waiting.
func machine(t *testing.T, client *s3.Client) *statemachine.Machine {
	t.Helper()
	if client == nil {
		client = local.S3
	}
	m, err := reconcile.Machine(t.Context(), local, reconcile.Clients{DynamoDB: local.DynamoDB, S3: client})
	if err != nil {
		t.Fatal(err)
	}
	m.List = statemachine.ListObjects(local.S3)
	m.Sleep = func(time.Duration) {}
	return m
}

// batchesOf makes the Map of m's definition hand out batches of at most n
// keys instead of the template's 500: a test of how batches resume needs
// several of them, not the logs of several full ones.
func batchesOf(t *testing.T, m *statemachine.Machine, n int) {
	t.Helper()
	var set func(v any) int
	set = func(v any) int {
		found := 0
		switch v := v.(type) {
		case map[string]any:
			if b, ok := v["ItemBatcher"].(map[string]any); ok {
				b["MaxItemsPerBatch"] = float64(n)
				found++
			}
			for _, e := range v {
				found += set(e)
			}
		case []any:
			for _, e := range v {
				found += set(e)
			}
		}
		return found
	}
	if found := set(m.Definition); found != 1 {
		t.Fatalf("got %d ItemBatchers in the definition, want the Map's one", found)
	}
}

// handler is IndexerFunction's handler, as the local stack's event
// delivery and the racing tests call it.
func handler(t *testing.T) indexerapp.Handler {
	t.Helper()
	env, err := local.Template.FunctionEnv(reconcile.Function, stack.LocalName)
	if err != nil {
		t.Fatal(err)
	}
	h, err := indexerapp.New(t.Context(), func(name string) string { return env[name] },
		indexerapp.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), DynamoDB: local.DynamoDB, S3: local.S3})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// notifications turns the log buckets' EventBridge notifications on or off.
func notifications(t *testing.T, on bool) {
	t.Helper()
	cfg := &s3types.NotificationConfiguration{}
	if on {
		cfg.EventBridgeConfiguration = &s3types.EventBridgeConfiguration{}
	}
	for _, b := range local.LogBuckets {
		_, err := local.S3.PutBucketNotificationConfiguration(context.WithoutCancel(t.Context()),
			&s3.PutBucketNotificationConfigurationInput{Bucket: &b, NotificationConfiguration: cfg})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// deliver delivers the log buckets' S3 events to IndexerFunction's handler
// until the test ends, and turns their notifications off then.
func deliver(t *testing.T) {
	t.Helper()
	h := handler(t)
	d, err := local.DeliverLogEvents(t.Context(), func(ctx context.Context, raw json.RawMessage) error {
		_, err := h(ctx, raw)
		return err
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		notifications(t, false)
		d.Close()
	})
}

func TestAReconciliationWhileUploadsContinueMakesTheIndexEqualToS3AndCountsExactlyWhatDrifted(t *testing.T) {
	l := newLogs(t, "rcdrift")
	deliver(t)
	keys := l.keys(0, 60)
	l.upload(t, keys...) // indexed by their events
	// A loaded machine answers an upload before its event is applied
	// (dev/motoserver.py holds it 2 s at most).
	if err := local.WaitLogEvents(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.equalsS3(t)

	// An hour without notifications: every change is lost to the index.
	notifications(t, false)
	deleted, rewritten := []string{keys[0], keys[7], keys[8], keys[30], keys[59]}, []string{keys[1], keys[20], keys[21], keys[58]}
	l.remove(t, deleted...)
	for i, k := range rewritten {
		if err := l.put(t.Context(), k, "written again, longer\n", 1793491300000+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Keys XML cannot carry, and one the format did not write.
	added := append(l.keys(100, 4), l.key("esc\x1b[31mred"), l.key("cr\rlf"))
	l.upload(t, append(added, l.prefix()+"README")...)
	notifications(t, true)

	// Uploads go on while the reconciliation runs, indexed by their
	// events; they are no drift. They start in the second after the run
	// began, and its batches wait for the first ten, so that they land
	// between the listing and the batches' reads of the index, and during
	// the batches.
	m := machine(t, nil)
	begun, some := make(chan struct{}), make(chan struct{})
	invoke := m.Invoke
	m.Invoke = func(ctx context.Context, fn string, payload json.RawMessage) (json.RawMessage, error) {
		if strings.Contains(string(payload), `"BatchInput"`) {
			<-some
		}
		out, err := invoke(ctx, fn, payload)
		if strings.Contains(string(payload), `"reconcile-begin"`) {
			close(begun)
		}
		return out, err
	}
	var live atomic.Int64
	uploads, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		defer close(done)
		<-begun
		time.Sleep(1100 * time.Millisecond)
		for i := 0; uploads.Err() == nil; i++ {
			if err := l.put(uploads, l.key(fmt.Sprintf("live%04d", i)), "live\n", 1793491200000); err != nil {
				if uploads.Err() == nil {
					done <- err
				}
				return
			}
			if live.Add(1) == 10 {
				close(some)
			}
		}
	}()
	runs, totals, err := reconcile.Run(t.Context(), m, reconcile.Input(l.bucket, l.prefix()), nil)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The upload cut short by stop may have reached S3, its event not yet
	// applied.
	if err := local.WaitLogEvents(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := logindex.Drift{Added: int64(len(added)), Removed: int64(len(deleted)), Updated: int64(len(rewritten))}
	if len(runs) != 1 || runs[0].Drift == nil || *runs[0].Drift != want {
		t.Fatalf("got runs %+v (%s), want one whose drift is %+v", runs, totals, want)
	}
	if totals.Drift != want {
		t.Errorf("got batches adding up to %+v, want %+v", totals.Drift, want)
	}
	if runs[0].Complete {
		t.Errorf("got %+v complete, want a run under a prefix never to make its bucket complete", runs[0])
	}
	l.equalsS3(t)

	// Nothing drifted since: a second run finds nothing.
	runs, _, err = reconcile.Run(t.Context(), machine(t, nil), reconcile.Input(l.bucket, l.prefix()), nil)
	if err != nil || *runs[0].Drift != (logindex.Drift{}) {
		t.Errorf("got %+v, %v on the second run, want no drift", runs, err)
	}
}

// racing is an S3 client whose HEAD of a key of race runs the race's
// change, and its event, right after S3 answered: the reconciliation then
// writes what it read of an object the index already knows has changed.
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

func TestLiveEventsDuringTheReconciliationWin(t *testing.T) {
	l := newLogs(t, "rcrace")
	keys := l.keys(0, 20)
	l.upload(t, keys...) // no event delivered: all of them are drift
	events := handler(t)
	send := func(ctx context.Context, detailType, key, seq string) {
		ev, _ := json.Marshal(map[string]any{"source": "aws.s3", "detail-type": detailType,
			"detail": map[string]any{"bucket": map[string]any{"name": l.bucket}, "object": map[string]any{"key": key, "sequencer": seq}}})
		if _, err := events(ctx, ev); err != nil {
			t.Errorf("event %s %s: %v", detailType, key, err)
		}
	}
	// The index holds a log S3 lost (its delete event lost); it comes back,
	// with its event, right after the reconciliation's HEAD found it gone.
	recreated := l.key("recreated")
	l.upload(t, recreated)
	send(t.Context(), "Object Created", recreated, "0055AED6DCD9028100")
	l.remove(t, recreated)

	deleted, overwritten := keys[3], keys[11]
	const newStart = 1793491300000
	race := map[string]func(context.Context){
		deleted: func(ctx context.Context) {
			local.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &l.bucket, Key: &deleted})
			send(ctx, "Object Deleted", deleted, "0055AED6DCD9028101")
		},
		overwritten: func(ctx context.Context) {
			if err := l.put(ctx, overwritten, "log\n", newStart); err != nil {
				t.Error(err)
			}
			send(ctx, "Object Created", overwritten, "0055AED6DCD9028102")
		},
		recreated: func(ctx context.Context) {
			if err := l.put(ctx, recreated, "log\n", newStart); err != nil {
				t.Error(err)
			}
			send(ctx, "Object Created", recreated, "0055AED6DCD9028103")
		},
	}
	runs, _, err := reconcile.Run(t.Context(), machine(t, racing(race)), reconcile.Input(l.bucket, l.prefix()), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := l.indexed(t)
	if _, ok := got[deleted]; ok {
		t.Errorf("got %s in the index, want it deleted: its tombstone is newer than what the reconciliation read", deleted)
	}
	if e := got[overwritten]; e.Start == nil || *e.Start != newStart {
		t.Errorf("got %s starting at %s, want the overwrite's %d: its event is newer than what the reconciliation read", overwritten, millis(e.Start), newStart)
	}
	if e := got[recreated]; e.Start == nil || *e.Start != newStart {
		t.Errorf("got %s starting at %s, want it indexed again at %d: it came back with its event after the HEAD that found it gone", recreated, millis(e.Start), newStart)
	}
	l.equalsS3(t)
	if want := (logindex.Drift{Added: 18}); *runs[0].Drift != want {
		t.Errorf("got drift %+v, want %+v: what the events did is no drift", *runs[0].Drift, want)
	}
}

func TestAnInterruptedReconciliationResumesWithoutRedoingFinishedBatches(t *testing.T) {
	l := newLogs(t, "rcresume")
	keys := l.keys(0, 420) // 5 batches of at most 100
	l.upload(t, keys...)
	path := t.TempDir() + "/journal.jsonl"

	journal, err := statemachine.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	m := machine(t, nil)
	batchesOf(t, m, 100)
	m.Journal = journal
	ctx, interrupt := context.WithCancel(t.Context())
	_, first, err := reconcile.Run(ctx, m, reconcile.Input(l.bucket, l.prefix()), func(t reconcile.Totals) {
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
	batchesOf(t, m, 100)
	m.Journal = journal
	var invocations atomic.Int64
	invoke := m.Invoke
	m.Invoke = func(ctx context.Context, fn string, payload json.RawMessage) (json.RawMessage, error) {
		invocations.Add(1)
		return invoke(ctx, fn, payload)
	}
	runs, second, err := reconcile.Run(t.Context(), m, reconcile.Input(l.bucket, l.prefix()), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The batches not done before, and Finish; not Begin, whose start
	// the finished batches were run with.
	if want := int64(5 - first.Batches + 1); second.Batches != 5 || second.Earlier != first.Batches || invocations.Load() != want {
		t.Errorf("got %s after %d invocations, want the %d batches not done before run, and only those, then Finish", second, invocations.Load(), 5-first.Batches)
	}
	if second.Added != int64(len(keys)) || runs[0].Drift.Added != int64(len(keys)) {
		t.Errorf("got %d added in the batches, %+v in the run, want %d", second.Added, runs[0].Drift, len(keys))
	}
	l.equalsS3(t)
}

func TestABucketIsCompleteOnlyOnceAReconciliationOfItAllRanWithItsNotificationsOn(t *testing.T) {
	complete := func(t *testing.T) bool {
		t.Helper()
		got, err := table().Complete(t.Context(), local.LogBuckets)
		if err != nil {
			t.Fatal(err)
		}
		return got[local.LogBuckets[0]]
	}
	all := func(t *testing.T) logindex.Run {
		t.Helper()
		runs, _, err := reconcile.Run(t.Context(), machine(t, nil), reconcile.Input("", ""), nil)
		if err != nil || len(runs) != len(local.LogBuckets) {
			t.Fatalf("got %+v, %v, want a run of each of %v", runs, err, local.LogBuckets)
		}
		return runs[0]
	}
	notifications(t, false)
	if run := all(t); run.Complete || run.Events || complete(t) {
		t.Errorf("got %+v, want the bucket not complete: its notifications are off", run)
	}
	notifications(t, true)
	defer notifications(t, false)
	if complete(t) {
		t.Error("got the bucket complete as soon as its notifications were on, want it so once reconciled")
	}
	if run := all(t); !run.Complete || !run.Events || !complete(t) {
		t.Errorf("got %+v, want the bucket complete: reconciled whole with its notifications on", run)
	}
	notifications(t, false)
	if run := all(t); run.Complete || complete(t) {
		t.Errorf("got %+v, want the bucket no longer complete: its notifications were turned off", run)
	}
}

func TestABucketWithoutNotificationsIsAnsweredByListing(t *testing.T) {
	// Two log buckets: the first's events are delivered, the second's
	// notifications were never turned on (one forgotten checkbox).
	second := "rc-unnotified"
	if err := stack.CreateBuckets(t.Context(), local.S3, second); err != nil {
		t.Fatal(err)
	}
	deliver(t)
	l := newLogs(t, "rcholes")
	first := l.keys(0, 13)
	l.upload(t, first...) // indexed by their events
	if err := local.WaitLogEvents(t.Context()); err != nil {
		t.Fatal(err)
	}
	other := logs{bucket: second, task: l.task}
	other.upload(t, other.keys(100, 9)...)
	if _, _, err := reconcile.Run(t.Context(), machine(t, nil), reconcile.Input(l.bucket, ""), nil); err != nil {
		t.Fatal(err)
	}

	env, err := local.Template.FunctionEnv("LogsFunction", stack.LocalName)
	if err != nil {
		t.Fatal(err)
	}
	env["LOG_BUCKETS"], env["AUTH_MODE"] = l.bucket+","+second, "none"
	h, err := logsapp.New(t.Context(), func(name string) string { return env[name] }, logsapp.Options{S3: local.S3, DynamoDB: local.DynamoDB})
	if err != nil {
		t.Fatal(err)
	}
	window := "start=1793487600000&end=1793498400000"
	for name, r := range map[string]*http.Request{
		"request lookup": httptest.NewRequest("GET", "/api/logs/request/rcholes?list=true&"+window, nil),
		"search": httptest.NewRequest("POST", "/api/logs/search", strings.NewReader(
			`{"requestsAndDeploys":{"rcholes":[]},"maxPerPage":100,"listOnly":true,"start":1793487600000,"end":1793498400000}`)),
	} {
		t.Run(name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			var got []struct{ Key string }
			body := w.Body.Bytes()
			if name == "search" {
				var page struct{ Results []struct{ Key string } }
				err = json.Unmarshal(body, &page)
				got = page.Results
			} else {
				err = json.Unmarshal(body, &got)
			}
			if w.Code != 200 || err != nil || len(got) != 22 {
				t.Errorf("got %d, %d logs (%v): %.300s, want all 22 of both buckets", w.Code, len(got), err, body)
			}
			if got := w.Header().Get(logroutes.IndexBucketsHeader); got != l.bucket {
				t.Errorf("got %s %q, want %q: the second bucket was listed", logroutes.IndexBucketsHeader, got, l.bucket)
			}
		})
	}
}

func TestAReconciliationOfAnotherBucketIsRefused(t *testing.T) {
	key := "rcother/2026/11/x"
	if _, err := local.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: &local.ReportsBucket, Key: &key, Body: strings.NewReader("{}")}); err != nil {
		t.Fatal(err)
	}
	_, totals, err := reconcile.Run(t.Context(), machine(t, nil), reconcile.Input(local.ReportsBucket, "rcother/"), nil)
	if err == nil || !strings.Contains(err.Error(), "not one of LOG_BUCKETS") || totals.Batches != 0 {
		t.Errorf("got %s, %v; want the execution failed by its refused first step", totals, err)
	}
}

func millis(p *int64) string {
	if p == nil {
		return "no time"
	}
	return fmt.Sprint(*p)
}
