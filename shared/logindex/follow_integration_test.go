//go:build integration

package logindex_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Fields(b.buf.String())
}

// TestFollowPrintsALateUploadOnce runs fleetctl logs follow, built and run
// as its own process, against the log routes reading the index: logs that
// landed before it started are printed once, and so is a late upload (its
// span ended two hours ago, so no window a poll could ask for holds it),
// however many polls follow.
func TestFollowPrintsALateUploadOnce(t *testing.T) {
	ctx := context.Background()
	bucket := "task-logs-follow"
	if err := stack.CreateBuckets(ctx, local.S3, bucket); err != nil {
		t.Fatal(err)
	}
	objects := logstore.New(local.S3, s3.NewPresignClient(local.S3))
	table := logindex.NewTable(local.DynamoDB, stack.LocalName("LogIndexTable"))
	indexer := logindex.NewIndexer(logstore.Buckets{Store: objects, Notifications: logstore.Notifications{API: local.S3}}, table, logkey.Format{}, []string{bucket}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	r := rig{indexer: indexer, table: table, bucket: bucket, logged: &bytes.Buffer{}}
	cfg := logs.Config{Buckets: []string{bucket}, URLTTL: time.Hour, Lookback: 30 * 24 * time.Hour,
		ListTimeout: routeDeadline, LinkTimeout: routeDeadline}
	routes := web.Wrap(logs.New(objects, cfg).ReadsIndex(table), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var requests atomic.Int64 // fleetctl's, so that a test can wait for more polls
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		routes.ServeHTTP(w, r)
	}))
	defer srv.Close()

	dir := t.TempDir()
	binary := filepath.Join(dir, "fleetctl")
	if out, err := exec.Command("go", "build", "-o", binary, "../../cmd/fleetctl").CombinedOutput(); err != nil {
		t.Fatalf("build fleetctl: %v\n%s", err, out)
	}

	now := time.Now()
	started := now.Add(-6 * time.Hour)
	tk := task(t, fmt.Sprintf("flw-d1-%d-0-h1-r1", started.UnixMilli()))
	seq := 0
	upload := func(name string, keyTime, start, end time.Time) string {
		t.Helper()
		key := (logkey.Format{}).Key(logkey.File{Task: tk, Filename: name, Modified: keyTime})
		meta := map[string]string{"starttime": strconv.FormatInt(start.UnixMilli(), 10), "endtime": strconv.FormatInt(end.UnixMilli(), 10)}
		if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("log\n"), Metadata: meta}); err != nil {
			t.Fatal(err)
		}
		seq++
		r.send(t, "Object Created", key, fmt.Sprintf("0055AED6DCD9%08X", seq))
		return key
	}
	before := []string{
		upload("recent.log", now.Add(-time.Minute), now.Add(-2*time.Minute), now.Add(-time.Minute)),
		upload("old-span.log", now.Add(-5*time.Hour), now.Add(-5*time.Hour), now.Add(-4*time.Hour)),
	}

	var stdout, stderr lockedBuffer
	cmd := exec.Command(binary, "logs", "follow", "--request", "flw", "--since", "10m", "--poll", "200ms")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"), "FLEETCTL_ENDPOINT="+srv.URL)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	eventually := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !done(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: gave up after 2 minutes; printed %q, stderr %q", what, stdout.lines(), stderr.lines())
			}
		}
	}
	eventually("printing the logs that landed in the last 10 minutes", func() bool { return len(stdout.lines()) >= len(before) })
	late := upload("late.log", now.Add(-2*time.Hour), now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	eventually("printing the late upload", func() bool { return len(stdout.lines()) > len(before) })
	// Ten more requests (polls), which must print nothing: counted, not
	// timed, so that a slow machine's polls are polls all the same.
	polled := requests.Load()
	eventually("ten more requests", func() bool { return requests.Load() >= polled+10 })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 130 {
		t.Errorf("got exit %v, want 130 on interrupt (stderr %q)", err, stderr.lines())
	}
	got := stdout.lines()
	if got[len(got)-1] != late {
		t.Errorf("got %q, want %s last", got, late)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(append(before, late)))
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant each of\n%s\nonce", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
