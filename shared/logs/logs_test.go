package logs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/web"
)

// fakeStore is S3 in memory: buckets of keys kept sorted, as S3 lists them.
type fakeStore struct {
	buckets map[string][]logkey.Object
	block   bool // every call waits for its context to end
	mu      sync.Mutex
	left    time.Duration // the most time a blocked call's context had left when called
	heads   atomic.Int64
	lists   atomic.Int64
	times   map[string][2]*int64 // metadata start and end times by key; else the minute up to the last modification
}

func (f *fakeStore) add(bucket, key string, modified time.Time) {
	if f.buckets == nil {
		f.buckets = map[string][]logkey.Object{}
	}
	objs := append(f.buckets[bucket], logkey.Object{Bucket: bucket, Key: key, LastModified: modified.UnixMilli(), Size: int64(len(key))})
	slices.SortFunc(objs, func(a, b logkey.Object) int { return strings.Compare(a.Key, b.Key) })
	f.buckets[bucket] = objs
}

func (f *fakeStore) wait(ctx context.Context) error {
	if f.block {
		if deadline, ok := ctx.Deadline(); ok {
			f.mu.Lock()
			f.left = max(f.left, time.Until(deadline))
			f.mu.Unlock()
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeStore) All(ctx context.Context, bucket, prefix string) ([]logkey.Object, error) {
	objs, _, err := f.Page(ctx, bucket, prefix, "", 1<<30)
	return objs, err
}

func (f *fakeStore) Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error) {
	f.lists.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, false, err
	}
	var out []logkey.Object
	for _, o := range f.buckets[bucket] {
		if strings.HasPrefix(o.Key, prefix) && o.Key > after {
			if len(out) == limit {
				return out, false, nil
			}
			out = append(out, o)
		}
	}
	return out, true, nil
}

func (f *fakeStore) Times(ctx context.Context, bucket, key string) (*int64, *int64, error) {
	f.heads.Add(1)
	if err := f.wait(ctx); err != nil {
		return nil, nil, err
	}
	if t, ok := f.times[key]; ok {
		return t[0], t[1], nil
	}
	// A log written for a minute up to its last modification.
	for _, o := range f.buckets[bucket] {
		if o.Key == key {
			start, end := o.LastModified-60_000, o.LastModified
			return &start, &end, nil
		}
	}
	return nil, nil, nil
}

func (f *fakeStore) Links(ctx context.Context, bucket, key string, ttl time.Duration) (string, string, error) {
	return "https://" + bucket + ".example/" + key + "?ttl=" + ttl.String(), "https://" + bucket + ".example/" + key + "?download", nil
}

func settings(buckets ...string) logs.Config {
	f, _ := logkey.ParseFormat(logkey.DefaultFormat)
	return logs.Config{Buckets: buckets, Format: f, URLTTL: time.Hour, Lookback: 30 * 24 * time.Hour,
		ListTimeout: 5 * time.Second, LinkTimeout: 2 * time.Second}
}

type result struct {
	status int
	body   string
	header http.Header
}

func serve(t *testing.T, h http.Handler, method, path, body string) result {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return result{rec.Code, rec.Body.String(), rec.Header()}
}

func (r result) wantError(t *testing.T, status int, message string) {
	t.Helper()
	want, _ := json.Marshal(web.ErrorBody{Code: status, Message: message})
	want = append(want, '\n') // an error body is one line, ended
	if r.status != status || r.body != string(want) {
		t.Errorf("got %d %s, want %d %s", r.status, r.body, status, want)
	}
}

type logEntry struct {
	Key          string `json:"key"`
	LastModified int64  `json:"lastModified"`
	StartTime    *int64 `json:"startTime"`
	GetURL       string `json:"getUrl"`
	DownloadURL  string `json:"downloadUrl"`
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("got %d %s, want 200", r.status, r.body)
	}
	var v T
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return v
}

var (
	taskStart = time.Date(2026, 10, 30, 22, 0, 0, 0, time.UTC)
	taskID    = fmt.Sprintf("web-api-d1-%d-0-node1-rack1", taskStart.UnixMilli())
	other     = fmt.Sprintf("web-api-d2-%d-0-node2-rack1", taskStart.UnixMilli())
)

// uploaded writes the keys an uploader writes for task, one file per day
// from the task's start, in bucket.
func uploaded(f *fakeStore, bucket, task string, days int) []string {
	format, _ := logkey.ParseFormat(logkey.DefaultFormat)
	t, _ := logkey.ParseTaskID(task)
	var keys []string
	for i := range days {
		at := time.UnixMilli(t.StartedAt).Add(time.Duration(i)*24*time.Hour + time.Minute)
		key := format.Key(logkey.File{Task: t, Filename: bucket + ".log", Index: i, Modified: at})
		f.add(bucket, key, at)
		keys = append(keys, key)
	}
	return keys
}

// handler serves the log routes over store, as the function does, with
// the clock five days after taskStart; every answer must match
// openapi.yaml.
func handler(t testing.TB, store logs.Store, cfg logs.Config) http.Handler {
	return apidoc.MustLoad(t).Recorder(t, routes(store, cfg))
}

// routes is handler without the check of its answers, for the fuzz target,
// which checks each answer itself.
func routes(store logs.Store, cfg logs.Config) http.Handler {
	h := logs.New(store, cfg)
	logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
	return web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// recordingStore is fakeStore recording every listing (bucket/prefix) and
// the lifetime asked of every presigned link.
type recordingStore struct {
	*fakeStore
	mu     sync.Mutex
	listed []string
	ttls   []time.Duration
}

func newRecordingStore() *recordingStore { return &recordingStore{fakeStore: &fakeStore{}} }

func (r *recordingStore) record(bucket, prefix string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listed = append(r.listed, bucket+"/"+prefix)
}

func (r *recordingStore) All(ctx context.Context, bucket, prefix string) ([]logkey.Object, error) {
	r.record(bucket, prefix)
	return r.fakeStore.All(ctx, bucket, prefix)
}

func (r *recordingStore) Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error) {
	r.record(bucket, prefix)
	return r.fakeStore.Page(ctx, bucket, prefix, after, limit)
}

func (r *recordingStore) Links(ctx context.Context, bucket, key string, ttl time.Duration) (string, string, error) {
	r.mu.Lock()
	r.ttls = append(r.ttls, ttl)
	r.mu.Unlock()
	return r.fakeStore.Links(ctx, bucket, key, ttl)
}

// calls counts every S3 call made so far.
func (r *recordingStore) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.listed) + len(r.ttls) + int(r.heads.Load())
}

// untouched fails when the store was called at all.
func (r *recordingStore) untouched(t *testing.T) {
	t.Helper()
	if n := r.calls(); n != 0 {
		t.Errorf("a refused request made %d S3 calls (listed %v)", n, r.listed)
	}
}

// wantJSONError checks a JSON error {"code": status, "message": ...} whose
// message starts with prefix, with the log routes' Cache-Control.
func (r result) wantJSONError(t *testing.T, status int, prefix string) {
	t.Helper()
	r.wantJSONErrorBody(t, status, prefix)
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("got Cache-Control %q, want no-store", cc)
	}
}

// wantJSONErrorBody is wantJSONError without the Cache-Control check.
func (r result) wantJSONErrorBody(t *testing.T, status int, prefix string) {
	t.Helper()
	var e web.ErrorBody
	if r.status != status || json.Unmarshal([]byte(r.body), &e) != nil || e.Code != status || !strings.HasPrefix(e.Message, prefix) {
		t.Fatalf("got %d %s, want %d {\"code\":%d,\"message\":\"%s...\"}", r.status, r.body, status, status, prefix)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
}

// logRoutes are the four log routes with a valid target, for the task
// taskID of request web-api.
var logRoutes = [][2]string{
	{"GET", "/api/logs/task/" + taskID},
	{"GET", "/api/logs/request/web-api"},
	{"GET", "/api/logs/request/web-api/deploy/d1"},
	{"POST", "/api/logs/search"},
}
