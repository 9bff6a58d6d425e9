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
// to start, as on a busy machine (its Python waits 3 s first): make invoke
// must wait for it, say so, and apply its report there, instead of
// starting an emulator of its own on the same port ("Address already in
// use").
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
	slowPython := filepath.Join(dir, "slow-python")
	if err := os.WriteFile(slowPython, []byte("#!/bin/sh\nsleep 3\nexec python3 \"$@\"\n"), 0o755); err != nil {
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
	var stdout, stderr bytes.Buffer
	invoke.Stdout, invoke.Stderr = &stdout, &stderr
	if err := invoke.Run(); err != nil {
		t.Fatalf("make invoke failed (%v):\n%s\n--- make run\n%s", err, stderr.String(), server.output())
	}
	waiting := fmt.Sprintf("local stack: waiting for make run (pid %d) to finish starting the emulator on %s…", server.cmd.Process.Pid, emulator)
	if !strings.Contains(stderr.String(), waiting) {
		t.Errorf("make invoke said:\n%s\nwant %q", stderr.String(), waiting)
	}
	if strings.Contains(stderr.String(), "started moto") {
		t.Errorf("make invoke started an emulator of its own:\n%s\n--- make run\n%s", stderr.String(), server.output())
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
