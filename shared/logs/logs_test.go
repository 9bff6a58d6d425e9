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
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/web"
)

// fakeStore is S3 in memory: buckets of keys kept sorted, as S3 lists them.
type fakeStore struct {
	buckets map[string][]logkey.Object
	block   bool // every call waits for its context to end
	heads   atomic.Int64
	lists   atomic.Int64
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
	start, end := int64(1), int64(2)
	return &start, &end, nil
}

func (f *fakeStore) Links(ctx context.Context, bucket, key string, ttl time.Duration) (string, string, error) {
	return "https://" + bucket + ".example/" + key + "?ttl=" + ttl.String(), "https://" + bucket + ".example/" + key + "?download", nil
}

func settings(buckets ...string) config.Logs {
	f, _ := logkey.ParseFormat(logkey.DefaultFormat)
	return config.Logs{Buckets: buckets, Format: f, URLTTL: time.Hour, Lookback: 30 * 24 * time.Hour,
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
func handler(t testing.TB, store logs.Store, cfg config.Logs) http.Handler {
	return apidoc.MustLoad(t).Recorder(t, routes(store, cfg))
}

// routes is handler without the check of its answers, for the fuzz target,
// which checks each answer itself.
func routes(store logs.Store, cfg config.Logs) http.Handler {
	h := logs.New(store, cfg)
	logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
	return web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func TestTaskLookupReturnsTheTasksLogsNewestFirstWithLinks(t *testing.T) {
	f := &fakeStore{}
	want := append(uploaded(f, "logs-a", taskID, 3), uploaded(f, "logs-b", taskID, 2)...)
	uploaded(f, "logs-a", other, 3)
	uploaded(f, "not-configured", taskID, 3)
	r := serve(t, handler(t, f, settings("logs-a", "logs-b")), "GET", "/api/logs/task/"+taskID, "")
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", cc)
	}
	got := decode[[]logEntry](t, r)
	var keys []string
	for i, e := range got {
		keys = append(keys, e.Key)
		if i > 0 && e.LastModified > got[i-1].LastModified {
			t.Errorf("got %s after an older entry, want newest first", e.Key)
		}
		if e.GetURL == "" || e.DownloadURL == "" || e.StartTime == nil {
			t.Errorf("got %+v, want URLs and start time", e)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(want))) {
		t.Errorf("got keys %v, want %v", keys, want)
	}
}

func TestLookupFlagsLeaveOutMetadataAndLinks(t *testing.T) {
	f := &fakeStore{}
	uploaded(f, "logs", taskID, 2)
	h := handler(t, f, settings("logs"))
	got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/task/"+taskID+"?excludeMetadata=true&list=TRUE", ""))
	if len(got) != 2 || f.heads.Load() != 0 {
		t.Fatalf("got %d entries and %d HEADs, want 2 and none", len(got), f.heads.Load())
	}
	for _, e := range got {
		if e.GetURL != "" || e.DownloadURL != "" || e.StartTime != nil {
			t.Errorf("got %+v, want key, time and size only", e)
		}
	}
	got = decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/task/"+taskID+"?list=yes", ""))
	if got[0].GetURL == "" {
		t.Errorf("list=yes: got no URL, want URLs (only true means true)")
	}
}

func TestRequestAndDeployLookups(t *testing.T) {
	f := &fakeStore{}
	mine := uploaded(f, "logs", taskID, 3)
	theirs := uploaded(f, "logs", other, 2)
	h := handler(t, f, settings("logs"))
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web-api", "")); len(got) != len(mine)+len(theirs) {
		t.Errorf("request lookup: got %d entries, want %d", len(got), len(mine)+len(theirs))
	}
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web-api/deploy/d1", "")); len(got) != len(mine) {
		t.Errorf("deploy lookup: got %d entries, want %d", len(got), len(mine))
	}
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web-api?maxPerPage=2", "")); len(got) != 2 || got[0].Key != theirs[1] && got[0].Key != mine[2] {
		t.Errorf("maxPerPage=2: got %+v, want the 2 newest", got)
	}
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web", "")); len(got) != 0 {
		t.Errorf("request web: got %d entries, want none of web-api's", len(got))
	}
}

func TestLookupRejectsBadInput(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs"))
	tests := []struct {
		name, path string
		status     int
		message    string
	}{
		{"a task id with too few parts", "/api/logs/task/web-api-d1", 400, "web-api-d1 is not a valid task id"},
		{"a task id with a slash", "/api/logs/task/web%2F..-d1-1-0-h-r", 400, "web/..-d1-1-0-h-r is not a valid task id"},
		{"a request id with a percent sign", "/api/logs/request/web%25Y", 400, "web%Y is not a valid request id"},
		{"a deploy id with a dash", "/api/logs/request/web/deploy/d-1", 400, "d-1 is not a valid deploy id"},
		{"a start that is not 13 digits", "/api/logs/request/web?start=12345", 400, `start must be a time in epoch milliseconds (13 digits), got "12345"`},
		{"an end that overflows", "/api/logs/request/web?end=99999999999999999999", 400, `end must be a time in epoch milliseconds (13 digits), got "99999999999999999999"`},
		{"a zero maxPerPage", "/api/logs/request/web?maxPerPage=0", 400, `maxPerPage must be a whole number ≥ 1, got "0"`},
		{"an unknown route", "/api/logs/nothing", 404, "Not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := serve(t, h, "GET", tt.path, "")
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.status == 400 {
				r.wantError(t, tt.status, tt.message)
			}
		})
	}
}

func TestLookupOfTooManyPrefixesIsRefused(t *testing.T) {
	cfg := settings("logs")
	cfg.Format, _ = logkey.ParseFormat("%requestId/%Y/%m/%d/%H/%taskId_%index")
	h := handler(t, &fakeStore{}, cfg)
	hours84Days := taskStart.Add(5*24*time.Hour - 84*24*time.Hour).UnixMilli() // 2,016 hours before the test's now
	serve(t, h, "GET", fmt.Sprintf("/api/logs/request/web?start=%d", hours84Days), "").
		wantError(t, 400, "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests")
	if r := serve(t, h, "GET", fmt.Sprintf("/api/logs/request/web?start=%d", hours84Days+4*24*3600*1000), ""); r.status != 200 { // 80 days
		t.Errorf("four days less: got %d %s, want 200", r.status, r.body)
	}
}

func TestLookupWithoutBucketsIsNotFound(t *testing.T) {
	serve(t, handler(t, &fakeStore{}, settings()), "GET", "/api/logs/task/"+taskID, "").wantError(t, 404, "S3 configuration was absent")
	serve(t, handler(t, &fakeStore{}, settings()), "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"]}`).wantError(t, 404, "S3 configuration was absent")
}

func TestSlowS3AnswersGatewayTimeout(t *testing.T) {
	cfg := settings("logs")
	cfg.ListTimeout, cfg.LinkTimeout = 50*time.Millisecond, 50*time.Millisecond
	start := time.Now()
	serve(t, handler(t, &fakeStore{block: true}, cfg), "GET", "/api/logs/task/"+taskID, "").
		wantError(t, 504, "Timed out waiting for response from S3 for "+taskID)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v, want about the list timeout", took)
	}
}

func TestAuthorizerModeNeedsAReadGroup(t *testing.T) {
	cfg := settings("logs")
	cfg.Policy = access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admins"}, ReadGroups: []string{"readers"}}
	h := handler(t, &fakeStore{}, cfg)
	call := func(groups ...string) int {
		req := httptest.NewRequest("GET", "/api/logs/task/"+taskID, nil)
		if groups != nil {
			req = req.WithContext(access.WithIdentity(req.Context(), access.Identity{ID: "u", Groups: groups}))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := call(); got != 401 {
		t.Errorf("no identity: got %d, want 401", got)
	}
	if got := call("others"); got != 403 {
		t.Errorf("not a reader: got %d, want 403", got)
	}
	if got := call("readers"); got != 200 {
		t.Errorf("a reader: got %d, want 200", got)
	}
}

type page struct {
	ContinuationTokens map[string]json.RawMessage `json:"continuationTokens"`
	LastPage           bool                       `json:"lastPage"`
	Results            []logEntry                 `json:"results"`
}

// follow runs the search page by page, sending back the tokens, and returns
// every key returned and the pages.
func follow(t *testing.T, h http.Handler, body map[string]any) ([]string, []page) {
	t.Helper()
	var keys []string
	var pages []page
	for range 1000 {
		raw, _ := json.Marshal(body)
		p := decode[page](t, serve(t, h, "POST", "/api/logs/search", string(raw)))
		pages = append(pages, p)
		for _, e := range p.Results {
			keys = append(keys, e.Key)
		}
		if p.LastPage {
			return keys, pages
		}
		body["continuationTokens"] = p.ContinuationTokens
	}
	t.Fatal("search never reached its last page")
	return nil, nil
}

func TestSearchPagesReturnEveryObjectExactlyOnce(t *testing.T) {
	f := &fakeStore{}
	var want []string
	for i := range 6 {
		start := taskStart.Add(time.Duration(i) * -20 * 24 * time.Hour) // tasks started over 4 months
		id := fmt.Sprintf("web-api-d%d-%d-%d-node%d-rack1", i%2, start.UnixMilli(), i, i)
		want = append(want, uploaded(f, "logs-a", id, 25+i)...)
		want = append(want, uploaded(f, "logs-b", id, 10)...)
	}
	uploaded(f, "logs-a", "other-d1-1-0-h-r", 5)
	h := handler(t, f, settings("logs-a", "logs-b"))
	for _, per := range []int{1, 7, 10, 64, 1000} {
		t.Run(fmt.Sprintf("%d per page", per), func(t *testing.T) {
			start := taskStart.Add(-110 * 24 * time.Hour).UnixMilli()
			keys, pages := follow(t, h, map[string]any{"requestsAndDeploys": map[string][]string{"web-api": {}}, "maxPerPage": per, "start": start, "listOnly": true})
			for i, p := range pages {
				if len(p.Results) > per {
					t.Errorf("page %d: got %d results, want at most %d", i, len(p.Results), per)
				}
			}
			if len(keys) != len(want) {
				t.Errorf("got %d keys over %d pages, want %d", len(keys), len(pages), len(want))
			}
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					t.Errorf("got %s twice", k)
				}
				seen[k] = true
			}
			for _, k := range want {
				if !seen[k] {
					t.Errorf("never got %s", k)
				}
			}
		})
	}
}

func TestSearchByTasksAndDeploys(t *testing.T) {
	f := &fakeStore{}
	mine := uploaded(f, "logs", taskID, 3)
	theirs := uploaded(f, "logs", other, 2)
	h := handler(t, f, settings("logs"))
	keys, _ := follow(t, h, map[string]any{"taskIds": []string{taskID}, "requestsAndDeploys": map[string][]string{"web-api": {"d2"}}})
	if len(keys) != len(mine)+len(theirs) {
		t.Errorf("got %d keys, want %d", len(keys), len(mine)+len(theirs))
	}
	// The older field name wins when both are sent.
	keys, _ = follow(t, h, map[string]any{"taskIds": []string{taskID}, "fileNamePrefixWhitelist": []string{"web-api/"}, "fileNamePrefixAllowlist": []string{"nothing"}})
	if len(keys) != len(mine) {
		t.Errorf("allowlisted: got %d keys, want %d", len(keys), len(mine))
	}
}

func TestSearchRejectsBadRequests(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs"))
	tests := []struct{ name, body, message string }{
		{"no body", "", "Must specify at least one request or task to search"},
		{"nothing to search", `{"taskIds":[],"requestsAndDeploys":{}}`, "Must specify at least one request or task to search"},
		{"too large a page", `{"taskIds":["` + taskID + `"],"maxPerPage":1001}`, "maxPerPage must be between 1 and 1000, got 1001"},
		{"a bad task id", `{"taskIds":["nope"]}`, "nope is not a valid task id"},
		{"a request id escaping its prefix", `{"requestsAndDeploys":{"../x":[]}}`, "../x is not a valid request id"},
		{"a start of the wrong type", `{"taskIds":["` + taskID + `"],"start":"yesterday"}`, "request body field start must be a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := serve(t, h, "POST", "/api/logs/search", tt.body)
			if r.status != 400 || !strings.Contains(r.body, tt.message) {
				t.Errorf("got %d %s, want 400 with %q", r.status, r.body, tt.message)
			}
		})
	}
}

func TestSearchWithNoPrefixesIsTheLastPage(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs"))
	end := taskStart.Add(-time.Hour).UnixMilli() // before the task started: an empty window
	p := decode[page](t, serve(t, h, "POST", "/api/logs/search", fmt.Sprintf(`{"taskIds":[%q],"end":%d}`, taskID, end)))
	if !p.LastPage || len(p.Results) != 0 {
		t.Errorf("got %+v, want an empty last page", p)
	}
}
