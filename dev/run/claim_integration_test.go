//go:build integration

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/stack"
)

// make invoke started while make run is still starting its emulator, as a
// person does it from a second terminal: the real binaries of both, as
// make builds them, each a process of its own. make run's emulator is slow
// to start, as on a busy machine (its Python waits until make invoke has
// said that it waits, however long that takes): make invoke must wait for
// it, say so, and apply its report there, instead of starting an emulator
// of its own on the same port ("Address already in use").
func TestMakeInvokeStartedWhileMakeRunStartsWaitsForItAndSucceeds(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	build := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	build("go", "build", "-o", filepath.Join(dir, "run"), "./dev/run")
	build("go", "build", "-o", filepath.Join(dir, "invoke"), "./dev/invoke")
	build("make", "--no-print-directory", "-s", "build-InventoryFunction", "ARTIFACTS_DIR="+filepath.Join(dir, "fn"),
		"LAMBDA_GOOS="+runtime.GOOS, "LAMBDA_GOARCH="+runtime.GOARCH)
	// The emulator starts once the test opens the gate, not after a fixed
	// time that make invoke might need more than to get there.
	gate := filepath.Join(dir, "gate")
	openGate := func() { _ = os.WriteFile(gate, nil, 0o644) }
	t.Cleanup(openGate)
	slowPython := filepath.Join(dir, "slow-python")
	script := fmt.Sprintf("#!/bin/sh\nwhile [ ! -e %q ]; do sleep 0.05; done\nexec python3 \"$@\"\n", gate)
	if err := os.WriteFile(slowPython, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	port, emulator := freePort(t), "127.0.0.1:"+freePort(t)
	env := append(os.Environ(), "PORT="+port, "EMULATOR_ADDR="+emulator, "MOTO_PYTHON="+slowPython)

	server := &makeRun{done: make(chan error, 1)}
	server.cmd = exec.Command(filepath.Join(dir, "run"))
	server.cmd.Dir, server.cmd.Env = root, env
	server.cmd.Stdout, server.cmd.Stderr = server, server
	server.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := server.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { server.done <- server.cmd.Wait() }()
	t.Cleanup(func() {
		_ = server.cmd.Process.Signal(os.Interrupt)
		select {
		case <-server.done:
		case <-time.After(20 * time.Second):
			_ = server.cmd.Process.Kill()
		}
	})
	starting := "local stack: starting moto on " + emulator
	for deadline := time.Now().Add(time.Minute); !strings.Contains(server.output(), starting); {
		select {
		case err := <-server.done:
			t.Fatalf("make run ended (%v) before starting moto:\n%s", err, server.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("make run does not start moto within a minute:\n%s", server.output())
		}
	}

	invoke := exec.Command(filepath.Join(dir, "invoke"), "-function", "InventoryFunction",
		"-event", "events/inventory-machine-report.json", "-binary", filepath.Join(dir, "fn", "bootstrap"))
	invoke.Dir, invoke.Env = root, env
	var stdout bytes.Buffer
	invoked := &makeRun{cmd: invoke, done: make(chan error, 1)} // its stderr
	invoke.Stdout, invoke.Stderr = &stdout, invoked
	if err := invoke.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { invoked.done <- invoke.Wait() }()
	waiting := fmt.Sprintf("local stack: waiting for make run (pid %d) to finish starting the emulator on %s…", server.cmd.Process.Pid, emulator)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(invoked.output(), waiting); {
		select {
		case err := <-invoked.done:
			t.Fatalf("make invoke ended (%v) without waiting for make run, want %q:\n%s\n--- make run\n%s", err, waiting, invoked.output(), server.output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("make invoke does not wait for make run within a minute:\n%s", invoked.output())
		}
	}
	openGate()
	select {
	case err := <-invoked.done:
		if err != nil {
			t.Fatalf("make invoke failed (%v):\n%s\n--- make run\n%s", err, invoked.output(), server.output())
		}
	case <-time.After(5 * time.Minute):
		_ = invoke.Process.Kill()
		t.Fatalf("make invoke still runs 5 minutes after make run's emulator may start:\n%s\n--- make run\n%s", invoked.output(), server.output())
	}
	if strings.Contains(invoked.output(), "started moto") {
		t.Errorf("make invoke started an emulator of its own:\n%s\n--- make run\n%s", invoked.output(), server.output())
	}
	var res struct{ Machines, Changed, Failed int }
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Machines != 3 || res.Changed != 3 || res.Failed != 0 {
		t.Errorf("make invoke answered %s (%v), want the 3 machines applied", stdout.String(), err)
	}

	select {
	case err := <-server.done:
		t.Fatalf("make run ended (%v):\n%s", err, server.output())
	default:
	}
	// What it applied is make run's: its server lists the three machines.
	res2, err := http.Get("http://127.0.0.1:" + port + "/api/slaves")
	if err != nil {
		t.Fatal(err)
	}
	defer res2.Body.Close()
	var slaves []json.RawMessage
	if err := json.NewDecoder(res2.Body).Decode(&slaves); err != nil || len(slaves) != 3 {
		t.Errorf("make run lists %d slaves (%v), want the 3 make invoke reported", len(slaves), err)
	}
}
