// Command resilience is `make test-resilience`. It runs, from the
// repository root:
//
//  1. the resilience suite of this package (build tag resilience): concurrent
//     changes, machine reports racing users, and backend faults injected at
//     the SDK's HTTP layer, against a moto_server of its own; random
//     sequences of operations checked against a reference model; and
//     concurrent histories of one slave checked for linearizability;
//  2. the hostile-input and access-control tests of every package
//     (TestHostile*, TestAccess*, with the integration tag), unless
//     -hostile=false (CI, where make test has just run them);
//  3. every fuzz target of the unit tests (the Fuzz functions go test runs) for
//     -fuzztime each, from its corpus in testdata/fuzz;
//
// and prints one summary line with the figures: requests driven, faults
// injected, model-checked operations, linearizability checks, fuzz
// executions and invariant violations. It exits non-zero when any step
// fails.
//
// The steps run one after the other. The suite once ran beside the fuzz
// targets, to use the CPU it leaves while it waits on moto: its test of log
// lookups under S3 faults then had every lookup miss its deadline (5 s to
// list) on CI's two CPUs.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

func main() {
	fuzztime := flag.Duration("fuzztime", 20*time.Second, "how long each fuzz target runs")
	hostile := flag.Bool("hostile", true, "run the hostile-input and access-control tests too (make test runs them)")
	flag.Parse()
	if err := run(*fuzztime, *hostile); err != nil {
		fmt.Fprintln(os.Stderr, "resilience:", err)
		os.Exit(1)
	}
}

// summary holds the figures of the final line.
type summary struct {
	requests, faults, violations int64
	modelOps, linChecks          int64
	fuzzTargets                  int
	fuzzExecs                    int64
	failed                       []string
}

func run(fuzztime time.Duration, hostile bool) error {
	start := time.Now()
	var s summary

	out, err := goTest("-tags", "resilience", "-count=1", "-v", "./dev/resilience")
	if err != nil {
		s.failed = append(s.failed, "suite")
	}
	if m := regexp.MustCompile(`resilience-figures: requests=(\d+) faults=(\d+) violations=(\d+) model_ops=(\d+) lin_checks=(\d+)`).FindSubmatch(out); m != nil {
		s.requests, s.faults, s.violations = atoi(m[1]), atoi(m[2]), atoi(m[3])
		s.modelOps, s.linChecks = atoi(m[4]), atoi(m[5])
	} else {
		s.failed = append(s.failed, "suite figures")
	}

	if hostile {
		if _, err := goTest("-tags", "integration", "-count=1", "-run", "^(TestHostile|TestAccess)", "./..."); err != nil {
			s.failed = append(s.failed, "hostile input and access control")
		}
	}

	targets, err := fuzzTargets()
	if err != nil {
		return err
	}
	execs := regexp.MustCompile(`execs: (\d+)`)
	for _, tg := range targets {
		out, err := goTest("-run", "^$", "-fuzz", "^"+tg.name+"$", "-fuzztime", fuzztime.String(), tg.pkg)
		if err != nil && coordinatorRace(out) {
			// Not a finding: the corpus, new inputs included, must still
			// pass when run as tests.
			fmt.Printf("resilience: %s ended on Go's fuzz deadline race (go.dev/issue/75804) with no failing input; running its corpus\n", tg.name)
			_, err = goTest("-run", "^"+tg.name+"$", "-count=1", tg.pkg)
		}
		if err != nil {
			s.failed = append(s.failed, tg.pkg+" "+tg.name)
		}
		var most int64
		for _, m := range execs.FindAllSubmatch(out, -1) {
			most = max(most, atoi(m[1]))
		}
		s.fuzzTargets++
		s.fuzzExecs += most
	}

	verdict := "PASS"
	if len(s.failed) > 0 || s.violations > 0 {
		verdict = "FAIL (" + strings.Join(s.failed, ", ") + ")"
	}
	fmt.Printf("\nresilience: requests driven %d, faults injected %d, model-checked operations %d, linearizability checks %d, fuzz executions %d (%d targets, %v each), invariant violations %d, %s in %v\n",
		s.requests, s.faults, s.modelOps, s.linChecks, s.fuzzExecs, s.fuzzTargets, fuzztime, s.violations, verdict, time.Since(start).Round(time.Second))
	if verdict != "PASS" {
		return fmt.Errorf("failed")
	}
	return nil
}

// coordinatorRace reports whether a fuzz run failed only because Go's fuzz
// coordinator lost a race with its own -fuzztime deadline (fixed in Go
// 1.27): the target fails with "context deadline exceeded" at the deadline
// and no failing input is written. A real finding always writes one.
func coordinatorRace(out []byte) bool {
	return bytes.Contains(out, []byte("\n    context deadline exceeded\n")) && !bytes.Contains(out, []byte("Failing input written to"))
}

// goTest runs go test with args, showing its output as it goes, and returns
// the output.
func goTest(args ...string) ([]byte, error) {
	fmt.Println("$ go test", strings.Join(args, " "))
	var buf bytes.Buffer
	cmd := exec.Command("go", append([]string{"test"}, args...)...)
	cmd.Stdout = &tee{&buf}
	cmd.Stderr = &tee{&buf}
	err := cmd.Run()
	return buf.Bytes(), err
}

// tee copies what it is given to stdout and keeps it.
type tee struct{ buf *bytes.Buffer }

func (t *tee) Write(p []byte) (int, error) {
	t.buf.Write(p)
	return os.Stdout.Write(p)
}

type target struct{ pkg, name string }

// fuzzTargets lists the fuzz targets of the unit tests (no build tags),
// the ones go test ./... also runs on their corpus: the Fuzz functions of
// the test files go list names for the default build, found by parsing
// them. go test -list would link and run every test binary of the module
// (about 40 CPU-seconds) to name ten functions.
func fuzzTargets() ([]target, error) {
	// A line a test file: its package's import path, a tab, its path.
	format := "{{range .TestGoFiles}}{{$.ImportPath}}\t{{$.Dir}}/{{.}}\n{{end}}{{range .XTestGoFiles}}{{$.ImportPath}}\t{{$.Dir}}/{{.}}\n{{end}}"
	out, err := exec.Command("go", "list", "-f", format, "./...").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("list test files: %w\n%s", err, exit.Stderr)
		}
		return nil, fmt.Errorf("list test files: %w", err)
	}
	var targets []target
	for _, line := range strings.Split(string(out), "\n") {
		pkg, file, ok := strings.Cut(line, "\t")
		if !ok {
			continue // the empty lines of packages without test files
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("list fuzz targets: %w", err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && isFuzzName(fn.Name.Name) {
				targets = append(targets, target{pkg: pkg, name: fn.Name.Name})
			}
		}
	}
	return targets, nil
}

// isFuzzName is go test's rule for a fuzz target's name: Fuzz, then
// nothing or anything that does not start with a lower-case letter.
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	if !ok {
		return false
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return rest == "" || !unicode.IsLower(r)
}

func atoi(b []byte) int64 {
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}
