//go:build integration

package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetops/fleet/dev/stack"
)

// A build without make's linked version, as go install from a clone makes
// it, says the clone's commit, and -dirty once the clone has changes.
func TestAGoBuildOfACloneSaysItsCommit(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "fleet")
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", clone}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// The clone holds the commit; the code under test is the working
	// tree's, committed in the clone on top of it.
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			os.Remove(filepath.Join(clone, name)) // deleted in the working tree
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(clone, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	git("-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "--allow-empty", "-m", "the working tree")
	commit := git("rev-parse", "HEAD")
	build := func() string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "fleetctl")
		// -buildvcs=true whatever GOFLAGS says: a shell's default (auto)
		// stamps a build in a clone.
		cmd := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/fleetctl")
		cmd.Dir = clone
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("fleetctl version: %v", err)
		}
		return string(out)
	}
	if got, want := build(), "fleetctl "+commit[:12]+"\n"; got != want {
		t.Errorf("clean clone: got %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(clone, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := build(), "fleetctl "+commit[:12]+"-dirty\n"; got != want {
		t.Errorf("changed clone: got %q, want %q", got, want)
	}
}
