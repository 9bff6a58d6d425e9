package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestAPrebuiltFuzzBinaryRunsOverItsCorpus builds a package's fuzz binary
// as the runner does and runs one of its targets for a few thousand
// executions, in its package and, for comparison, as if its package had no corpus: the
// baseline the first gathers holds inputs of the target's corpus in
// testdata/fuzz besides its seeds, so the binary ran in its package's
// directory, as go test -fuzz runs it. The budget is a count, not a time:
// a timed run can fail on a slow machine when Go's fuzz coordinator races
// its own deadline (go.dev/issue/75804), which a count has none of.
func TestAPrebuiltFuzzBinaryRunsOverItsCorpus(t *testing.T) {
	t.Chdir("../..")
	all, err := fuzzTargets()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(tg target) bool {
		return strings.HasSuffix(tg.pkg, "/shared/logkey") && tg.name == "FuzzParseTaskID"
	})
	if i < 0 {
		t.Fatalf("no FuzzParseTaskID among %v", all)
	}
	tg := all[i]
	corpus, err := os.ReadDir(filepath.Join(tg.dir, "testdata", "fuzz", tg.name))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	// Not niced: make test keeps both CPUs busy, and would starve it.
	if err := buildFuzzBinaries(bin, []target{tg}, nil); err != nil {
		t.Fatal(err)
	}
	baseline := func(tg target) int64 {
		out, err := fuzz(io.Discard, bin, t.TempDir(), tg, "2000x", time.Second)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		m := regexp.MustCompile(`gathering baseline coverage: 0/(\d+) completed`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no baseline in:\n%s", out)
		}
		return atoi(m[1])
	}
	seeds := tg
	seeds.dir = t.TempDir()
	// The corpus repeats some seeds, which the baseline holds once.
	if got := baseline(tg) - baseline(seeds); got <= 0 {
		t.Errorf("got a baseline of %d inputs besides the seeds, want those of the %d files of its corpus", got, len(corpus))
	}
}

// TestBuildsAreNicedOnlyUntilTheSuiteEnds runs a command that prints its
// nice value the way the runner runs its builds: at nice 19 while the
// suite runs, at the caller's priority once it has ended. A niced build
// beside other busy processes hardly moves.
func TestBuildsAreNicedOnlyUntilTheSuiteEnds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the nice value as Linux gives it")
	}
	if _, err := exec.LookPath("nice"); err != nil {
		t.Skip("no nice command")
	}
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := strconv.Itoa(20 - prio) // the kernel's value is 20 - nice
	ended := make(chan struct{})
	close(ended)
	for _, c := range []struct {
		name      string
		niceUntil chan struct{}
		want      string
	}{
		{"while the suite runs", make(chan struct{}), "19"},
		{"once it has ended", ended, own},
		{"when never niced", nil, own},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := build([]string{"run", "./testdata/niceness"}, c.niceUntil)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != c.want {
				t.Errorf("got nice %s, want %s", got, c.want)
			}
		})
	}
}
