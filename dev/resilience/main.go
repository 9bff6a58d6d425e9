// Command resilience is `make test-resilience`. It runs, from the
// repository root:
//
//  1. the resilience suite of this package (build tag resilience, its
//     TestResilience* tests): concurrent changes, machine reports racing
//     users, and backend faults injected at the SDK's HTTP layer, against a
//     moto_server of its own; and concurrent histories of one slave checked
//     for linearizability;
//  2. the hostile-input and access-control tests of every package
//     (TestHostile*, TestAccess*, with the integration tag), unless
//     -hostile=false (CI, where make test has just run them);
//  3. every fuzz target of the unit tests (the Fuzz functions go test runs) for
//     -fuzztime each, from its corpus in testdata/fuzz, and beside them the
//     suite's random sequences of operations checked against a reference
//     model (TestResilienceModel);
//
// and prints one summary line with the figures: requests driven, faults
// injected, model-checked operations, linearizability checks, fuzz
// executions and new inputs, and invariant violations. It exits non-zero
// when any step fails.
//
// The suite's tests that keep real deadlines run alone: beside the fuzz
// targets, on CI's two CPUs, every log lookup of the test under S3 faults
// missed its 5 s listing deadline. The model runs on a virtual clock and
// waits on moto one request at a time, about one CPU of two, so it runs
// beside the fuzz targets, which take what it leaves. The fuzz targets'
// binaries are built while the suite runs, at the lowest CPU priority, and
// at normal priority once it has ended, so that the targets run one after
// the other without a build between them.

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

func main() {
	fuzztime := flag.Duration("fuzztime", 10*time.Second, "how long each fuzz target runs")
	minimize := flag.Duration("fuzzminimizetime", time.Second, "how long a fuzz worker minimizes an input (go test -fuzzminimizetime)")
	hostile := flag.Bool("hostile", true, "run the hostile-input and access-control tests too (make test runs them)")
	flag.Parse()
	if err := run(*fuzztime, *minimize, *hostile); err != nil {
		fmt.Fprintln(os.Stderr, "resilience:", err)
		os.Exit(1)
	}
}

// modelTest is the suite's test on a virtual clock, which runs beside the
// fuzz targets.
const modelTest = "^TestResilienceModel$"

// summary holds the figures of the final line.
type summary struct {
	requests, faults, violations int64
	modelOps, linChecks          int64
	fuzzTargets                  int
	fuzzExecs, fuzzInputs        int64
	failed                       []string
}

var figuresLine = regexp.MustCompile(`resilience-figures: requests=(\d+) faults=(\d+) violations=(\d+) model_ops=(\d+) lin_checks=(\d+)`)

// addSuite adds the figures a run of the suite printed.
func (s *summary) addSuite(step string, out []byte, err error) {
	if err != nil {
		s.failed = append(s.failed, step)
	}
	m := figuresLine.FindSubmatch(out)
	if m == nil {
		s.failed = append(s.failed, step+" figures")
		return
	}
	s.requests += atoi(m[1])
	s.faults += atoi(m[2])
	s.violations += atoi(m[3])
	s.modelOps += atoi(m[4])
	s.linChecks += atoi(m[5])
}

type result struct {
	out []byte
	err error
}

func run(fuzztime, minimize time.Duration, hostile bool) error {
	start := time.Now()
	var s summary

	targets, err := fuzzTargets()
	if err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "fleet-fuzz-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	// The fuzz targets' binaries build while the suite runs, on what CPU it
	// leaves (it waits on moto, about one CPU of two); go test -fuzz would
	// build each one between two targets instead.
	suiteDone := make(chan struct{})
	built := make(chan error, 1)
	go func() { built <- buildFuzzBinaries(bin, targets, suiteDone) }()

	// The runner's own tests (TestFuzz*) are make test's.
	out, err := goTest(os.Stdout, "-tags", "resilience", "-count=1", "-v", "-run", "^TestResilience", "-skip", modelTest, "./dev/resilience")
	s.addSuite("suite", out, err)
	if s.requests == 0 {
		s.failed = append(s.failed, "suite (no request driven)")
	}

	if hostile {
		if _, err := goTest(os.Stdout, "-tags", "integration", "-count=1", "-run", "^(TestHostile|TestAccess)", "./..."); err != nil {
			s.failed = append(s.failed, "hostile input and access control")
		}
	}

	close(suiteDone)
	if err := <-built; err != nil {
		return err
	}
	cache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env GOCACHE: %w", err)
	}
	// The model's output is shown whole when it ends, not between the
	// fuzz targets' lines.
	model := make(chan result, 1)
	go func() {
		var shown bytes.Buffer
		_, err := goTest(&shown, "-tags", "resilience", "-count=1", "-v", "-run", modelTest, "./dev/resilience")
		model <- result{shown.Bytes(), err}
	}()
	execs := regexp.MustCompile(`execs: (\d+)`)
	inputs := regexp.MustCompile(`new interesting: (\d+)`)
	for _, tg := range targets {
		out, err := fuzz(os.Stdout, bin, strings.TrimSpace(string(cache)), tg, fuzztime.String(), minimize)
		if err != nil && coordinatorRace(out) {
			// Not a finding: the corpus, new inputs included, must still
			// pass when run as tests.
			fmt.Printf("resilience: %s ended on Go's fuzz deadline race (go.dev/issue/75804) with no failing input; running its corpus\n", tg.name)
			_, err = goTest(os.Stdout, "-run", "^"+tg.name+"$", "-count=1", tg.pkg)
		}
		if err != nil {
			s.failed = append(s.failed, tg.pkg+" "+tg.name)
		}
		s.fuzzTargets++
		s.fuzzExecs += last(execs, out)
		s.fuzzInputs += last(inputs, out)
	}
	m := <-model
	os.Stdout.Write(m.out)
	before := s.modelOps
	s.addSuite("model", m.out, m.err)
	if s.modelOps == before {
		s.failed = append(s.failed, "model (no operation checked)")
	}

	verdict := "PASS"
	if len(s.failed) > 0 || s.violations > 0 {
		verdict = "FAIL (" + strings.Join(s.failed, ", ") + ")"
	}
	fmt.Printf("\nresilience: requests driven %d, faults injected %d, model-checked operations %d, linearizability checks %d, fuzz executions %d and new inputs %d (%d targets, %v each), invariant violations %d, %s in %v\n",
		s.requests, s.faults, s.modelOps, s.linChecks, s.fuzzExecs, s.fuzzInputs, s.fuzzTargets, fuzztime, s.violations, verdict, time.Since(start).Round(time.Second))
	if verdict != "PASS" {
		return fmt.Errorf("failed")
	}
	return nil
}

// last is the largest figure re finds in out (the fuzzer's counts only
// grow).
func last(re *regexp.Regexp, out []byte) int64 {
	var most int64
	for _, m := range re.FindAllSubmatch(out, -1) {
		most = max(most, atoi(m[1]))
	}
	return most
}

// coordinatorRace reports whether a fuzz run failed only because Go's fuzz
// coordinator lost a race with its own -fuzztime deadline (fixed in Go
// 1.27): the target fails with "context deadline exceeded" at the deadline
// and no failing input is written. A real finding always writes one.
func coordinatorRace(out []byte) bool {
	return bytes.Contains(out, []byte("\n    context deadline exceeded\n")) && !bytes.Contains(out, []byte("Failing input written to"))
}

// goTest runs go test with args, writing the command and its output to
// show as it goes, and returns the output.
func goTest(show io.Writer, args ...string) ([]byte, error) {
	fmt.Fprintln(show, "$ go test", strings.Join(args, " "))
	var buf bytes.Buffer
	w := io.MultiWriter(&buf, show)
	cmd := exec.Command("go", append([]string{"test"}, args...)...)
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	return buf.Bytes(), err
}

// fuzzBinary is where buildFuzzBinaries puts the test binary of pkg.
func fuzzBinary(dir, pkg string) string {
	return filepath.Join(dir, strings.ReplaceAll(pkg, "/", "_")+".test")
}

// buildFuzzBinaries builds the test binary of each package with fuzz
// targets into dir, instrumented for fuzzing as go test -fuzz builds it.
// Until niceUntil is closed the builds run at the lowest CPU priority (nice
// 19, where the nice command exists): beside the suite, whose tests keep
// real deadlines, they take only idle CPU. Once it is closed (the suite has
// ended) they run at normal priority: on a machine kept busy by something
// else, a niced build hardly moves (measured: half an hour beside two
// CPU-burning processes on two CPUs).
func buildFuzzBinaries(dir string, targets []target, niceUntil <-chan struct{}) error {
	for i, tg := range targets {
		if i > 0 && targets[i-1].pkg == tg.pkg {
			continue
		}
		args := []string{"test", "-c", "-vet=off", "-fuzz", "^" + tg.name + "$", "-o", fuzzBinary(dir, tg.pkg), tg.pkg}
		if out, err := build(args, niceUntil); err != nil {
			return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// build runs go with args at nice 19 until niceUntil is closed, then at
// normal priority: a niced build still running then is stopped and run
// again, and finds what it compiled in the build cache.
func build(args []string, niceUntil <-chan struct{}) ([]byte, error) {
	if nice, err := exec.LookPath("nice"); err == nil && niceUntil != nil {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-niceUntil:
				cancel()
			case <-ctx.Done():
			}
		}()
		out, err := exec.CommandContext(ctx, nice, append([]string{"-n", "19", "go"}, args...)...).CombinedOutput()
		stopped := ctx.Err() != nil
		cancel()
		if !stopped {
			return out, err
		}
	}
	return exec.Command("go", args...).CombinedOutput()
}

// fuzz runs one target from the binary buildFuzzBinaries built, as go test
// -fuzz runs it: in its package's directory (its corpus, and where a
// failing input is written), with the fuzz cache in go's build cache. The
// command it shows is the go test command that does the same. budget is
// go test's -fuzztime: a duration, or a count of executions ("1000x"),
// which has no deadline to race (go.dev/issue/75804).
func fuzz(show io.Writer, dir, gocache string, tg target, budget string, minimize time.Duration) ([]byte, error) {
	fmt.Fprintf(show, "$ go test -run ^$ -fuzz ^%s$ -fuzztime %s -fuzzminimizetime %v %s\n", tg.name, budget, minimize, tg.pkg)
	var buf bytes.Buffer
	w := io.MultiWriter(&buf, show)
	cmd := exec.Command(fuzzBinary(dir, tg.pkg), "-test.paniconexit0", "-test.run", "^$", "-test.fuzz", "^"+tg.name+"$",
		"-test.fuzztime", budget, "-test.fuzzminimizetime", minimize.String(),
		"-test.fuzzcachedir", filepath.Join(gocache, "fuzz", tg.pkg))
	cmd.Dir = tg.dir
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	return buf.Bytes(), err
}

// target is a fuzz target: its package's import path and directory, and
// its name.
type target struct{ pkg, dir, name string }

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
				targets = append(targets, target{pkg: pkg, dir: filepath.Dir(file), name: fn.Name.Name})
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
