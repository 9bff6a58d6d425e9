//go:build integration

package logs_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/apitest"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// The two buckets of LOG_BUCKETS, a bucket holding logs of the same tasks
// that no lookup may return, and a bucket that is configured but was never
// created.
const (
	bucketA       = "task-logs-a"
	bucketB       = "task-logs-b"
	bucketOutside = "task-logs-elsewhere"
	bucketMissing = "task-logs-missing"
)

var (
	// liveNow is the handler's clock, after every upload, so that the
	// windows of the lookups do not move with the day the tests run.
	liveNow = time.Date(2027, 2, 20, 12, 0, 0, 0, time.UTC)
	// liveSince is the start given to request and deploy lookups that should
	// cover every month of the data.
	liveSince = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
)

// liveTask is a task whose uploader wrote files spread over span, the given
// number in each bucket.
type liveTask struct {
	request, deploy string
	started         time.Time
	instance        int
	host            string
	span            time.Duration
	files           map[string]int
}

func (lt liveTask) id() string {
	return fmt.Sprintf("%s-%s-%d-%d-%s-us1a", lt.request, lt.deploy, lt.started.UnixMilli(), lt.instance, lt.host)
}

// liveTasks are 6 tasks of two requests, one of whose ids starts with the
// other's, and of deploys d1 and d12, whose ids share a start, over five
// months that cross a year.
var liveTasks = []liveTask{
	{"pay-api", "d1", time.Date(2026, 10, 5, 8, 0, 0, 0, time.UTC), 0, "node1", 30 * 24 * time.Hour, map[string]int{bucketA: 40, bucketB: 20, bucketOutside: 3}},
	{"pay-api", "d1", time.Date(2026, 12, 20, 9, 30, 0, 0, time.UTC), 1, "node2", 30 * 24 * time.Hour, map[string]int{bucketA: 40, bucketB: 20}},
	{"pay-api", "d12", time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), 0, "node3", 30 * 24 * time.Hour, map[string]int{bucketA: 30, bucketB: 20}},
	{"pay-api", "d12", time.Date(2027, 1, 25, 6, 0, 0, 0, time.UTC), 0, "node4", 25 * 24 * time.Hour, map[string]int{bucketA: 30, bucketB: 20}},
	{"pay", "d1", time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC), 0, "node5", 25 * 24 * time.Hour, map[string]int{bucketA: 25, bucketB: 15}},
	{"pay", "d2", time.Date(2027, 1, 2, 18, 0, 0, 0, time.UTC), 0, "node6", 35 * 24 * time.Hour, map[string]int{bucketA: 25, bucketB: 15}},
}

// liveObject is one uploaded log file.
type liveObject struct {
	bucket, key, body string
	task              logkey.Task
	modified          time.Time
	start, end        int64 // the starttime and endtime metadata
}

var (
	liveServer  *stack.MinIO
	liveClient  *s3.Client      // uploads and counted calls, outside the store
	liveStore   *logstore.Store // built from the environment, as the function builds it
	liveObjects []liveObject    // in the configured buckets
	liveByKey   = map[string]liveObject{}
)

// TestMain starts MinIO, which verifies signatures, points the SDK at it
// through its own environment variables, and uploads the logs of liveTasks
// the way an uploader writes them.
func TestMain(m *testing.M) {
	os.Exit(liveRun(m))
}

func liveRun(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	liveServer, err = stack.UpMinIO(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer liveServer.Stop()

	liveClient = stack.S3Client(liveServer.Endpoint, liveServer.AccessKey, liveServer.SecretKey)
	if err := stack.CreateBuckets(ctx, liveClient, bucketA, bucketB, bucketOutside); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := liveUpload(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	liveStore, err = logstore.Open(ctx, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		code = apidoc.Exercised("/api/logs")
	}
	return code
}

// liveUpload puts every file of liveTasks, a few at a time. File names differ
// by bucket, so that a key alone says which bucket it is in.
func liveUpload(ctx context.Context) error {
	format, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		return err
	}
	var all []liveObject
	for _, lt := range liveTasks {
		task, err := logkey.ParseTaskID(lt.id())
		if err != nil {
			return err
		}
		for _, b := range []string{bucketA, bucketB, bucketOutside} {
			n := lt.files[b]
			for i := range n {
				at := lt.started.Add(time.Minute + lt.span*time.Duration(i)/time.Duration(n))
				key := format.Key(logkey.File{Task: task, Filename: "service-" + strings.TrimPrefix(b, "task-logs-") + ".log", Index: i, Modified: at})
				all = append(all, liveObject{bucket: b, key: key, body: "log of " + key + "\n", task: task, modified: at,
					start: at.Add(-time.Hour).UnixMilli(), end: at.UnixMilli()})
			}
		}
	}
	todo := make(chan liveObject)
	errs := make(chan error, len(all))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for o := range todo {
				_, err := liveClient.PutObject(ctx, &s3.PutObjectInput{
					Bucket:   aws.String(o.bucket),
					Key:      aws.String(o.key),
					Body:     strings.NewReader(o.body),
					Metadata: map[string]string{"starttime": strconv.FormatInt(o.start, 10), "endtime": strconv.FormatInt(o.end, 10)},
				})
				if err != nil {
					errs <- fmt.Errorf("put s3://%s/%s: %w", o.bucket, o.key, err)
				}
			}
		})
	}
	for _, o := range all {
		todo <- o
	}
	close(todo)
	wg.Wait()
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.bucket == bucketOutside {
			continue
		}
		liveObjects = append(liveObjects, o)
		liveByKey[o.key] = o
	}
	return nil
}

// liveHandler serves the log routes over store as the function does, with
// the clock at liveNow; every answer must match openapi.yaml.
func liveHandler(t testing.TB, store logs.Store, cfg logs.Config) http.Handler {
	// settings' deadlines suit the fakes; MinIO on a busy machine may take
	// longer than them, and no test here is about them.
	cfg.ListTimeout, cfg.LinkTimeout = time.Minute, time.Minute
	h := logs.New(store, cfg)
	logs.SetClock(h, func() time.Time { return liveNow })
	return apidoc.MustLoad(t).Recorder(t, web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
}

// liveLog is one entry of a lookup; pointers tell absent fields apart.
type liveLog struct {
	Key          string  `json:"key"`
	LastModified int64   `json:"lastModified"`
	Size         int64   `json:"size"`
	StartTime    *int64  `json:"startTime"`
	EndTime      *int64  `json:"endTime"`
	GetURL       *string `json:"getUrl"`
	DownloadURL  *string `json:"downloadUrl"`
}

func liveLookup(t *testing.T, h http.Handler, path string) []liveLog {
	t.Helper()
	r := serve(t, h, "GET", path, "")
	if cc := r.header.Get("Cache-Control"); r.status == 200 && cc != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", cc)
	}
	return decode[[]liveLog](t, r)
}

// liveWant returns the keys of the uploaded objects that match.
func liveWant(match func(liveObject) bool) []string {
	var keys []string
	for _, o := range liveObjects {
		if match(o) {
			keys = append(keys, o.key)
		}
	}
	return keys
}

func ofTask(id string) func(liveObject) bool {
	return func(o liveObject) bool { return o.task.ID == id }
}

func ofRequest(id string) func(liveObject) bool {
	return func(o liveObject) bool { return o.task.RequestID == id }
}

func ofDeploy(request, deploy string) func(liveObject) bool {
	return func(o liveObject) bool { return o.task.RequestID == request && o.task.DeployID == deploy }
}

// sameKeys checks that got holds every key of want exactly once and nothing
// else.
func sameKeys(t *testing.T, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, k := range got {
		count[k]++
	}
	var missing, extra, twice []string
	for _, k := range want {
		if count[k] == 0 {
			missing = append(missing, k)
		}
	}
	for k, n := range count {
		if !slices.Contains(want, k) {
			extra = append(extra, k)
		}
		if n > 1 {
			twice = append(twice, k)
		}
	}
	if len(missing)+len(extra)+len(twice) > 0 {
		t.Errorf("got %d keys, want %d: missing %d %.3q, unexpected %d %.3q, repeated %d %.3q",
			len(got), len(want), len(missing), missing, len(extra), extra, len(twice), twice)
	}
}

func keysOf(entries []liveLog) []string {
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	return keys
}

func wantNewestFirst(t *testing.T, entries []liveLog) {
	t.Helper()
	for i := 1; i < len(entries); i++ {
		if entries[i].LastModified > entries[i-1].LastModified {
			t.Errorf("got %s (%d) after %s (%d), want newest first", entries[i].Key, entries[i].LastModified, entries[i-1].Key, entries[i-1].LastModified)
			return
		}
	}
}

// liveMillis formats t as a query value.
func liveMillis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func TestLiveTaskLookupReturnsExactlyTheTasksLogs(t *testing.T) {
	h := liveHandler(t, liveStore, settings(bucketA, bucketB))
	for _, lt := range liveTasks {
		t.Run(lt.id(), func(t *testing.T) {
			got := liveLookup(t, h, "/api/logs/task/"+lt.id())
			sameKeys(t, keysOf(got), liveWant(ofTask(lt.id())))
			wantNewestFirst(t, got)
			for _, e := range got {
				o, ok := liveByKey[e.Key]
				if !ok {
					continue // reported by sameKeys
				}
				if e.StartTime == nil || *e.StartTime != o.start || e.EndTime == nil || *e.EndTime != o.end {
					t.Errorf("%s: got start %v end %v, want %d and %d from its metadata", e.Key, e.StartTime, e.EndTime, o.start, o.end)
				}
				if e.Size != int64(len(o.body)) {
					t.Errorf("%s: got size %d, want %d", e.Key, e.Size, len(o.body))
				}
				at := liveServer.Endpoint + "/" + o.bucket + "/" + o.key + "?"
				if e.GetURL == nil || !strings.HasPrefix(*e.GetURL, at) || e.DownloadURL == nil || !strings.HasPrefix(*e.DownloadURL, at) {
					t.Errorf("%s: got URLs %v and %v, want both of %s", e.Key, e.GetURL, e.DownloadURL, at)
				}
			}
		})
	}
}

// rawClient sees responses as sent.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

type fetched struct {
	status int
	body   string
	header http.Header
}

func liveFetch(t *testing.T, u string) fetched {
	t.Helper()
	resp, err := rawClient.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fetched{resp.StatusCode, string(body), resp.Header}
}

// refused checks that S3 answered 403 with the error code want.
func (f fetched) refused(t *testing.T, want string) {
	t.Helper()
	var e struct{ Code, Message string }
	if f.status != http.StatusForbidden || xml.Unmarshal([]byte(f.body), &e) != nil || e.Code != want {
		t.Errorf("got %d %q, want 403 %s", f.status, f.body, want)
	}
}

func TestLivePresignedLinks(t *testing.T) {
	lt := liveTasks[1]
	got := liveLookup(t, liveHandler(t, liveStore, settings(bucketA, bucketB)), "/api/logs/task/"+lt.id()+"?excludeMetadata=true")
	var inA []liveLog
	for _, e := range got {
		if liveByKey[e.Key].bucket == bucketA {
			inA = append(inA, e)
		}
	}
	if len(inA) < 2 || len(inA) == len(got) {
		t.Fatalf("got %d entries, %d of them in %s, want entries of both buckets", len(got), len(inA), bucketA)
	}
	for _, e := range []liveLog{inA[0], got[len(got)-1]} {
		o := liveByKey[e.Key]
		t.Run("getUrl serves "+o.bucket+"/"+o.key, func(t *testing.T) {
			if f := liveFetch(t, *e.GetURL); f.status != 200 || f.body != o.body {
				t.Errorf("got %d %q, want 200 %q", f.status, f.body, o.body)
			}
		})
		t.Run("downloadUrl saves "+o.bucket+"/"+o.key, func(t *testing.T) {
			f := liveFetch(t, *e.DownloadURL)
			if f.status != 200 || f.body != o.body {
				t.Errorf("got %d %q, want 200 %q", f.status, f.body, o.body)
			}
			if cd := f.header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") {
				t.Errorf("got Content-Disposition %q, want an attachment", cd)
			}
		})
	}
	t.Run("a URL whose key was swapped for another existing key is refused", func(t *testing.T) {
		signed, target := inA[0], inA[1]
		tampered := strings.Replace(*signed.GetURL, "/"+signed.Key+"?", "/"+target.Key+"?", 1)
		if tampered == *signed.GetURL {
			t.Fatalf("got no key %s in %s", signed.Key, *signed.GetURL)
		}
		liveFetch(t, tampered).refused(t, "SignatureDoesNotMatch")
		if f := liveFetch(t, *target.GetURL); f.status != 200 {
			t.Errorf("the key's own URL: got %d %s, want 200", f.status, f.body)
		}
	})
}

// The old scheduler's log tools (logfetch, logcat) send the headers of
// their config file to every URL, the presigned links included. With the
// token in Authorization, S3 refuses every link; with the stack's
// AuthHeader set to another name, a LAMBDA_REQUEST authorizer finds the
// token there and S3 ignores the header it was not signed with.
func TestLiveOldToolsSendTheirHeaderToTheAPIAndTheLinks(t *testing.T) {
	const header = "X-Fleet-Token"
	srv := httptest.NewServer(apitest.RequestAuthorizer(header, apitest.TokenAuthorizer(header), liveHandler(t, liveStore, settings(bucketA))))
	defer srv.Close()
	lt := liveTasks[1]
	oldTool := func(name, value, u string) fetched {
		t.Helper()
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(name, value)
		resp, err := rawClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fetched{resp.StatusCode, string(body), resp.Header}
	}
	api := srv.URL + "/api/logs/task/" + lt.id() + "?excludeMetadata=true"
	if f := oldTool("Authorization", "Bearer "+apitest.AdminToken, api); f.status != http.StatusUnauthorized {
		t.Errorf("the token in Authorization: got %d %s, want API Gateway's 401 (the authorizer reads %s)", f.status, f.body, header)
	}
	if f := oldTool(header, "Bearer not-a-token", api); f.status != http.StatusUnauthorized {
		t.Errorf("an unknown token: got %d %s, want 401", f.status, f.body)
	}
	f := oldTool(header, "Bearer "+apitest.AdminToken, api)
	var got []liveLog
	if f.status != 200 || json.Unmarshal([]byte(f.body), &got) != nil || len(got) == 0 {
		t.Fatalf("got %d %s, want the task's logs", f.status, f.body)
	}
	o := liveByKey[got[0].Key]
	if f := oldTool(header, "Bearer "+apitest.AdminToken, *got[0].GetURL); f.status != 200 || f.body != o.body {
		t.Errorf("the link with the tool's header: got %d %q, want 200 %q", f.status, f.body, o.body)
	}
	// What the issue was: S3 takes a token in Authorization for a second
	// signature beside the link's own.
	if f := oldTool("Authorization", "Bearer "+apitest.AdminToken, *got[0].GetURL); f.status == 200 {
		t.Errorf("the link with an Authorization header: got 200, want S3 to refuse two kinds of authentication")
	}
}

func TestLiveExpiredLinksAreRefused(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	cfg := settings(bucketA, bucketB)
	cfg.URLTTL = ttl
	h := liveHandler(t, liveStore, cfg)
	// Each link is fetched once within its life, then after it. A machine
	// too busy to fetch it within its two seconds looks it up again: a
	// refusal counts only when the link had not expired yet.
	var e liveLog
	var signed time.Time
	for deadline := time.Now().Add(2 * time.Minute); ; {
		got := liveLookup(t, h, "/api/logs/task/"+liveTasks[4].id()+"?excludeMetadata=true")
		if len(got) == 0 {
			t.Fatal("got no entries")
		}
		e = got[0]
		get, download := liveQuery(t, *e.GetURL), liveQuery(t, *e.DownloadURL)
		if get.Get("X-Amz-Date") != download.Get("X-Amz-Date") || get.Get("X-Amz-Expires") != "2" || download.Get("X-Amz-Expires") != "2" {
			t.Errorf("got signed at %s for %ss and %s for %ss, want the same instant for 2s",
				get.Get("X-Amz-Date"), get.Get("X-Amz-Expires"), download.Get("X-Amz-Date"), download.Get("X-Amz-Expires"))
		}
		var err error
		if signed, err = time.Parse("20060102T150405Z", get.Get("X-Amz-Date")); err != nil {
			t.Fatal(err)
		}
		f := liveFetch(t, *e.GetURL)
		if f.status == 200 {
			break
		}
		if time.Now().Before(signed.Add(ttl)) || time.Now().After(deadline) {
			t.Fatalf("before expiry: got %d %s %v after signing, want 200", f.status, f.body, time.Since(signed))
		}
	}
	time.Sleep(time.Until(signed.Add(ttl + time.Second)))
	liveFetch(t, *e.GetURL).refused(t, "AccessDenied")
	liveFetch(t, *e.DownloadURL).refused(t, "AccessDenied")
}

func liveQuery(t *testing.T, u string) url.Values {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Query()
}

func TestLiveRequestAndDeployLookups(t *testing.T) {
	h := liveHandler(t, liveStore, settings(bucketA, bucketB))
	since := liveMillis(liveSince)
	dec, jan := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	// A log belongs to a window when its span, from its starttime to its
	// endtime, overlaps it.
	inWindow := func(match func(liveObject) bool, from, to time.Time) func(liveObject) bool {
		return func(o liveObject) bool { return match(o) && o.start < to.UnixMilli() && o.end >= from.UnixMilli() }
	}
	tests := []struct {
		name, path string
		match      func(liveObject) bool
	}{
		{"request pay-api over five months", "/api/logs/request/pay-api?start=" + since, ofRequest("pay-api")},
		{"request pay returns none of pay-api's", "/api/logs/request/pay?start=" + since, ofRequest("pay")},
		{"deploy d1 returns none of d12's", "/api/logs/request/pay-api/deploy/d1?start=" + since, ofDeploy("pay-api", "d1")},
		{"deploy d12", "/api/logs/request/pay-api/deploy/d12?start=" + since, ofDeploy("pay-api", "d12")},
		{"deploy d2 of request pay", "/api/logs/request/pay/deploy/d2?start=" + since, ofDeploy("pay", "d2")},
		{"a deploy that wrote nothing", "/api/logs/request/pay/deploy/d12?start=" + since, func(liveObject) bool { return false }},
		{"request pay-api in December 2026 only", "/api/logs/request/pay-api?start=" + liveMillis(dec) + "&end=" + liveMillis(jan),
			inWindow(ofRequest("pay-api"), dec, jan)},
		{"request pay-api across the new year, to the day", "/api/logs/request/pay-api?start=" + liveMillis(dec.Add(14*24*time.Hour)) + "&end=" + liveMillis(jan.Add(9*24*time.Hour)),
			inWindow(ofRequest("pay-api"), dec.Add(14*24*time.Hour), jan.Add(9*24*time.Hour))},
		{"request pay-api over the default lookback of 30 days", "/api/logs/request/pay-api", inWindow(ofRequest("pay-api"), liveNow.Add(-30*24*time.Hour), liveNow)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := liveLookup(t, h, tt.path)
			sameKeys(t, keysOf(got), liveWant(tt.match))
			wantNewestFirst(t, got)
		})
	}
}

func TestLiveLookupFlags(t *testing.T) {
	h := liveHandler(t, liveStore, settings(bucketA, bucketB))
	path := "/api/logs/request/pay?start=" + liveMillis(liveSince)
	want := liveWant(ofRequest("pay"))
	tests := []struct {
		query        string
		times, links bool
		shows        string
	}{
		{"", true, true, "all"},
		{"&list=true", true, false, "no URLs"},
		{"&excludeMetadata=true", false, true, "no times"},
		{"&list=TRUE&excludeMetadata=true", false, false, "key, lastModified and size only"},
	}
	for _, tt := range tests {
		t.Run(tt.query+" gives "+tt.shows, func(t *testing.T) {
			entries := decode[[]map[string]json.RawMessage](t, serve(t, h, "GET", path+tt.query, ""))
			if len(entries) != len(want) {
				t.Errorf("got %d entries, want %d", len(entries), len(want))
			}
			for _, e := range entries {
				for field, present := range map[string]bool{"key": true, "lastModified": true, "size": true,
					"startTime": tt.times, "endTime": tt.times, "getUrl": tt.links, "downloadUrl": tt.links} {
					if _, ok := e[field]; ok != present {
						t.Fatalf("got %v, want %s present: %v", e, field, present)
					}
					if string(e[field]) == "null" {
						t.Fatalf("got %s null in %v, want it omitted", field, e)
					}
				}
			}
		})
	}
}

func TestLiveMaxPerPageCapsEachBucket(t *testing.T) {
	h := liveHandler(t, liveStore, settings(bucketA, bucketB))
	path := "/api/logs/request/pay-api?start=" + liveMillis(liveSince)
	all := liveLookup(t, h, path+"&list=true&excludeMetadata=true")
	for _, n := range []int{1, 5, 1000} {
		t.Run(fmt.Sprintf("maxPerPage %d keeps the newest %d of each bucket", n, n), func(t *testing.T) {
			// all is sorted newest first, ties by bucket then key, as the
			// handler sorts, so the first n of each bucket are the newest.
			var want []string
			kept := map[string]int{}
			for _, e := range all {
				if b := liveByKey[e.Key].bucket; kept[b] < n {
					kept[b]++
					want = append(want, e.Key)
				}
			}
			got := liveLookup(t, h, fmt.Sprintf("%s&maxPerPage=%d", path, n))
			sameKeys(t, keysOf(got), want)
			wantNewestFirst(t, got)
		})
	}
}

func TestLiveSearchPagesReturnEveryObjectOnce(t *testing.T) {
	t.Parallel()
	h := liveHandler(t, liveStore, settings(bucketA, bucketB))
	tests := []struct {
		name string
		body map[string]any
		want []string
	}{
		{"a request, a deploy and a task of that request", map[string]any{
			"requestsAndDeploys": map[string][]string{"pay-api": {}, "pay": {"d1"}},
			"taskIds":            []string{liveTasks[0].id()},
			"start":              liveSince.UnixMilli(),
		}, liveWant(func(o liveObject) bool { return ofRequest("pay-api")(o) || ofDeploy("pay", "d1")(o) })},
		{"two tasks across the new year and a deploy", map[string]any{
			"requestsAndDeploys": map[string][]string{"pay": {"d2"}},
			"taskIds":            []string{liveTasks[1].id(), liveTasks[3].id()},
			"start":              liveSince.UnixMilli(),
		}, liveWant(func(o liveObject) bool {
			return ofTask(liveTasks[1].id())(o) || ofTask(liveTasks[3].id())(o) || ofDeploy("pay", "d2")(o)
		})},
	}
	for _, tt := range tests {
		for _, per := range []int{1, 7, 50} {
			t.Run(fmt.Sprintf("%s, %d per page", tt.name, per), func(t *testing.T) {
				body := map[string]any{"maxPerPage": per, "listOnly": per < 50}
				for k, v := range tt.body {
					body[k] = v
				}
				keys, pages := follow(t, h, body)
				sameKeys(t, keys, tt.want)
				for i, p := range pages {
					if len(p.Results) > per {
						t.Errorf("page %d: got %d results, want at most %d", i, len(p.Results), per)
					}
					if last := i == len(pages)-1; p.LastPage != last {
						t.Errorf("page %d of %d: got lastPage %v, want %v", i+1, len(pages), p.LastPage, last)
					}
					for k := range p.ContinuationTokens {
						if !strings.HasPrefix(k, "default-"+bucketA+"-") && !strings.HasPrefix(k, "default-"+bucketB+"-") {
							t.Errorf("page %d: got token %s, want default-<configured bucket>-<prefix>", i, k)
						}
					}
					for j := 1; j < len(p.Results); j++ {
						if p.Results[j].LastModified > p.Results[j-1].LastModified {
							t.Errorf("page %d: got %s after an older entry, want newest first", i, p.Results[j].Key)
						}
					}
					for _, e := range p.Results {
						withLinks := e.GetURL != "" && e.DownloadURL != "" && e.StartTime != nil
						if withLinks != (per == 50) {
							t.Errorf("page %d: got %+v, want URLs and start time only without listOnly", i, e)
							break
						}
					}
				}
				t.Logf("%d objects in %d pages", len(keys), len(pages))
			})
		}
	}
}

// Field names of a search match exactly: a field in another case is an
// unknown field, so it neither names what to search nor changes a page.
func TestLiveSearchFieldNamesInAnotherCaseAreUnknown(t *testing.T) {
	h := liveHandler(t, liveStore, settings(bucketA, bucketB))
	task := liveTasks[0].id()
	for _, body := range []string{
		fmt.Sprintf(`{"TaskIds":[%q]}`, task),
		fmt.Sprintf(`{"TASKIDS":[%q],"RequestsAndDeploys":{"pay-api":[]}}`, task),
	} {
		serve(t, h, "POST", "/api/logs/search", body).wantError(t, 400, "Must specify at least one request or task to search")
	}
	body := fmt.Sprintf(`{"taskIds":[%q],"start":%d,"MaxPerPage":1,"ListOnly":true,"ExcludeMetadata":true}`, task, liveSince.UnixMilli())
	p := decode[page](t, serve(t, h, "POST", "/api/logs/search", body))
	if len(p.Results) != 10 {
		t.Fatalf("got %d results, want the default page of 10", len(p.Results))
	}
	for _, e := range p.Results {
		if e.GetURL == "" || e.DownloadURL == "" || e.StartTime == nil {
			t.Errorf("got %+v, want links and metadata", e)
		}
	}
}

// TestLiveMissingBucketLeavesTheOthersAnswering configures a bucket that
// S3 does not have beside one that it has: lookups answer what the existing
// bucket holds; with only missing buckets, a 500.
func TestLiveMissingBucketLeavesTheOthersAnswering(t *testing.T) {
	h := liveHandler(t, liveStore, settings(bucketMissing, bucketA))
	inA := func(match func(liveObject) bool) func(liveObject) bool {
		return func(o liveObject) bool { return o.bucket == bucketA && match(o) }
	}
	task := liveTasks[0].id()
	sameKeys(t, keysOf(liveLookup(t, h, "/api/logs/task/"+task+"?list=true")), liveWant(inA(ofTask(task))))
	sameKeys(t, keysOf(liveLookup(t, h, "/api/logs/request/pay?list=true&start="+liveMillis(liveSince))), liveWant(inA(ofRequest("pay"))))
	p := decode[page](t, serve(t, h, "POST", "/api/logs/search", fmt.Sprintf(`{"taskIds":[%q],"maxPerPage":1000,"listOnly":true}`, task)))
	var found []string
	for _, e := range p.Results {
		found = append(found, e.Key)
	}
	sameKeys(t, found, liveWant(inA(ofTask(task))))
	if !p.LastPage {
		t.Errorf("got lastPage false, want true: a missing bucket has nothing more to list")
	}

	none := liveHandler(t, liveStore, settings(bucketMissing))
	for _, r := range []result{
		serve(t, none, "GET", "/api/logs/task/"+task, ""),
		serve(t, none, "POST", "/api/logs/search", fmt.Sprintf(`{"taskIds":[%q],"maxPerPage":5}`, task)),
	} {
		if r.status != 500 || !strings.HasPrefix(r.body, `{"code":500,"message":"internal error (request `) {
			t.Errorf("got %d %s, want a 500 when no configured bucket exists", r.status, r.body)
		}
	}
}

// countingAPI counts the S3 calls the store makes.
type countingAPI struct {
	logstore.API
	lists, heads atomic.Int64
}

func (c *countingAPI) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c.lists.Add(1)
	return c.API.ListObjectsV2(ctx, in, opts...)
}

func (c *countingAPI) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c.heads.Add(1)
	return c.API.HeadObject(ctx, in, opts...)
}

// TestLiveS3CallsPerTaskLookup checks the cost of a task lookup: one
// ListObjectsV2 per month prefix and bucket (every prefix here holds fewer
// than 1,000 keys), one HEAD per result unless excludeMetadata, and no call
// for the links.
func TestLiveS3CallsPerTaskLookup(t *testing.T) {
	api := &countingAPI{API: liveClient}
	h := liveHandler(t, logstore.New(api, s3.NewPresignClient(liveClient)), settings(bucketA, bucketB))
	for _, lt := range liveTasks {
		months := (liveNow.Year()-lt.started.Year())*12 + int(liveNow.Month()-lt.started.Month()) + 1
		for _, query := range []string{"", "?excludeMetadata=true"} {
			api.lists.Store(0)
			api.heads.Store(0)
			start := time.Now()
			got := liveLookup(t, h, "/api/logs/task/"+lt.id()+query)
			took := time.Since(start)
			wantHeads := len(got)
			if query != "" {
				wantHeads = 0
			}
			if l, hd := api.lists.Load(), api.heads.Load(); l != int64(2*months) || hd != int64(wantHeads) {
				t.Errorf("task %s%s: got %d lists and %d HEADs, want %d and %d", lt.id(), query, l, hd, 2*months, wantHeads)
			}
			t.Logf("task lookup%s: %d months × 2 buckets, %d objects: %d ListObjectsV2, %d HeadObject, %v",
				query, months, len(got), api.lists.Load(), api.heads.Load(), took.Round(time.Millisecond))
		}
	}
}

// TestLiveSearchPageLatency reports how long one full search page takes over
// the whole data set; it asserts nothing about time.
func TestLiveSearchPageLatency(t *testing.T) {
	api := &countingAPI{API: liveClient}
	h := liveHandler(t, logstore.New(api, s3.NewPresignClient(liveClient)), settings(bucketA, bucketB))
	body := fmt.Sprintf(`{"requestsAndDeploys":{"pay-api":[],"pay":[]},"start":%d,"maxPerPage":50}`, liveSince.UnixMilli())
	var took []time.Duration
	for range 7 {
		api.lists.Store(0)
		api.heads.Store(0)
		start := time.Now()
		p := decode[page](t, serve(t, h, "POST", "/api/logs/search", body))
		took = append(took, time.Since(start))
		if len(p.Results) != 50 || p.LastPage {
			t.Fatalf("got %d results, lastPage %v, want a full first page of 50", len(p.Results), p.LastPage)
		}
	}
	slices.Sort(took)
	t.Logf("first search page of 50 with metadata and links over %d objects, 2 requests × 5 months × 2 buckets: min %v, median %v, max %v; %d ListObjectsV2, %d HeadObject a page",
		len(liveObjects), took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), api.lists.Load(), api.heads.Load())
}

// TestLiveLinksOfFileNamesThatNeedEscaping checks that the links of keys
// with spaces, reserved and non-ASCII characters are signed as S3 checks
// them, and that the download names the file.
func TestLiveLinksOfFileNamesThatNeedEscaping(t *testing.T) {
	ctx := context.Background()
	format, _ := logkey.ParseFormat(logkey.DefaultFormat)
	started := time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)
	task, err := logkey.ParseTaskID(fmt.Sprintf("names-d1-%d-0-node7-us1a", started.UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for i, name := range []string{"stdout (1).log", "a+b=c&d.log", "журнал.log", "100%.log", `semi;colon "quoted".log`} {
		key := format.Key(logkey.File{Task: task, Filename: name, Index: i, Modified: started.Add(time.Duration(i+1) * time.Hour)})
		bodies[key] = "body of " + name
		if _, err := liveClient.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucketA), Key: aws.String(key), Body: strings.NewReader(bodies[key])}); err != nil {
			t.Fatal(err)
		}
	}
	got := liveLookup(t, liveHandler(t, liveStore, settings(bucketA, bucketB)), "/api/logs/task/"+task.ID)
	if len(got) != len(bodies) {
		t.Fatalf("got %d entries, want %d", len(got), len(bodies))
	}
	for _, e := range got {
		name := path.Base(e.Key)
		t.Run(name[strings.LastIndexByte(name, '-')+1:], func(t *testing.T) {
			if e.StartTime != nil || e.EndTime != nil {
				t.Errorf("got times %v and %v, want none for an object without metadata", e.StartTime, e.EndTime)
			}
			if f := liveFetch(t, *e.GetURL); f.status != 200 || f.body != bodies[e.Key] {
				t.Errorf("getUrl: got %d %q, want 200 %q", f.status, f.body, bodies[e.Key])
			}
			f := liveFetch(t, *e.DownloadURL)
			if f.status != 200 || f.body != bodies[e.Key] {
				t.Errorf("downloadUrl: got %d %q, want 200 %q", f.status, f.body, bodies[e.Key])
			}
			cd := f.header.Get("Content-Disposition")
			if kind, params, err := mime.ParseMediaType(cd); err != nil || kind != "attachment" || params["filename"] != name {
				t.Errorf("got Content-Disposition %q, want an attachment named %q", cd, name)
			}
		})
	}
}
