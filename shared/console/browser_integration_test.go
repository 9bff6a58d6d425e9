//go:build integration

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/dev/apitest"
	"github.com/fleetops/fleet/dev/browser"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/machine"
)

// The browser tests drive the real console in Chromium against the real
// handlers: slaves over DynamoDB in moto, logs over MinIO (which signs and
// checks presigned URLs as S3 does), both behind the same mux as make run.

var (
	store    *dynamo.Store
	logStore *s3.Client       // MinIO, where the tests put task logs
	site     *httptest.Server // the API and the console
	noS3Site *httptest.Server // the same with no LOG_BUCKETS
	chrome   *browser.Browser
	shots    string // where screenshots go (bin/console-screenshots)
	quiet    = slog.New(slog.NewTextHandler(io.Discard, nil))
	limits   = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}
	faults   = &faultInjector{}
	changes  = &changeLog{}
)

const (
	logBucket = apitest.LogBucket
	logTask   = "web-api-v42-%d-0-node17-us_east_1a" // with its start time
	logFiles  = 120                                  // three pages of 50
)

var taskID string // logTask, started two hours before the tests

// siteAPI is the API and console that site serves, without the test's
// wrappers.
var siteAPI http.Handler

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	api, err := apitest.Up(ctx)
	if err != nil {
		return fail(err)
	}
	defer api.Close()
	logStore = api.S3
	if err := uploadLogs(ctx, api.S3); err != nil {
		return fail(err)
	}
	// The test seeds and reads the tables through the store itself.
	store = dynamo.New(api.Local.DynamoDB, stack.Tables, 90*24*time.Hour)
	for _, s := range []struct {
		site **httptest.Server
		env  map[string]string
	}{{&site, nil}, {&noS3Site, map[string]string{"LOG_BUCKETS": ""}}} {
		h, err := api.Handler(apitest.None, apitest.Options{Env: s.env, Console: true})
		if err != nil {
			return fail(err)
		}
		if s.env == nil {
			siteAPI = h
		}
		*s.site = httptest.NewServer(changes.wrap(faults.wrap(h)))
		defer (*s.site).Close()
	}

	root, err := stack.RepoRoot()
	if err != nil {
		return fail(err)
	}
	shots = filepath.Join(root, "bin", "console-screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		return fail(err)
	}
	chrome, err = browser.Start(context.Background())
	if err != nil {
		return fail(err)
	}
	defer chrome.Close()
	return m.Run()
}

// faultInjector lets a change through to the service and then answers 503
// instead of the service's answer, once: the answer lost on the way back
// that a client must retry with the same Idempotency-Key.
type faultInjector struct {
	mu    sync.Mutex
	armed bool
}

func (f *faultInjector) arm() { f.mu.Lock(); f.armed = true; f.mu.Unlock() }

func (f *faultInjector) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		fire := f.armed && r.Method == http.MethodPost
		if fire {
			f.armed = false
		}
		f.mu.Unlock()
		if !fire {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"code":503,"message":"DynamoDB is busy, try again"}`)
	})
}

// changeLog records the Idempotency-Key and the If-Match of every change
// the page sends.
type changeLog struct {
	mu      sync.Mutex
	keys    []string // "<method> <path> <key>"
	matches []string // "<method> <path> <If-Match>", in the same order
}

func (c *changeLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodDelete {
			c.mu.Lock()
			c.keys = append(c.keys, r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
			c.matches = append(c.matches, r.Method+" "+r.URL.Path+" "+r.Header.Get("If-Match"))
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (c *changeLog) since(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys[n:]...)
}

// matchesSince is the If-Match of each change since the nth.
func (c *changeLog) matchesSince(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.matches[n:]...)
}

func (c *changeLog) len() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.keys) }

// uploadLogs writes logFiles logs of one task, as the task uploader does,
// over the two hours since it started.
func uploadLogs(ctx context.Context, client *s3.Client) error {
	started := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	taskID = fmt.Sprintf(logTask, started.UnixMilli())
	task, err := logkey.ParseTaskID(taskID)
	if err != nil {
		return err
	}
	format := defaultFormat()
	for i := range logFiles {
		at := started.Add(time.Duration(i) * time.Minute)
		key := format.Key(logkey.File{Task: task, Filename: fmt.Sprintf("service-%03d.log", i), Index: i, Modified: at})
		_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(logBucket), Key: aws.String(key),
			Body:     strings.NewReader("log " + strconv.Itoa(i) + " of " + taskID + "\n"),
			Metadata: map[string]string{"starttime": strconv.FormatInt(at.UnixMilli(), 10), "endtime": strconv.FormatInt(at.Add(time.Minute).UnixMilli(), 10)}})
		if err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
	}
	return nil
}

// seed reports machines up, as the scheduler does; ids are prefix-S<i>.
func seed(t *testing.T, prefix string, n int, lost bool) []string {
	t.Helper()
	var ids, machines []string
	for i := range n {
		id := fmt.Sprintf("%s-S%d", prefix, i)
		ids = append(ids, id)
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"%s-node-%d.example.com","rackId":"us-east-1%c","attributes":{"instance_type":"m5.4xlarge"},"resources":{"cpus":16,"mem":63000},"runningTasks":2,"lost":%v}`,
			id, prefix, i, 'a'+rune(i%3), lost))
	}
	report := func(list string) {
		if _, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(`{"machines":[`+list+`]}`)); err != nil {
			t.Fatalf("report: %v", err)
		}
	}
	joined := strings.Join(machines, ",")
	if lost { // a machine is first seen up, then lost
		report(strings.ReplaceAll(joined, `"lost":true`, `"lost":false`))
	}
	report(joined)
	return ids
}

// api sends one request to the API, as a script would, and wants status.
//
// It is a client as fleetctl is: a 503 (moto busy on a loaded machine) is
// tried again after its Retry-After, with the same Idempotency-Key, so a
// change that was made and whose answer was lost is not made twice.
func api(t *testing.T, method, path, body string, status int) string {
	t.Helper()
	key := fmt.Sprintf("console-test-%d", time.Now().UnixNano())
	for try := 1; ; try++ {
		req, _ := http.NewRequest(method, site.URL+path, strings.NewReader(body))
		if method != "GET" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable && status != res.StatusCode && try < 5 {
			wait, _ := strconv.Atoi(res.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(wait, 1)) * time.Second)
			continue
		}
		if res.StatusCode != status {
			t.Fatalf("%s %s: got %d %s, want %d", method, path, res.StatusCode, b, status)
		}
		return string(b)
	}
}

// patience is how long a test waits for the page to do one thing it was
// told (a step, a condition): enough on a machine at load 8, two cores
// shared with builds and other suites, and still far from a hang.
const patience = 60 * time.Second

// tab opens a tab at 1440 px in the light theme. A tab lives through a
// whole test, several pages and screenshots: it gets many steps' patience.
func tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chrome.Tab()
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 8*patience)
	t.Cleanup(cancelTimeout)
	// What the page reports about itself goes into the test's log, so a
	// failure says why the page did not do what was wanted.
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Logf("page exception: %s", ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			t.Logf("page console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	})
	do(t, ctx, browser.Look(1440, "light"))
	// Each test starts from a browser that has not seen the console: the
	// saved fleet view of another test would filter this one's machines.
	for _, origin := range []string{site.URL, noS3Site.URL} {
		do(t, ctx, storage.ClearDataForOrigin(origin, "local_storage,session_storage"))
	}
	return ctx
}

// do runs actions, each step given patience (a selector that never
// matches fails the test rather than waiting for the tab's deadline).
func do(t *testing.T, ctx context.Context, actions ...chromedp.Action) {
	t.Helper()
	for _, a := range actions {
		err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, patience)
			defer cancel()
			return a.Do(ctx)
		}))
		if err != nil {
			t.Fatalf("%T: %v", a, err)
		}
	}
}

// clear empties an input the way a user selecting all and deleting does.
func clear(sel string) chromedp.Action {
	s, _ := json.Marshal(sel)
	return chromedp.Evaluate(fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`, s), nil)
}

// open loads the console at route (#/...) and waits for sel.
func open(t *testing.T, ctx context.Context, base, route, sel string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(base+"/"+route))
	eventually(t, ctx, sel, fmt.Sprintf("document.querySelector(%q) !== null", sel))
}

// eventually waits until the JavaScript expression is true, or fails
// saying what the page showed instead. It asks again after an error too,
// as the page may be between two documents (a sign-in redirect).
func eventually(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	var err error
	for time.Now().Before(deadline) {
		var ok bool
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = chromedp.Run(ectx, chromedp.Evaluate(expr, &ok))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var text string
	_ = chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector("main")?.innerText`, &text))
	t.Fatalf("got no %s (%s, last error %v); the page shows:\n%s", what, expr, err, text)
}

// has is a JavaScript expression: the element sel holds text.
func has(sel, text string) string {
	s, _ := json.Marshal(sel)
	x, _ := json.Marshal(text)
	return fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.innerText.includes(%s))`, s, x)
}

// choose sets a select or radio the way a user does, firing change.
func choose(sel, value string) chromedp.Action {
	s, _ := json.Marshal(sel)
	v, _ := json.Marshal(value)
	return chromedp.Evaluate(fmt.Sprintf(`(() => { const e = document.querySelector(%s); e.value = %s; e.dispatchEvent(new Event("change", {bubbles: true})); return true })()`, s, v), nil)
}

// away moves the pointer off the page's forms, to the corner of the
// window, as a reader's hand is while they watch: a pointer resting on a
// form holds a page's draws until it leaves (machine.js, fleet.js).
func away() chromedp.Action { return chromedp.MouseEvent(input.MouseMoved, 1, 1) }

// confirmDialog waits for the confirmation, checks that it says want, and
// confirms.
func confirmDialog(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	eventually(t, ctx, "confirmation saying "+want, has("dialog.confirm", want))
	do(t, ctx, chromedp.Click("dialog.confirm button[value=ok]"))
}

func withAwait(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

func defaultFormat() logkey.Format {
	f, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		panic(err)
	}
	return f
}
