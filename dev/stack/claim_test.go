package stack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The claim of the emulator's address, between processes, as make run and
// a command started meanwhile meet it: the claimant is a process of its
// own (this test binary again, as TestClaimant), since a process's fcntl
// locks do not conflict with its own. dev/run's integration test runs the
// real make run and make invoke.

// TestClaimant is not a test: run by claimant, it claims the address
// FLEET_CLAIM_ADDR as "make run", prints "claimed", then marks the claim
// ready at each line of its stdin, and ends at its end.
func TestClaimant(t *testing.T) {
	addr := os.Getenv("FLEET_CLAIM_ADDR")
	if addr == "" {
		t.Skip("the claimant process of the claim tests")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, holder, err := claimEmulator(root, addr, "make run")
	if err != nil || holder != nil {
		t.Fatalf("claim: got %v, %v", holder, err)
	}
	fmt.Println("claimed")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if err := c.ready(); err != nil {
			t.Fatal(err)
		}
		fmt.Println("ready")
	}
}

// claimant starts a process that claims addr as make run; it returns that
// process and a function that marks the claim ready.
func claimant(t *testing.T, addr string) (pid int, ready func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimant$")
	cmd.Env = append(os.Environ(), "FLEET_CLAIM_ADDR="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "claimed" {
		t.Fatalf("the claimant says %q, want claimed", out.Text())
	}
	return cmd.Process.Pid, func() {
		io.WriteString(stdin, "ready\n")
		out.Scan()
	}
}

// inRepo makes a repository of the test's own the working directory: the
// claims go to its bin/dev/emulator.
func inRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, TemplateFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	return root
}

// lines is a progress writer that tests may read while it is written.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestACommandStartedWhileMakeRunStartsTheEmulatorWaitsForItAndUsesIt(t *testing.T) {
	inRepo(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	pid, ready := claimant(t, addr)

	var progress lines
	type result struct {
		m   *Moto
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := StartMotoWith(context.Background(), addr, Options{Command: "make invoke", Progress: &progress})
		done <- result{m, err}
	}()
	waiting := fmt.Sprintf("local stack: waiting for make run (pid %d) to finish starting the emulator on %s…", pid, addr)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(progress.String(), waiting); {
		if time.Now().After(deadline) {
			t.Fatalf("got %q, want %q", progress.String(), waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("returned %+v, %v while make run is still starting, want a wait", r.m, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	ready()
	select {
	case r := <-done:
		if r.err != nil || r.m.Started || r.m.Endpoint != "http://"+addr {
			t.Fatalf("got %+v, %v, want make run's emulator on %s, not one of its own", r.m, r.err, addr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30 s after make run said it is ready")
	}
	if want := fmt.Sprintf("local stack: make run (pid %d) has finished starting the emulator on %s", pid, addr); !strings.Contains(progress.String(), want) {
		t.Errorf("got %q, want %q", progress.String(), want)
	}
}

func TestACommandWaitsForTheBusyEmulatorOfMakeRunAndSaysWhoseItIs(t *testing.T) {
	inRepo(t)
	// Busy: it takes connections and answers none.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	addr := ln.Addr().String()
	pid, ready := claimant(t, addr)
	ready()

	var progress lines
	owner := fmt.Sprintf("is make run's (pid %d)", pid)
	busy := fmt.Sprintf("local stack: the emulator on %s %s and busy", addr, owner)
	// The command's deadline passes once it has said why it waits, not
	// after a fixed time: how soon it gets there depends on the machine.
	ctx := newExpiring()
	go func() {
		for deadline := time.Now().Add(time.Minute); !strings.Contains(progress.String(), busy) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		ctx.expire()
	}()
	_, err = StartMotoWith(ctx, addr, Options{Command: "make invoke", Progress: &progress})
	if err == nil || !strings.Contains(err.Error(), owner+" and gives no HTTP answer") || strings.Contains(err.Error(), "stop it") {
		t.Errorf("got %v, want an error saying the emulator %s and busy, not to stop it", err, owner)
	}
	if !strings.Contains(progress.String(), busy) {
		t.Errorf("got %q, want %q", progress.String(), busy)
	}
}

// expiring is a context whose deadline passes when the test says so: Err
// is then context.DeadlineExceeded, as for a deadline that came.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func TestAClaimWhoseProcessEndedClaimsNothing(t *testing.T) {
	root := inRepo(t)
	addr := "127.0.0.1:9"
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimant$")
	cmd.Env = append(os.Environ(), "FLEET_CLAIM_ADDR="+addr)
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "claimed") {
		t.Fatalf("claimant: %s, %v", out, err)
	}
	if _, err := os.Stat(ClaimFile(root, addr)); err != nil {
		t.Fatalf("the claimant left no file: %v", err)
	}
	holder, err := claimantOf(root, addr)
	if err != nil || holder != nil {
		t.Errorf("got %v, %v, want no claimant once its process ended", holder, err)
	}
	c, holder, err := claimEmulator(root, addr, "make invoke")
	if err != nil || holder != nil || c == nil {
		t.Fatalf("got %v, %v, %v, want the claim", c, holder, err)
	}
	c.release()
}
