//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// running is fleetctl started in the background.
type running struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	exited         chan struct{}
}

// start runs fleetctl against the server without auth, in the background.
func start(t *testing.T, env []string, args ...string) *running {
	t.Helper()
	home := t.TempDir()
	r := &running{cmd: exec.Command(binary, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	r.cmd.Env = append([]string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "TZ=UTC",
		"FLEETCTL_ENDPOINT=" + servers[apitest.None].URL}, env...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// result waits for the process to end.
func (r *running) result(t *testing.T) result {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(3 * time.Minute):
		t.Fatalf("fleetctl %v still running after 3 minutes\nstdout: %s\nstderr: %s", r.cmd.Args[1:], r.stdout, r.stderr)
	}
	return result{r.stdout.String(), r.stderr.String(), r.cmd.ProcessState.ExitCode()}
}

// api is a client of the server without auth, for the test's own reads.
func api(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Endpoint: servers[apitest.None].URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond until it holds, for up to 2 minutes: what it
// waits for goes through fleetctl's process, the API and the emulators,
// which a busy machine slows many times over.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not %s after 2 minutes", what)
}

func stateOf(t *testing.T, id string) client.State {
	t.Helper()
	s, err := api(t).GetSlave(context.Background(), id)
	if err != nil {
		return ""
	}
	return s.CurrentState.State
}

// report sends one machine's report with its running-task count.
func report(t *testing.T, id string, running int) {
	t.Helper()
	if err := local.Report(context.Background(), time.Time{}, apitest.Machine{ID: id, Host: id + ".example.com", Rack: "us-east-1a", RunningTasks: running}); err != nil {
		t.Fatal(err)
	}
}

// settleDrains ends the drains other tests left, so that the service's
// decommission limit (2 at once) is free.
func settleDrains(t *testing.T) {
	t.Helper()
	all, err := api(t).ListSlaves(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if draining(s.CurrentState.State) {
			report(t, s.ID, 0)
		}
	}
}

func TestDecommissionWaitFollowsTheDrainThatReportsDrive(t *testing.T) {
	settleDrains(t)
	machines(t, "drn-1")
	r := start(t, nil, "decommission", "drn-1", "--wait", "--poll", "50ms", "-m", "retiring")

	eventually(t, "STARTING_DECOMMISSION", func() bool { return stateOf(t, "drn-1") == client.StartingDecommission })
	eventually(t, "shown as starting", func() bool { return strings.Contains(r.stderr.String(), "drn-1: STARTING_DECOMMISSION since ") })
	report(t, "drn-1", 3)
	eventually(t, "shown as draining", func() bool { return strings.Contains(r.stderr.String(), "drn-1: DECOMMISSIONING since ") })
	report(t, "drn-1", 1)
	eventually(t, "shown with 1 task left", func() bool { return strings.Contains(r.stderr.String(), " (1 task running)\n") })
	if stateOf(t, "drn-1") != client.Decommissioning || r.cmd.ProcessState != nil {
		t.Fatalf("got %s, exited %v: want still DECOMMISSIONING and waited for with 1 task left", stateOf(t, "drn-1"), r.cmd.ProcessState)
	}
	if got := fleetctl(t, apitest.None, nil, "show", "drn-1").want(t, 0).stdout; !strings.Contains(got, "\nTasks:      1 task running\n") {
		t.Errorf("show: got\n%s\nwant the draining machine's task count", got)
	}
	if got := fleetctl(t, apitest.None, nil, "list", "--state", "decommissioning", "-o", "wide").want(t, 0).stdout; !regexp.MustCompile(`(?m)^drn-1 .* - +1 +- +retiring`).MatchString(got) {
		t.Errorf("list -o wide: got\n%s\nwant drn-1 with 1 in TASKS", got)
	}
	report(t, "drn-1", 0)

	res := r.result(t).want(t, 0)
	if res.stdout != "drn-1: DECOMMISSIONED\n" {
		t.Errorf("got stdout %q, want the one result line", res.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n")
	want := []struct{ start, end string }{
		{"drn-1: STARTING_DECOMMISSION since ", " (no report since the decommission)"},
		{"drn-1: DECOMMISSIONING since ", " (3 tasks running)"},
		{"drn-1: DECOMMISSIONING since ", " (1 task running)"},
		{"drn-1: DECOMMISSIONED since ", " (last report: no tasks left)"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got stderr\n%s\nwant one line per state and task count the reports gave (no status line off a terminal)", res.stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w.start) || !strings.HasSuffix(lines[i], w.end) {
			t.Errorf("got line %q, want %q...%q", lines[i], w.start, w.end)
		}
	}
	// Waiting again on a finished drain ends at once: a restarted client
	// resumes by running wait.
	fleetctl(t, apitest.None, nil, "wait", "drn-1", "--for", "state=decommissioned").want(t, 0)
	if got := fleetctl(t, apitest.None, nil, "decommission", "drn-1", "--wait").want(t, 0).stdout; got != "drn-1: DECOMMISSIONED\n" {
		t.Errorf("got %q, want the drain run again to find it done", got)
	}
}

func TestAWaitEndsWithItsOwnCodeOnATimeoutOrAMachineGoneElsewhere(t *testing.T) {
	settleDrains(t)
	machines(t, "wt-slow", "wt-back")
	none := apitest.None
	fleetctl(t, none, nil, "decommission", "wt-slow").want(t, 0)
	fleetctl(t, none, nil, "wait", "wt-slow", "--for", "state=DECOMMISSIONED", "--wait-timeout", "500ms", "--poll", "50ms").
		wantErrorLast(t, exitWaitTimeout, "wt-slow: not DECOMMISSIONED after --wait-timeout (still STARTING_DECOMMISSION)")

	r := start(t, nil, "wait", "wt-slow", "--for", "state=decommissioned", "--poll", "50ms")
	eventually(t, "waiting", func() bool { return strings.Contains(r.stderr.String(), "STARTING_DECOMMISSION") })
	fleetctl(t, none, nil, "activate", "wt-slow", "-m", "needed \x1b[2Jback").want(t, 0)
	res := r.result(t).want(t, exitElsewhere)
	if !strings.Contains(res.stderr, "fleetctl: wt-slow: went to ACTIVE, not DECOMMISSIONED: needed \\x1b[2Jback\n") {
		t.Errorf("got stderr %q, want the machine's new state and its message, rendered visibly", res.stderr)
	}

	fleetctl(t, none, nil, "decommission", "wt-back").want(t, 0)
	r = start(t, nil, "decommission", "wt-back", "--wait", "--poll", "50ms")
	eventually(t, "waiting", func() bool { return strings.Contains(r.stderr.String(), "STARTING_DECOMMISSION") })
	if err := local.Report(context.Background(), time.Time{}, apitest.Machine{ID: "wt-back", Host: "h", Rack: "r", Lost: true}); err != nil {
		t.Fatal(err)
	}
	r.result(t).wantErrorLast(t, exitElsewhere, "wt-back: went to DEAD, not DECOMMISSIONED: Machine reported lost")

	fleetctl(t, none, nil, "wait", "wt-back", "--for", "state=active", "--wait-timeout", "300ms", "--poll", "50ms").want(t, exitWaitTimeout)
	r = start(t, nil, "wait", "wt-back", "--for", "state=active", "--poll", "50ms")
	eventually(t, "waiting", func() bool { return strings.Contains(r.stderr.String(), "DEAD") })
	fleetctl(t, none, nil, "delete", "wt-back").want(t, 0)
	r.result(t).wantErrorLast(t, exitElsewhere, "wt-back: deleted while waiting for ACTIVE")
}

// An interrupted wait says so once, as every interrupted command does, and
// a wait for a machine that never existed is "not found", as show says.
func TestAnInterruptedWaitSaysSoOnceAndAnUnknownMachineIsNotFound(t *testing.T) {
	settleDrains(t)
	machines(t, "wt-int")
	fleetctl(t, apitest.None, nil, "decommission", "wt-int").want(t, 0)
	r := start(t, nil, "wait", "wt-int", "--for", "state=decommissioned", "--poll", "50ms")
	eventually(t, "waiting", func() bool { return strings.Contains(r.stderr.String(), "STARTING_DECOMMISSION") })
	r.cmd.Process.Signal(syscall.SIGINT)
	res := r.result(t)
	res.wantErrorLast(t, 130, "interrupted (interrupt)")
	if n := strings.Count(res.stderr, "fleetctl:"); n != 1 {
		t.Errorf("got stderr %q, want the progress and one line of error, not %d", res.stderr, n)
	}
	fleetctl(t, apitest.None, nil, "activate", "wt-int").want(t, 0)

	fleetctl(t, apitest.None, nil, "wait", "wt-never-was", "--for", "state=active", "--poll", "50ms").
		wantErrorLast(t, exitNotFound, "wt-never-was: no such machine (waiting for ACTIVE)")
}

// A budget of 0 allows no disruption: refused before anything is read or
// changed, never taken for 1.
func TestAGuardOfZeroChangesNothing(t *testing.T) {
	poolMachines(t, "zero", 3)
	for _, zero := range []string{"0", "0%"} {
		fleetctl(t, apitest.None, nil, "freeze", "-l", "pool=zero", "--max-unavailable", zero, "--yes").
			wantError(t, exitUsage, "a budget of 0 allows no machine to be unavailable")
	}
	if got := fleetctl(t, apitest.None, nil, "list", "--state", "frozen", "zero-*", "-o", "name").want(t, 0).stdout; got != "" {
		t.Errorf("got frozen\n%s\nwant none", got)
	}
}

// wantErrorLast checks the exit code and the last line of stderr, after
// the lines of progress.
func (r result) wantErrorLast(t *testing.T, code int, want string) {
	t.Helper()
	r.want(t, code)
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "fleetctl: "+want {
		t.Errorf("got last line %q, want %q", last, "fleetctl: "+want)
	}
}

// guardChecker polls the API while a change runs and remembers the most
// machines of a pool it saw unavailable at once.
func guardChecker(t *testing.T, pool string, unavailable func(client.State) bool) (stop func() int) {
	t.Helper()
	c := api(t)
	done := make(chan struct{})
	worst := make(chan int)
	go func() {
		most := 0
		for {
			all, err := c.ListSlaves(context.Background(), "")
			if err == nil {
				n := 0
				for _, s := range all {
					if s.Attributes["pool"] == pool && unavailable(s.CurrentState.State) {
						n++
					}
				}
				most = max(most, n)
			}
			select {
			case <-done:
				worst <- most
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(done)
		return <-worst
	}
}

func poolMachines(t *testing.T, pool string, n int) []string {
	t.Helper()
	var ms []apitest.Machine
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%02d", pool, i)
		ids = append(ids, id)
		ms = append(ms, apitest.Machine{ID: id, Host: id + ".example.com", Rack: []string{"r1", "r2"}[i%2],
			Attributes: map[string]string{"pool": pool, "type": "m5"}, RunningTasks: 1})
	}
	if err := local.Report(context.Background(), time.Time{}, ms...); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestSelectorsChangeUnderTheGuardAndAskFirst(t *testing.T) {
	ids := poolMachines(t, "grd", 20)
	none := apitest.None
	fleetctl(t, none, nil, "freeze", ids[0], ids[1], "--yes").want(t, 0)

	// Without a terminal and without --yes: the plan is shown, nothing
	// changes.
	refused := fleetctl(t, none, nil, "freeze", "-l", "pool=grd", "-l", "type=m5")
	refused.wantError(t, exitUsage, "no terminal to confirm on: add --yes")
	if !strings.HasPrefix(refused.stdout, "ID ") || strings.Count(refused.stdout, "\n") != 21 {
		t.Errorf("got\n%s\nwant the table of the 20 machines", refused.stdout)
	}
	if got := fleetctl(t, none, nil, "list", "--state", "frozen", "grd-*", "-o", "name").want(t, 0).stdout; got != "grd-00\ngrd-01\n" {
		t.Fatalf("got frozen %q, want only the two frozen before", got)
	}

	stop := guardChecker(t, "grd", func(s client.State) bool { return s != client.Active })
	res := fleetctl(t, none, nil, "freeze", "-l", "pool=grd", "--max-unavailable", "25%", "-j", "4", "--yes", "-m", "rolling")
	most := stop()
	res.want(t, exitHeld)
	if most > 5 {
		t.Errorf("the checker saw %d machines of the pool out of ACTIVE at once, want at most 5 (25%% of 20)", most)
	}
	if !strings.Contains(res.stdout, "grd-00: already FROZEN\ngrd-01: already FROZEN\ngrd-02: FROZEN\ngrd-03: FROZEN\ngrd-04: FROZEN\n") {
		t.Errorf("got stdout\n%s\nwant the two already frozen and three more, in id order", res.stdout)
	}
	if strings.Count(res.stderr, ": not started: --max-unavailable 5 reached\n") != 15 ||
		!strings.Contains(res.stderr, "freeze: 5 started, 15 not started (at most 5 out of ACTIVE, 2 already were), 4 at once\n") {
		t.Errorf("got stderr\n%s\nwant 15 machines named as not started and the summary", res.stderr)
	}
	if got := fleetctl(t, none, nil, "list", "--state", "frozen", "grd-*", "-o", "name").want(t, 0).stdout; strings.Count(got, "\n") != 5 {
		t.Errorf("got frozen\n%s\nwant 5", got)
	}

	back := fleetctl(t, none, nil, "activate", "--host", "grd-*.example.com", "--rack", "r?", "--yes").want(t, 0)
	if strings.Count(back.stdout, ": ACTIVE\n") != 5 || strings.Count(back.stdout, ": already ACTIVE\n") != 15 {
		t.Errorf("got\n%s\nwant 5 activated and 15 already active", back.stdout)
	}
	fleetctl(t, none, nil, "freeze", "-l", "pool=nope", "--yes").want(t, 0)
	fleetctl(t, none, nil, "freeze", "grd-00", "--rack", "r1").wantError(t, exitUsage, "not both")
}

func TestADrainBySelectorKeepsAtMostNDrainingAndWaitsForEach(t *testing.T) {
	settleDrains(t)
	ids := poolMachines(t, "dsel", 4)
	// The scheduler's side: each drain is reported with tasks, then without.
	stopDriver := make(chan struct{})
	driven := make(chan struct{})
	go func() {
		defer close(driven)
		c := api(t)
		seen := map[string]int{}
		for {
			select {
			case <-stopDriver:
				return
			case <-time.After(30 * time.Millisecond):
			}
			all, err := c.ListSlaves(context.Background(), "")
			if err != nil {
				continue
			}
			for _, s := range all {
				if s.Attributes["pool"] == "dsel" && draining(s.CurrentState.State) {
					seen[s.ID]++
					local.Report(context.Background(), time.Time{}, apitest.Machine{ID: s.ID, Host: s.Host, Rack: s.RackID,
						Attributes: s.Attributes, RunningTasks: max(3-seen[s.ID], 0)})
				}
			}
		}
	}()
	stop := guardChecker(t, "dsel", draining)
	res := fleetctl(t, apitest.None, nil, "decommission", "-l", "pool=dsel", "--wait", "--max-unavailable", "1", "--poll", "30ms", "--yes")
	most := stop()
	close(stopDriver)
	<-driven
	res.want(t, 0)
	if most != 1 {
		t.Errorf("the checker saw at most %d of the pool draining at once, want 1", most)
	}
	for _, id := range ids {
		if !strings.Contains(res.stdout, id+": DECOMMISSIONED\n") || stateOf(t, id) != client.Decommissioned {
			t.Errorf("got stdout\n%s\nwant %s DECOMMISSIONED", res.stdout, id)
		}
	}
	if !strings.Contains(res.stderr, "decommission: 4 started, 0 not started (at most 1 draining at once, 0 already were), 1 at once\n") {
		t.Errorf("got stderr\n%s\nwant the summary", res.stderr)
	}
}

func TestLogsFollowPrintsEachNewLogOnceUntilInterrupted(t *testing.T) {
	put := func(task, name string) string {
		key, err := local.PutLog(context.Background(), apitest.Log{TaskID: task, Filename: name, Modified: time.Now(), Body: []byte("x\n")})
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	now := time.Now().UnixMilli()
	first := put(fmt.Sprintf("flw-d1-%d-0-node1-r1", now), "stdout")
	put(fmt.Sprintf("flw-d1-%d-1-node2-r1", now), "stdout")
	put(fmt.Sprintf("flw-d1-%d-0-node1-r1", now), "stderr")
	g := newGateway(t, false)
	r := start(t, g.env(), "logs", "follow", "--request", "flw", "--poll", "100ms", "--host", "node1", "--file", "std*t")
	eventually(t, "the first log shown", func() bool { return r.stdout.String() == first+"\n" })
	later := put(fmt.Sprintf("flw-d2-%d-0-node1-r1", now+1), "stdout")
	eventually(t, "the new log shown", func() bool { return strings.Contains(r.stdout.String(), later) })
	g.polled(t, 3) // a few more polls print nothing again
	r.cmd.Process.Signal(syscall.SIGINT)
	res := r.result(t)
	res.want(t, 130)
	if res.stdout != first+"\n"+later+"\n" {
		t.Errorf("got\n%s\nwant each of node1's stdout logs once, in order", res.stdout)
	}
	// The first keys are older logs: the first line says since when.
	window := regexp.MustCompile(`^fleetctl: following the logs of request flw: first those that landed since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \(the last 10m, --since's default\), then each new one as it lands\n`)
	m := window.FindStringSubmatch(res.stderr)
	if m == nil || !strings.HasSuffix(res.stderr, "\nfleetctl: interrupted (interrupt)\n") || strings.Count(res.stderr, "\n") != 2 {
		t.Fatalf("got stderr %q, want the window said, then the interrupt", res.stderr)
	}
	if since, err := time.ParseInLocation(time.DateTime, m[1], time.UTC); err != nil || time.Since(since) < 10*time.Minute || time.Since(since) > 15*time.Minute {
		t.Errorf("got the window since %s (%v), want 10 minutes before the follow started", m[1], err)
	}

	// --fetch downloads each into the cache and prints its path.
	cache := t.TempDir()
	r = start(t, []string{"FLEETCTL_CACHE_DIR=" + cache}, "logs", "follow", "--request", "flw", "--deploy", "d2", "--poll", "100ms", "--fetch", "--since", "1h")
	eventually(t, "the log fetched", func() bool { return strings.HasSuffix(r.stdout.String(), later+"\n") })
	r.cmd.Process.Signal(syscall.SIGINT)
	if res := r.result(t).want(t, 130); !strings.HasPrefix(res.stderr, "fleetctl: following the logs of request flw deploy d2: first those that landed since ") ||
		!strings.Contains(res.stderr, " (--since 1h), then each new one as it lands\n") {
		t.Errorf("got stderr %q, want the window of --since 1h said first", res.stderr)
	}
	path := strings.TrimSuffix(r.stdout.String(), "\n")
	if got, err := os.ReadFile(path); err != nil || string(got) != "x\n" || !strings.HasPrefix(path, cache) {
		t.Errorf("got %s: %q (%v), want the log in the cache", path, got, err)
	}
}

func TestGrepContextIsWhatGrepPrints(t *testing.T) {
	base := time.Now().Add(-time.Hour)
	var keys []string
	for i, body := range []string{"a\nb\nERR 1\nc\nd\ne\nf\nERR 2\nERR 3\ng\n", "x\nERR 9\ny\n"} {
		key, err := local.PutLog(context.Background(), apitest.Log{TaskID: fmt.Sprintf("ctx-d1-%d-%d-node%d-r1", base.UnixMilli(), i, i),
			Filename: "out.log", Modified: base.Add(time.Duration(i) * time.Minute), Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	env := []string{"FLEETCTL_CACHE_DIR=" + t.TempDir()}
	got := fleetctl(t, apitest.None, env, "logs", "grep", "--request", "ctx", "--since", "1d", "-C", "1", "ERR").want(t, 0).stdout
	k, l := keys[0], keys[1]
	want := k + "-2-b\n" + k + ":3:ERR 1\n" + k + "-4-c\n--\n" + k + "-7-f\n" + k + ":8:ERR 2\n" + k + ":9:ERR 3\n" + k + "-10-g\n--\n" +
		l + "-1-x\n" + l + ":2:ERR 9\n" + l + "-3-y\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got = fleetctl(t, apitest.None, env, "logs", "grep", "--request", "ctx", "--since", "1d", "-A", "1", "-B", "0", "--host", "node1", "ERR").want(t, 0).stdout
	if want := l + ":2:ERR 9\n" + l + "-3-y\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestTheServiceLimitStaysTheHardStopReportedPerMachine(t *testing.T) {
	settleDrains(t)
	poolMachines(t, "lim", 3)
	res := fleetctl(t, apitest.None, nil, "decommission", "-l", "pool=lim", "-j", "1", "--yes")
	res.want(t, exitRefused)
	if !strings.HasSuffix(res.stdout, "lim-00: STARTING_DECOMMISSION\nlim-01: STARTING_DECOMMISSION\n") {
		t.Errorf("got stdout\n%s\nwant the first two started", res.stdout)
	}
	if !strings.Contains(res.stderr, "fleetctl: lim-02: refused (400): 2 slaves are already decommissioning state (2 allowed at once)") {
		t.Errorf("got stderr\n%s\nwant the service's refusal of the third, in its words", res.stderr)
	}
	settleDrains(t)
}

// list selects as the change commands do, so that a change's selection can
// be listed first with the same flags: for each selection, list -o name
// names exactly the machines freeze --dry-run would change.
func TestListSelectsAsTheChangeCommandsDo(t *testing.T) {
	var ms []apitest.Machine
	for i := range 8 {
		ms = append(ms, apitest.Machine{ID: fmt.Sprintf("pvw-%d", i), Host: fmt.Sprintf("pvw%d.rack%d.example.com", i, i%2), Rack: []string{"r-east", "r-west"}[i%2],
			Attributes: map[string]string{"pool": "pvw", "type": []string{"m5", "c6"}[i/4]}, RunningTasks: 1})
	}
	if err := local.Report(context.Background(), time.Time{}, ms...); err != nil {
		t.Fatal(err)
	}
	none := apitest.None
	fleetctl(t, none, nil, "freeze", "pvw-2", "pvw-5", "--yes").want(t, 0)

	for _, tc := range []struct {
		name string
		sel  []string
		want string
	}{
		{"a label", []string{"-l", "pool=pvw"}, "pvw-0 pvw-1 pvw-2 pvw-3 pvw-4 pvw-5 pvw-6 pvw-7"},
		{"two labels, both matching", []string{"-l", "pool=pvw", "-l", "type=c6"}, "pvw-4 pvw-5 pvw-6 pvw-7"},
		{"a rack glob and a label", []string{"--rack", "r-w*", "-l", "pool=pvw"}, "pvw-1 pvw-3 pvw-5 pvw-7"},
		{"a host glob", []string{"--host", "pvw?.rack0.*"}, "pvw-0 pvw-2 pvw-4 pvw-6"},
		{"a state and a label", []string{"--state", "frozen", "-l", "pool=pvw"}, "pvw-2 pvw-5"},
		{"a label no machine has", []string{"-l", "pool=pvw", "-l", "type=t3"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed := strings.Fields(fleetctl(t, none, nil, append([]string{"list", "-o", "name"}, tc.sel...)...).want(t, 0).stdout)
			if got := strings.Join(listed, " "); got != tc.want {
				t.Errorf("list %s: got %q, want %q", strings.Join(tc.sel, " "), got, tc.want)
			}
			// The dry run answers for each machine it selected: "would
			// freeze" on stdout, the service's refusal (already FROZEN) on
			// stderr.
			var selected []string
			dry := fleetctl(t, none, nil, append([]string{"freeze", "--dry-run"}, tc.sel...)...)
			for _, line := range strings.Split(dry.stdout+dry.stderr, "\n") {
				if id, _, ok := strings.Cut(line, ": would freeze"); ok {
					selected = append(selected, id)
				} else if rest, ok := strings.CutPrefix(line, "fleetctl: pvw-"); ok {
					id, _, _ := strings.Cut(rest, ":")
					selected = append(selected, "pvw-"+id)
				}
			}
			slices.Sort(selected)
			if !slices.Equal(listed, selected) {
				t.Errorf("list %[1]s names %[2]q, but freeze --dry-run %[1]s selects %[3]q (stderr %[4]s)", strings.Join(tc.sel, " "), listed, selected, dry.stderr)
			}
		})
	}

	// A PATTERN narrows a selection further, as --state always did.
	if got := fleetctl(t, none, nil, "list", "-l", "type=c6", "pvw-[67]", "*.rack0.*", "-o", "name").want(t, 0).stdout; got != "pvw-4\npvw-6\npvw-7\n" {
		t.Errorf("got %q, want the c6 machines whose id or host matches a pattern", got)
	}
	fleetctl(t, none, nil, "list", "-l", "pool").wantError(t, exitUsage, `-l "pool": want key=value`)
	fleetctl(t, none, nil, "list", "--rack", "r-[").wantError(t, exitUsage, `--rack "r-["`)
	fleetctl(t, none, nil, "list", "-l", "type=m5", "-l", "type=c6").wantError(t, exitUsage, "can never match")
}
