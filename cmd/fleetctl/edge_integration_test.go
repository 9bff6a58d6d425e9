//go:build integration

package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// hostile is a message that, printed raw, retitles the terminal window and
// clears the screen.
const hostile = "\x1b]0;pwned\x07\x1b[2Jhi"

// wantNoControl fails when out holds a byte a terminal would obey.
func wantNoControl(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range []string{"\x1b", "\x07", "\r", "\u009b"} {
		if strings.Contains(out, c) {
			t.Errorf("%s holds %q raw:\n%q", what, c, out)
		}
	}
}

func TestServiceTextReachesTheTerminalVisibly(t *testing.T) {
	machines(t, "esc-1")
	if err := local.Report(context.Background(), time.Time{}, apitest.Machine{ID: "esc-2", Host: "h\x1b[2J.example.com", Rack: "r\x07"}); err != nil {
		t.Fatal(err)
	}
	// As with curl: straight to the API, not through fleetctl.
	c, err := client.New(client.Options{Endpoint: servers[apitest.None].URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"esc-1", "esc-2"} {
		if err := c.FreezeSlave(context.Background(), id, client.ChangeRequest{Message: hostile, DurationMillis: time.Hour.Milliseconds(), RevertToState: client.Active}, client.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	none := apitest.None
	escaped := `\x1b]0;pwned\x07\x1b[2Jhi`
	for _, args := range [][]string{{"show", "esc-1"}, {"show", "esc-2"}, {"list", "esc-*"}, {"list", "esc-*", "-o", "wide"}, {"expiring"}} {
		out := fleetctl(t, none, nil, args...).want(t, 0).stdout
		wantNoControl(t, strings.Join(args, " "), out)
		if !strings.Contains(out, escaped) {
			t.Errorf("%s: got\n%s\nwant the message shown as %s", strings.Join(args, " "), out, escaped)
		}
	}
	if out := fleetctl(t, none, nil, "list", "esc-*").stdout; !strings.Contains(out, `h\x1b[2J.example.com`) {
		t.Errorf("got list\n%s\nwant the host shown escaped", out)
	}
	var shown struct {
		Slave client.Slave `json:"slave"`
	}
	out := fleetctl(t, none, nil, "show", "esc-2", "-o", "json").want(t, 0).stdout
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.Slave.CurrentState.Message != hostile || shown.Slave.Host != "h\x1b[2J.example.com" {
		t.Errorf("got %s (%v), want -o json exact", out, err)
	}
	// A service error quoting the id (the id itself is the user's).
	fleetctl(t, none, nil, "show", "esc-\x1b[2J").wantError(t, exitNotFound, `esc-\x1b[2J`)
}

// hostileLogs stores logs under keys that a terminal, a shell pipeline or
// a file system would mistake, and serves the log search over them. S3
// lists keys with control characters in XML that the API cannot read yet,
// so this search answers in its place, as the API answers: the same JSON,
// with links presigned by MinIO. Keys MinIO refuses ("//", "/./", "..", a
// segment over 255 bytes) are listed with links to objects stored under
// other names. One listed log is missing from the bucket: its link
// answers MinIO's 404. It returns the server and each key's body.
func hostileLogs(t *testing.T) (*httptest.Server, []client.Log, map[string]string) {
	t.Helper()
	ctx := context.Background()
	base := "hostile/" + time.Now().UTC().Format("2006/01") + "/"
	stored := map[string]string{ // listed key: stored key
		base + "esc" + hostile + ".log":            base + "esc" + hostile + ".log",
		base + "evil\n/etc/passwd":                 base + "evil\n/etc/passwd",
		base + "same/x.log":                        base + "same/x.log",
		base + "same//x.log":                       "stored/slash-slash",
		base + "same/./x.log":                      "stored/dot",
		base + "same/../x.log":                     "stored/dot-dot",
		"../../outside.log":                        "stored/outside",
		base + strings.Repeat("l", 300) + "/x.log": "stored/long",
		base + "Same/X.log":                        base + "Same/X.log",
		base + "gone.log":                          "stored/never-put",
	}
	presign := s3.NewPresignClient(local.S3)
	bodies := map[string]string{}
	var logs []client.Log
	at := time.Now().Add(-time.Hour)
	keys := make([]string, 0, len(stored))
	for k := range stored {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, key := range keys {
		body := fmt.Sprintf("body of log %d: %q\n", i, key)
		if !strings.HasSuffix(key, "gone.log") {
			if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(apitest.LogBucket), Key: aws.String(stored[key]), Body: strings.NewReader(body)}); err != nil {
				t.Fatal(err)
			}
			bodies[key] = body
		}
		link, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(apitest.LogBucket), Key: aws.String(stored[key])})
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, client.Log{Key: key, LastModified: at.Add(time.Duration(i) * time.Second).UnixMilli(), Size: int64(len(body)), DownloadURL: link.URL})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/logs/search" {
			http.Error(w, `{"code":404,"message":"not here"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(client.SearchResult{LastPage: true, Results: logs, ContinuationTokens: map[string]client.ContinuationToken{}})
	}))
	t.Cleanup(srv.Close)
	return srv, logs, bodies
}

func TestHostileLogKeysNeitherHijackNorAliasNorAbort(t *testing.T) {
	srv, listed, bodies := hostileLogs(t)
	cache := t.TempDir()
	env := []string{"FLEETCTL_ENDPOINT=" + srv.URL, "FLEETCTL_CACHE_DIR=" + cache}
	sel := []string{"--request", "hostile", "--since", "7d"}
	none := apitest.None
	run := func(args ...string) result { return fleetctl(t, none, env, append(args, sel...)...) }

	ls := run("logs", "ls").want(t, 0).stdout
	wantNoControl(t, "logs ls", ls)
	if lines := strings.Split(strings.TrimSuffix(ls, "\n"), "\n"); len(lines) != 1+len(listed) {
		t.Errorf("got %d lines, want a header and one line per log:\n%s", len(lines), ls)
	}
	if !strings.Contains(ls, `evil\n/etc/passwd`) || !strings.Contains(ls, `esc\x1b]0;pwned\x07\x1b[2Jhi.log`) {
		t.Errorf("got logs ls\n%s\nwant the keys escaped", ls)
	}
	var asJSON []client.Log
	if err := json.Unmarshal([]byte(run("logs", "ls", "-o", "json").want(t, 0).stdout), &asJSON); err != nil || len(asJSON) != len(listed) || asJSON[0].Key != listed[0].Key {
		t.Errorf("got %v (%v), want -o json to hold the keys exactly", asJSON, err)
	}

	// Every log that can be fetched is, each into its own file; the
	// missing one is named on one line, and the exit code says so.
	r := run("logs", "fetch", "-j", "8", "--print0")
	r.want(t, exitSomeLogs)
	wantNoControl(t, "fetch's stderr", r.stderr)
	errLines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(errLines) != 2 || !strings.HasPrefix(errLines[0], "fleetctl: hostile/") || !strings.Contains(errLines[0], "gone.log: download answered 404") ||
		!strings.Contains(errLines[0], "NoSuchKey") || errLines[1] != fmt.Sprintf("fleetctl: 1 of %d logs could not be fetched", len(listed)) {
		t.Errorf("got stderr\n%s\nwant the missing log's line and the count", r.stderr)
	}
	if strings.Contains(r.stderr, "X-Amz-") {
		t.Errorf("got stderr %q, with a signed query", r.stderr)
	}
	paths := strings.Split(strings.TrimSuffix(r.stdout, "\x00"), "\x00")
	if len(paths) != len(bodies) {
		t.Fatalf("got %d paths from --print0, want %d: %q", len(paths), len(bodies), r.stdout)
	}
	for _, p := range paths {
		if rel, err := filepath.Rel(cache, p); err != nil || !filepath.IsLocal(rel) {
			t.Errorf("path %q is outside the cache %s", p, cache)
		}
	}
	var files []string
	filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	slices.Sort(files)
	slices.Sort(paths)
	if !slices.Equal(files, paths) {
		t.Errorf("got files\n%q\nwant exactly the printed paths (no .part left)\n%q", files, paths)
	}
	for key, body := range bodies {
		for _, p := range paths {
			if got, _ := os.ReadFile(p); string(got) == body {
				body = ""
			}
		}
		if body != "" {
			t.Errorf("no file holds the body of %q", key)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(cache), "outside.log")); err == nil {
		t.Error("a key wrote outside the cache")
	}

	// cat serves each log its own bytes, from the cache, and goes on past
	// the missing one.
	cat := run("logs", "cat")
	cat.want(t, exitSomeLogs)
	var want strings.Builder
	for _, l := range listed {
		want.WriteString(bodies[l.Key])
	}
	if cat.stdout != want.String() {
		t.Errorf("got cat\n%s\nwant\n%s", cat.stdout, want.String())
	}
	// grep -l names each log on one line, escaped.
	grep := run("logs", "grep", "-l", "-F", "body of log")
	grep.want(t, exitSomeLogs)
	wantNoControl(t, "grep -l", grep.stdout)
	if lines := strings.Split(strings.TrimSuffix(grep.stdout, "\n"), "\n"); len(lines) != len(bodies) || !slices.Contains(lines, `hostile/`+time.Now().UTC().Format("2006/01")+`/evil\n/etc/passwd`) {
		t.Errorf("got grep -l\n%s\nwant one escaped key a line", grep.stdout)
	}
	if p := run("logs", "fetch", "--print").stdout; strings.Count(p, "\n") != len(bodies) {
		t.Errorf("got --print\n%s\nwant one path a line", p)
	}
}

// stallingS3 answers the headers and a first part of every download, then
// nothing more; got is told of each request.
func stallingS3(t *testing.T, got chan<- struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		w.Write(bytes.Repeat([]byte("x"), 1000))
		w.(http.Flusher).Flush()
		got <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections) // first: Close waits for a stalled download
	return srv
}

// searchAnswering serves the log search with logs.
func searchAnswering(t *testing.T, logs ...client.Log) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(client.SearchResult{LastPage: true, Results: logs, ContinuationTokens: map[string]client.ContinuationToken{}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

const signedQuery = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDSECRETPART%2F20261124%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=0123456789abcdef"

func TestAnInterruptedFetchSaysSoWithoutTheLink(t *testing.T) {
	got := make(chan struct{}, 4)
	s3srv := stallingS3(t, got)
	api := searchAnswering(t, client.Log{Key: "r/2026/11/a.log", Size: 1000000, LastModified: 1, DownloadURL: s3srv.URL + "/a.log" + signedQuery})
	cmd := exec.Command(binary, "logs", "fetch", "--request", "r")
	cmd.Env = []string{"HOME=" + t.TempDir(), "FLEETCTL_ENDPOINT=" + api.URL, "FLEETCTL_CACHE_DIR=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the download never started")
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || stderr.String() != "fleetctl: interrupted (interrupt)\n" {
		t.Errorf("got exit code %d and stderr %q, want 130 and one line", code, stderr.String())
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, "AKIDSECRETPART") || strings.Contains(out, "0123456789abcdef") {
		t.Errorf("got %q, with the signed query", out)
	}

	// A link that fails in the transport names no query either.
	api = searchAnswering(t, client.Log{Key: "r/2026/11/b.log", Size: 10, LastModified: 1, DownloadURL: "http://127.0.0.1:9/b.log" + signedQuery})
	r := fleetctl(t, apitest.None, []string{"FLEETCTL_ENDPOINT=" + api.URL, "FLEETCTL_CACHE_DIR=" + t.TempDir()}, "logs", "cat", "--request", "r")
	r.want(t, exitSomeLogs)
	if !strings.Contains(r.stderr, "127.0.0.1:9/b.log") || strings.Contains(r.stderr, "AKIDSECRETPART") || strings.Contains(r.stderr, "0123456789abcdef") {
		t.Errorf("got stderr %q, want the link's failure without its query", r.stderr)
	}
}

func TestASilentServerIsCutAtTheTimeoutAndRetryingIsSaid(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var attempts atomic.Int64 // one connection each: a cut attempt closes its own
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			t.Cleanup(func() { conn.Close() })
		}
	}()
	// Each attempt has half of --timeout: the first is cut 3 s before the
	// call, time enough on a busy machine to say the retry. Counted rather
	// than timed: the call's bound leaves room for two attempts, where 4
	// would come without it, however slow the machine.
	r := fleetctl(t, apitest.None, []string{"FLEETCTL_ENDPOINT=http://" + ln.Addr().String(), "FLEETCTL_TIMEOUT=6s"}, "list")
	r.wantError(t, exitUnavailable, "no answer from http://"+ln.Addr().String()+"/api/slaves in time", "--timeout")
	if !strings.HasPrefix(r.stderr, "fleetctl: retrying in ") {
		t.Errorf("got stderr %q, want the retry said", r.stderr)
	}
	if n := attempts.Load(); n > 2 {
		t.Errorf("got %d attempts, want at most 2 within the 6s of --timeout", n)
	}
}

func TestAnEndpointThatIsNotTheAPISaysSo(t *testing.T) {
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html>\n<html><body>Welcome to nginx!</body></html>\n")
	}))
	t.Cleanup(html.Close)
	for _, tc := range []struct{ name, endpoint, status string }{
		{"S3 itself (MinIO's XML error)", local.MinIO.Endpoint, "answered 40"},
		{"a web page", html.URL, "answered 200 with text/html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleetctl(t, apitest.None, []string{"FLEETCTL_ENDPOINT=" + tc.endpoint}, "list").wantError(t, exitFailure, "not the fleet API", tc.status)
		})
	}
}

func TestCommandLineEdges(t *testing.T) {
	machines(t, "edge-1")
	none := apitest.None
	fleetctl(t, none, nil, "lsit").wantError(t, exitUsage, `unknown command "lsit"`, `did you mean "list" or "wait"?`, "fleetctl --help")
	fleetctl(t, none, nil, "describe", "edge-1").wantError(t, exitUsage, `unknown command "describe"`, `did you mean "show"?`)
	fleetctl(t, none, nil, "logs", "lsit").wantError(t, exitUsage, "lsit", `did you mean "ls"?`, "fleetctl logs --help")
	fleetctl(t, none, nil, "make-permanent", "edge-1").wantError(t, exitNotFound, "edge-1", "no expiring change")
	// The test's binary has no linked version: it says what its build
	// recorded (version_integration_test.go builds one that records a commit).
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if out, want := fleetctl(t, none, nil, "version").want(t, 0).stdout, "fleetctl "+versionOf("dev", info)+"\n"; out != want {
		t.Errorf("got version %q, want %q", out, want)
	}
	fleetctl(t, none, nil, "freeze", "edge-1", "--for", "1h").want(t, 0)
	if out := fleetctl(t, none, nil, "make-permanent", "edge-1").want(t, 0).stdout; out != "edge-1: permanent, no longer reverts to ACTIVE\n" {
		t.Errorf("got %q", out)
	}
}

func TestAKeyThatIsAlsoAFolderFailsAloneAndLeavesNoPart(t *testing.T) {
	ctx := context.Background()
	presign := s3.NewPresignClient(local.S3)
	var logs []client.Log
	// a/b/c comes first: a/b then finds a folder where its file goes.
	for i, key := range []string{"r/2026/11/a/b", "r/2026/11/a/b/c"} {
		stored := fmt.Sprintf("stored/folder-%d", i)
		body := "body of " + key
		if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(apitest.LogBucket), Key: aws.String(stored), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		link, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(apitest.LogBucket), Key: aws.String(stored)})
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, client.Log{Key: key, Size: int64(len(body)), LastModified: int64(2 - i), DownloadURL: link.URL})
	}
	cache := t.TempDir()
	api := searchAnswering(t, logs...)
	r := fleetctl(t, apitest.None, []string{"FLEETCTL_ENDPOINT=" + api.URL, "FLEETCTL_CACHE_DIR=" + cache}, "logs", "fetch", "--request", "r", "-j", "1")
	r.want(t, exitSomeLogs)
	if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "fleetctl: r/2026/11/a/b") {
		t.Errorf("got stderr %q, want one of the two named, and the count", r.stderr)
	}
	var files []string
	filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if len(files) != 1 || strings.HasSuffix(files[0], partSuffix) {
		t.Errorf("got files %q, want the one log fetched and no .part", files)
	}
}
