// Command bench is `make bench`: it measures the service side by side in
// one run (cold start of the real bootstrap binaries, per-request overhead,
// backend round trips per operation, the log lookup's critical path, fleet
// scale, expiry throughput, the console in Chromium, machine reports and
// how soon an uploaded log is visible)
// and prints one table of figures, each with its target and whether it is
// met. Absolute times drift on shared machines;
// the ratios, measured in the same run, hold.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/fleetops/fleet/dev/stack"
)

// row is one line of the table.
type row struct {
	section string
	figure  string // what was measured
	value   string // the measurement, with its unit
	target  string // "" when the figure has no target
	met     string // "yes", "no", or "" without a target
}

// verdict turns a comparison into the met column.
func verdict(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// env is what every section may use: the repository, a moto_server with the
// template's tables, and a MinIO for S3 figures that need a concurrent S3.
type env struct {
	root  string
	local *stack.Local
	minio *stack.MinIO
	quick bool          // smaller fleets and fewer repetitions, for trying the command out
	smoke bool          // the smallest sizes that run every step of every section (the test's)
	soak  time.Duration // how long the stream soak runs; 0: not at all (make soak)
	quiet *slog.Logger
	costs *costInputs // what the monthly cost is computed from, as the sections measure it
}

// section is one group of figures.
type section struct {
	name string
	run  func(ctx context.Context, e *env) ([]row, error)
}

func main() {
	quick := flag.Bool("quick", false, "smaller sizes and fewer repetitions (the figures are then only indicative)")
	only := flag.String("only", "", "run only the sections whose name contains this")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	soak := flag.Duration("soak", 0, "run the stream soak this long (make soak); 0: not at all")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(os.Stdout, *quick, false, *only, *soak); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// run runs the sections whose name holds only ("" for all) and prints
// their table to out; smoke runs each at its smallest size (see env.size).
func run(out io.Writer, quick, smoke bool, only string, soak time.Duration) error {
	ctx := context.Background()
	start := time.Now()
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer local.Close()
	minio, err := stack.UpMinIO(ctx)
	if err != nil {
		return err
	}
	defer minio.Stop()
	e := &env{root: root, local: local, minio: minio, quick: quick || smoke, smoke: smoke, soak: soak, quiet: slog.New(slog.NewTextHandler(io.Discard, nil)), costs: &costInputs{jobs: map[string]jobRun{}}}

	var rows []row
	for _, s := range sections {
		if only != "" && !strings.Contains(s.name, only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s...\n", s.name)
		aws := awsVariables()
		got, err := s.run(ctx, e)
		// A section that starts a stack of its own (fleetctl logs and
		// fleetctl selector do) points the process's SDK at it: the next
		// section gets the bench's emulator back.
		restoreAWSVariables(aws)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		for i := range got {
			got[i].section = s.name
		}
		rows = append(rows, got...)
	}
	printTable(out, rows)
	fmt.Fprintf(out, "\n%s, Go %s, %s/%s, %d CPUs; %v in all\n", cpuName(), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Since(start).Round(time.Second))
	return nil
}

// size is the size a section runs at: full for make bench, quick with
// -quick, smoke in the test that runs every section (bench_integration_test),
// the smallest that still takes each of its steps.
func (e *env) size(full, quick, smoke int) int {
	switch {
	case e.smoke:
		return smoke
	case e.quick:
		return quick
	}
	return full
}

// sections are run in this order.
var sections = []section{
	{"cold start", coldStart},
	{"per-request overhead", overhead},
	{"round trips", roundTrips},
	{"log critical path", logPath},
	{"log index", logIndex},
	{"log search", logSearch},
	{"fleet scale", fleet},
	{"expiry throughput", expiryThroughput},
	{"change feed", feedFigures},
	{"import", importFigures},
	{"console", consoleFigures},
	{"fleetctl logs", fleetctlLogs},
	{"fleetctl selector", fleetctlSelector},
	{"machine reports", reportFigures},
	{"report bounds", reportBounds},
	{"log reconcile", reconcileFigures},
	// Only when asked (make soak), but for its smallest form in make test.
	{"stream soak", streamSoak},
	// After the others: it turns EventBridge notifications on the log bucket on, and off again.
	{"upload → visible", freshness},
	// Last, from what the others measured.
	{"monthly cost", monthlyCost},
}

// awsVariables are the process's AWS_ variables, by name.
func awsVariables() map[string]string {
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			vars[k] = v
		}
	}
	return vars
}

// restoreAWSVariables makes the process's AWS_ variables vars again.
func restoreAWSVariables(vars map[string]string) {
	for k := range awsVariables() {
		if _, ok := vars[k]; !ok {
			os.Unsetenv(k)
		}
	}
	for k, v := range vars {
		os.Setenv(k, v)
	}
}

// printTable writes the table as Markdown, so that BENCHMARKS.md can hold it.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| section\t figure\t value\t target\t met\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t\n", r.section, r.figure, r.value, r.target, r.met)
	}
	tw.Flush()
}

// cpuName names the CPU the run was on.
func cpuName() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "unknown CPU"
}

// calls counts the SDK's HTTP round trips by operation (every attempt
// counts), the items DynamoDB reports it read (Query and Scan), the items
// BatchGetItem returned, the items a write names (written: a transaction's
// parts, a batch's requests) and the keys S3 listed.
type calls struct {
	mu      sync.Mutex
	byOp    map[string]int
	scanned atomic.Int64
	got     atomic.Int64
	written atomic.Int64
	listed  atomic.Int64
	inputs  []any // every call's input, in order (replay)
}

func newCalls() *calls { return &calls{byOp: map[string]int{}} }

// count adds the counting middleware to an SDK configuration: one count per
// attempt (after the retry middleware), the ScannedCount of every Query
// and Scan answer, and the keys of every ListObjectsV2 answer.
func (c *calls) count(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error {
		err := s.Finalize.Add(middleware.FinalizeMiddlewareFunc("benchCount", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.byOp[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
		if err != nil {
			return err
		}
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchScanned", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.inputs = append(c.inputs, in.Parameters)
			c.mu.Unlock()
			switch r := in.Parameters.(type) {
			case *dynamodb.TransactWriteItemsInput:
				c.written.Add(int64(len(r.TransactItems)))
			case *dynamodb.BatchWriteItemInput:
				for _, reqs := range r.RequestItems {
					c.written.Add(int64(len(reqs)))
				}
			case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
				c.written.Add(1)
			}
			out, md, err := next.HandleInitialize(ctx, in)
			switch r := out.Result.(type) {
			case *dynamodb.QueryOutput:
				c.scanned.Add(int64(r.ScannedCount))
			case *dynamodb.ScanOutput:
				c.scanned.Add(int64(r.ScannedCount))
			case *dynamodb.BatchGetItemOutput:
				for _, items := range r.Responses {
					c.got.Add(int64(len(items)))
				}
			case *s3.ListObjectsV2Output:
				c.listed.Add(int64(len(r.Contents)))
			}
			return out, md, err
		}), middleware.After)
	})
}

// take returns the counts since the last take, as "2 Query, 1 GetItem".
func (c *calls) take() (map[string]int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.byOp
	c.byOp = map[string]int{}
	c.inputs = nil
	var parts []string
	for op, n := range got {
		parts = append(parts, fmt.Sprintf("%d %s", n, op))
	}
	slices.Sort(parts)
	return got, strings.Join(parts, ", ")
}

// recorded is the input of every call since the last take, in order.
func (c *calls) recorded() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inputs
}

// total is the number of calls of counts taken (take).
func total(byOp map[string]int) int {
	n := 0
	for _, v := range byOp {
		n += v
	}
	return n
}

// median of durations (which it sorts).
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// inParallel calls f for each of 0..n-1 on workers goroutines and returns
// every error it returned, joined.
func inParallel(n, workers int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
		todo = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range todo {
				if err := f(i); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		todo <- i
	}
	close(todo)
	wg.Wait()
	return errs
}
