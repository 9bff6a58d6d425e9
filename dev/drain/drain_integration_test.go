//go:build integration

package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/stack"
)

// syncBuffer is a process's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a command started in its own process group, as from a terminal.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
}

func startProc(t *testing.T, dir string, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), done: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// waitFor waits until cond holds or the process ends, for up to limit (a
// bound on a hung step on a loaded machine, not a figure).
func (p *proc) waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case <-p.done:
			t.Fatalf("%v ended (%v) before %s\nstdout: %s\nstderr: %s", p.cmd.Args, p.cmd.ProcessState, what, p.stdout.String(), p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: still not %s after %s\nstdout: %s\nstderr: %s", p.cmd.Args, what, limit, p.stdout.String(), p.stderr.String())
		}
	}
}

// exit waits for the process to end and returns its exit code.
func (p *proc) exit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("%v still runs after %s\nstdout: %s\nstderr: %s", p.cmd.Args, limit, p.stdout.String(), p.stderr.String())
		return -1
	}
}

func goCache(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A local drain as docs/fleetctl.md tells it: make run, the sample machines
// reported, make drain started first (it waits for the decommission), then
// fleetctl decommission --wait, which ends when the reports make drain sends
// through InventoryFunction count the machine's tasks down to 0.
func TestMakeDrainEndsADecommissionThatFleetctlWaitsFor(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	api, emulator := freeAddr(t), freeAddr(t)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "FLEETCTL_") || strings.HasPrefix(k, "MAKE") || k == "MFLAGS" || k == "PORT" || k == "EMULATOR_ADDR" {
			continue
		}
		env = append(env, kv)
	}
	_, port, _ := net.SplitHostPort(api)
	env = append(env, "PORT="+port, "EMULATOR_ADDR="+emulator, "FLEETCTL_ENDPOINT=http://"+api,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "TZ=UTC",
		// Go's build cache stays the user's: under the XDG_CACHE_HOME
		// above, make would compile the SDK anew.
		"GOCACHE="+goCache(t))
	fleetctl := filepath.Join(t.TempDir(), "fleetctl")
	if out, err := exec.Command("go", "build", "-o", fleetctl, filepath.Join(root, "cmd", "fleetctl")).CombinedOutput(); err != nil {
		t.Fatalf("build fleetctl: %v\n%s", err, out)
	}

	server := startProc(t, root, env, "make", "--no-print-directory", "run")
	began := time.Now()
	server.waitFor(t, "serving", 4*time.Minute, func() bool { return strings.Contains(server.stderr.String(), "make run: serving the API") })
	defer func() {
		_ = syscall.Kill(-server.cmd.Process.Pid, syscall.SIGINT)
		server.exit(t, time.Minute)
	}()
	report := startProc(t, root, env, "make", "--no-print-directory", "invoke", "FN=InventoryFunction", "EVENT=events/inventory-machine-report.json")
	if code := report.exit(t, 4*time.Minute); code != 0 {
		t.Fatalf("make invoke: exit code %d\n%s", code, report.stderr.String())
	}

	t.Logf("make run served and make invoke reported in %.1fs", time.Since(began).Seconds())
	const id = "20261121-051400-16777343-5050-1234-S1"
	drain := startProc(t, root, env, "make", "--no-print-directory", "drain", "SLAVE="+id, "FROM=3", "EVERY=1s")
	drain.waitFor(t, "waiting for the decommission", 4*time.Minute, func() bool {
		return strings.Contains(drain.stderr.String(), "drain: "+id+" is ACTIVE: waiting for its decommission (fleetctl decommission "+id+")\n")
	})
	t.Logf("make drain waiting after %.1fs", time.Since(began).Seconds())
	wait := startProc(t, root, env, fleetctl, "decommission", id, "--wait", "--yes", "-m", "retiring", "--wait-timeout", "2m")

	want := id + ": 3 running, DECOMMISSIONING\n" + id + ": 2 running, DECOMMISSIONING\n" + id + ": 1 running, DECOMMISSIONING\n" + id + ": 0 running, DECOMMISSIONED\n"
	if code := drain.exit(t, 3*time.Minute); code != 0 || drain.stdout.String() != want {
		t.Errorf("make drain: got exit code %d, stdout\n%s\nwant 0 and\n%s\nstderr: %s", code, drain.stdout.String(), want, drain.stderr.String())
	}
	if code := wait.exit(t, 3*time.Minute); code != 0 || wait.stdout.String() != id+": DECOMMISSIONED\n" {
		t.Errorf("fleetctl decommission --wait: got exit code %d, stdout %q, want 0 and the machine DECOMMISSIONED\nstderr: %s", code, wait.stdout.String(), wait.stderr.String())
	}
	for _, want := range []string{id + ": DECOMMISSIONING since ", " (1 task running)\n", id + ": DECOMMISSIONED since "} {
		if !strings.Contains(wait.stderr.String(), want) {
			t.Errorf("fleetctl decommission --wait: got stderr\n%s\nwant %q: the drain followed", wait.stderr.String(), want)
		}
	}
	// make run's emulator and tables are used as they are.
	if s := drain.stderr.String(); strings.Contains(s, "creating the tables") {
		t.Errorf("make drain: got stderr\n%s\nwant make run's tables used as they are", s)
	}

	t.Logf("the drain ended after %.1fs", time.Since(began).Seconds())
	// A machine the service does not know, and no machine named.
	unknown := startProc(t, root, env, "make", "--no-print-directory", "drain", "SLAVE=nope")
	if code := unknown.exit(t, 4*time.Minute); code == 0 || !strings.Contains(unknown.stderr.String(), "drain: no machine nope at http://"+api+" (make invoke FN=InventoryFunction") {
		t.Errorf("make drain SLAVE=nope: got exit code %d, stderr\n%s\nwant a failure naming the machine", code, unknown.stderr.String())
	}
	usage := startProc(t, root, env, "make", "--no-print-directory", "drain")
	if code := usage.exit(t, time.Minute); code != 2 || !strings.Contains(usage.stderr.String(), "usage: make drain SLAVE=<id>") {
		t.Errorf("make drain: got exit code %d, stderr\n%s\nwant 2 and the usage", code, usage.stderr.String())
	}
}
