//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/stack"
)

// moveFleet is how many slaves the move test builds in its first stack:
// four batches of the import, two at a time, and pages of every read. (At
// 1,000 it took 320 s, the longest test of make test, for nothing more a
// larger fleet shows; the import's rate at size is make bench's.)
const moveFleet = 400

// A fleet moves from one deployment to another as docs/moving.md says:
// two make run, each on its own port and emulator; a fleet of moveFleet
// slaves built through the first one's API (an import of their histories,
// then freezes for two hours, decommissions and activations, so that the
// service's own entries and expiring changes are part of it); fleetctl
// import --from the first into the second; fleetctl diff of the two then
// finds no difference, and the same import again imports nothing: no
// write reaches the second's DynamoDB.
func TestAFleetMovesFromOneStackToAnotherWithItsStory(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fleetctl := filepath.Join(t.TempDir(), "fleetctl")
	build := exec.Command("go", "build", "-o", fleetctl, "./cmd/fleetctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fleetctl: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// The first stack, make run as a user starts it.
	portA := freePort(t)
	a := startMakeRun(t, root, readmeEnv(t, t.TempDir(), portA, "127.0.0.1:"+freePort(t)))
	old := "http://127.0.0.1:" + portA

	// The second, on an emulator the test starts, behind a proxy that
	// counts the writes that reach it; make run uses the emulator it finds.
	motoB, err := stack.StartMoto(ctx, "127.0.0.1:"+freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	defer motoB.Stop()
	writes := countWrites(t, motoB.Endpoint)
	portB := freePort(t)
	b := startMakeRun(t, root, readmeEnv(t, t.TempDir(), portB, writes.addr))
	next := "http://127.0.0.1:" + portB
	defer func() {
		if t.Failed() {
			t.Logf("first stack:\n%s\nsecond stack:\n%s", tail(a.output(), 3000), tail(b.output(), 3000))
		}
	}()

	began := time.Now()
	buildFleet(ctx, t, old)
	t.Logf("%d slaves built through the first stack's API in %v", moveFleet, time.Since(began).Round(time.Second))

	fleetctlRun := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, fleetctl, args...)
		cmd.Env = append(cmd.Environ(), "XDG_CACHE_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "NO_COLOR=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		err := cmd.Run()
		code := cmd.ProcessState.ExitCode()
		t.Logf("fleetctl %s: exit %d in %v", strings.Join(args, " "), code, time.Since(began).Round(100*time.Millisecond))
		if err != nil && code < 0 {
			t.Fatalf("fleetctl %v: %v", args, err)
		}
		return code, stdout.String(), stderr.String()
	}

	// Two batches at a time: each emulator answers one request at a time,
	// and more batches sent together only wait on each other there.
	code, out, errOut := fleetctlRun("import", "--from", old, "--endpoint", next, "--concurrency", "2")
	// A batch the route answered 503 for one slave is sent again: those
	// it had imported are then unchanged.
	done := regexp.MustCompile(fmt.Sprintf(`%s slaves: \d[\d,]* imported, \d[\d,]* unchanged, 0 conflicts, 0 refused`, thousandsOf(moveFleet)))
	if code != 0 || !done.MatchString(out) {
		t.Fatalf("import: exit %d, want 0 and every slave imported:\n%s\n%s", code, tail(out, 2000), tail(errOut, 2000))
	}
	code, out, errOut = fleetctlRun("diff", "--old", old, "--new", next)
	if code != 0 {
		t.Errorf("diff after the import: exit %d, want 0 (the same):\n%s\n%s", code, tail(out, 3000), tail(errOut, 2000))
	}

	writes.n.Store(0)
	code, out, errOut = fleetctlRun("import", "--from", old, "--endpoint", next) // reads alone: as fleetctl's default has them
	if code != 0 || !strings.Contains(out+errOut, fmt.Sprintf("%s unchanged", thousandsOf(moveFleet))) {
		t.Errorf("import again: exit %d, want 0 and %d unchanged:\n%s\n%s", code, moveFleet, tail(out, 2000), tail(errOut, 2000))
	}
	if n := writes.n.Load(); n != 0 {
		t.Errorf("import again: %d writes reached the second stack's DynamoDB, want none (%s)", n, writes.ops())
	}
}

// buildFleet builds moveFleet slaves through the API at base: imported
// with three entries of history each (in batches, as the old scheduler's
// story), then one in ten frozen for two hours (an expiring change), two
// decommissioned, and one in twenty frozen and activated again: entries
// the service writes itself.
func buildFleet(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	c, err := client.New(client.Options{Endpoint: base, CallTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	id := func(i int) string { return fmt.Sprintf("move-%04d", i) }
	var batch []client.ImportedSlave
	for i := range moveFleet {
		history := []client.StateUpdate{
			{ObjectID: id(i), State: client.Active, Timestamp: at + int64(i), Message: "New machine reported"},
			{ObjectID: id(i), State: client.Frozen, Timestamp: at + 3_600_000 + int64(i), User: "ops@example.com", Message: "disk check"},
			{ObjectID: id(i), State: client.Active, Timestamp: at + 7_200_000 + int64(i), User: "ops@example.com"},
		}
		batch = append(batch, client.ImportedSlave{
			Slave: client.Slave{ID: id(i), FirstSeenAt: at + int64(i), Host: fmt.Sprintf("node-%04d.example.com", i), RackID: fmt.Sprintf("rack-%d", i%8),
				Attributes: map[string]string{"instance_type": "m5.4xlarge"}, CurrentState: history[len(history)-1]},
			History: history,
		})
		if len(batch) == 100 || i == moveFleet-1 {
			results, err := c.Import(ctx, batch, client.ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range results {
				if r.Result != "imported" {
					t.Fatalf("build the fleet: %s %s (%s)", r.ID, r.Result, r.Reason)
				}
			}
			batch = batch[:0]
		}
	}
	for i := 0; i < moveFleet; i += 10 {
		req := client.ChangeRequest{Message: "kernel upgrade", DurationMillis: (2 * time.Hour).Milliseconds(), RevertToState: client.Active}
		if err := c.FreezeSlave(ctx, id(i), req, client.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 5; i < 205; i += 100 { // two: make run's decommission limit
		if err := c.DecommissionSlave(ctx, id(i), client.ChangeRequest{Message: "retired"}, client.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i < moveFleet; i += 20 {
		if err := c.FreezeSlave(ctx, id(i), client.ChangeRequest{}, client.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.ActivateSlave(ctx, id(i), client.ChangeRequest{Message: "done"}, client.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// writeCounter is a proxy in front of an emulator that counts the
// DynamoDB writes that pass it and name a slave of the fleet (the
// service's scheduled jobs write their own items).
type writeCounter struct {
	addr  string
	n     atomic.Int64
	byOp  [5]atomic.Int64
	names [5]string
}

func countWrites(t *testing.T, endpoint string) *writeCounter {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	w := &writeCounter{names: [5]string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // the connections make run leaves open when it stops
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		for i, name := range w.names {
			if op == name && bytes.Contains(body, []byte(`"move-`)) {
				w.n.Add(1)
				w.byOp[i].Add(1)
			}
		}
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.addr = strings.TrimPrefix(srv.URL, "http://")
	return w
}

// ops names the writes counted, by operation.
func (w *writeCounter) ops() string {
	var parts []string
	for i, name := range w.names {
		if n := w.byOp[i].Load(); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, name))
		}
	}
	return strings.Join(parts, ", ")
}

// thousandsOf writes n as fleetctl does, 1,000.
func thousandsOf(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
