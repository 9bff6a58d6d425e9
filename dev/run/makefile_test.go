package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/dev/stack"
)

// make help is the Makefile's header, and the header names every target a
// user runs: all of .PHONY but the build-<LogicalId> targets sam build
// calls.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(root + "/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	phony := regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindSubmatch(makefile)
	if phony == nil {
		t.Fatal("the Makefile has no .PHONY line")
	}
	cmd := exec.Command("make", "--no-print-directory", "-s", "help")
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*make ([a-z-]+)\s+\S`).FindAllStringSubmatch(string(out), -1) {
		listed[m[1]] = true
	}
	targets := 0
	for _, target := range strings.Fields(string(phony[1])) {
		if strings.HasPrefix(target, "build-") || strings.HasPrefix(target, "$(") {
			continue
		}
		targets++
		if !listed[target] {
			t.Errorf("make help does not list make %s:\n%s", target, out)
		}
	}
	if targets < 15 {
		t.Errorf("got %d targets in .PHONY, want every one the Makefile has", targets)
	}
}
