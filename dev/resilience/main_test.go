package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestFuzzTargetsAreWhatGoTestLists compares the targets found by parsing
// with go test -list's, for packages with several, one and no targets, in
// the package's own test files and in its external test package.
func TestFuzzTargetsAreWhatGoTestLists(t *testing.T) {
	t.Chdir("../..") // make test-resilience runs from the repository's root
	pkgs := []string{"github.com/fleetops/fleet/shared/logkey", "github.com/fleetops/fleet/cmd/fleetctl", "github.com/fleetops/fleet/shared/web", "github.com/fleetops/fleet/shared/logs"}
	all, err := fuzzTargets()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range all {
		if slices.Contains(pkgs, tg.pkg) {
			got = append(got, tg.pkg+" "+tg.name)
		}
	}
	out, err := exec.Command("go", append([]string{"test", "-list", "^Fuzz"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go test -list: %v\n%s", err, out)
	}
	var want, names []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 1 && strings.HasPrefix(fields[0], "Fuzz"):
			names = append(names, fields[0])
		case len(fields) >= 2 && fields[0] == "ok":
			for _, n := range names {
				want = append(want, fields[1]+" "+n)
			}
			names = nil
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 5 || !slices.Equal(got, want) {
		t.Errorf("got targets %q, want go test's %q", got, want)
	}
}

func TestFuzzNames(t *testing.T) {
	for name, want := range map[string]bool{"Fuzz": true, "FuzzParse": true, "Fuzz_x": true, "Fuzz2": true, "Fuzzy": false, "fuzzParse": false, "TestFuzz": false} {
		if got := isFuzzName(name); got != want {
			t.Errorf("isFuzzName(%q) = %v, want %v", name, got, want)
		}
	}
}
