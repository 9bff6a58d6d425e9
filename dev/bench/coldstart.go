package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/app/slavesapp"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/web"
)

// Cold start targets: a function's init (exec to its first request for an
// event) against hello's, which is the Go runtime and aws-lambda-go alone,
// and the size of the artifact Lambda unpacks.
const (
	maxInitRatio = 1.5
	maxArtifact  = 12e6 // bytes; decimal MB, the stricter reading
)

// coldFunction is one bootstrap binary the cold start section starts.
type coldFunction struct {
	name  string // logical id in template.yaml, or hello
	pkg   string // what go build builds
	event string // sample event file; "" for hello, which is no template function and takes any JSON
}

// coldFunctions are started in this order, each round rotated by one so that
// no function always follows the same one.
var coldFunctions = []coldFunction{
	{name: "hello", pkg: "./dev/bench/hello"},
	{name: "InventoryFunction", pkg: "./functions/inventory", event: "events/inventory-machine-report.json"},
	{name: "SlavesFunction", pkg: "./functions/slaves", event: "events/slaves-details.json"},
	{name: "LogsFunction", pkg: "./functions/logs", event: "events/logs-task.json"},
	{name: "ExpiryFunction", pkg: "./functions/expiry", event: "events/expiry-run.json"},
	{name: "ConsoleFunction", pkg: "./functions/console", event: "events/console-page.json"},
}

// coldStart builds every function with the project's build line (for this
// machine, to run it, and for arm64, to weigh the deployed artifact), then
// starts each as Lambda does, round-robin, and compares the medians of init
// with hello's. The first response includes the function's calls to moto.
func coldStart(ctx context.Context, e *env) ([]row, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("the bootstrap binaries are linux binaries; this is %s", runtime.GOOS)
	}
	rounds := e.size(15, 5, 2)
	dir, err := os.MkdirTemp("", "fleet-bench-coldstart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	type started struct {
		coldFunction
		fn      lambdarun.Function
		payload []byte
		size    int64           // of the arm64 artifact
		init    []time.Duration // exec to the first next
		total   []time.Duration // exec to the response
		handler []time.Duration // first next to the response
		status  string          // of the last API response, "" for other functions
	}
	var fns []*started
	for _, c := range coldFunctions {
		s := &started{coldFunction: c, payload: []byte("{}")}
		binary := filepath.Join(dir, runtime.GOARCH, c.name, "bootstrap")
		if err := lambdarun.Build(ctx, e.root, runtime.GOARCH, c.pkg, binary); err != nil {
			return nil, err
		}
		artifact := binary
		if runtime.GOARCH != "arm64" {
			artifact = filepath.Join(dir, "arm64", c.name, "bootstrap")
			if err := lambdarun.Build(ctx, e.root, "arm64", c.pkg, artifact); err != nil {
				return nil, err
			}
		}
		info, err := os.Stat(artifact)
		if err != nil {
			return nil, err
		}
		s.size = info.Size()
		s.fn = lambdarun.Function{Binary: binary, Name: c.name}
		if c.event != "" {
			cfg, err := e.local.Template.FunctionConfig(c.name)
			if err != nil {
				return nil, err
			}
			s.fn.MemorySize, s.fn.Timeout = cfg.MemorySize, cfg.Timeout
			if s.fn.Env, err = localFunctionEnv(e, c.name); err != nil {
				return nil, err
			}
			if s.payload, err = os.ReadFile(filepath.Join(e.root, c.event)); err != nil {
				return nil, err
			}
		}
		fns = append(fns, s)
	}

	// Round -1 is not counted: it brings the binaries into the page cache
	// and lets InventoryFunction report the slave that SlavesFunction's event
	// asks about.
	for round := -1; round < rounds; round++ {
		for i := range fns {
			s := fns[(i+max(round, 0))%len(fns)]
			res, err := s.fn.Invoke(ctx, s.payload)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			if round < 0 {
				continue
			}
			s.init = append(s.init, res.Init)
			s.total = append(s.total, res.Total)
			s.handler = append(s.handler, res.Handler())
			s.status = proxyResponseStatus(res.Response)
		}
	}

	hello := median(fns[0].init)
	helloInits, err := packageInits(ctx, fns[0].fn, fns[0].payload)
	if err != nil {
		return nil, err
	}
	rows := []row{{
		figure: "hello init (exec to first next; the Go runtime and aws-lambda-go alone)",
		value:  fmt.Sprintf("%s (1.00× hello)", ms(hello)),
	}, {
		figure: "hello package inits (GODEBUG=inittrace=1, one run)",
		value:  helloInits.String(),
	}}
	for _, s := range fns[1:] {
		init := median(s.init)
		ratio := float64(init) / float64(hello)
		inits, err := packageInits(ctx, s.fn, s.payload)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{
			figure: s.name + " init (exec to first next)",
			value:  fmt.Sprintf("%s (%.2f× hello)", ms(init), ratio),
			target: fmt.Sprintf("≤ %.1f× hello", maxInitRatio),
			met:    verdict(ratio <= maxInitRatio),
		}, row{
			figure: s.name + " package inits (GODEBUG=inittrace=1, one run; ms by owner)",
			value:  inits.String() + ": " + inits.owners,
		})
	}
	for _, s := range fns[1:] {
		what := strings.TrimPrefix(s.event, "events/")
		if s.status != "" {
			what += " → " + s.status
		}
		rows = append(rows, row{
			figure: fmt.Sprintf("%s first response (exec to response; %s, backend on moto)", s.name, what),
			value:  fmt.Sprintf("%s (handler %s)", ms(median(s.total)), ms(median(s.handler))),
		})
	}
	for _, s := range fns {
		rows = append(rows, row{
			figure: s.name + " arm64 bootstrap size",
			value:  fmt.Sprintf("%.1f MB", float64(s.size)/1e6),
			target: fmt.Sprintf("≤ %.0f MB", maxArtifact/1e6),
			met:    verdict(s.size <= maxArtifact),
		})
	}
	return rows, nil
}

// localFunctionEnv is the environment the template gives function, pointed at
// the local stack. AUTH_MODE is none, as make invoke's dev/env.local.json
// sets it: the sample events carry no authorizer identity, and the template's
// authorizer mode would answer them 401 without a backend call.
func localFunctionEnv(e *env, function string) (map[string]string, error) {
	env, err := e.local.Template.FunctionEnv(function, stack.LocalName)
	if err != nil {
		return nil, err
	}
	maps.Copy(env, e.local.Env)
	env["S3_FORCE_PATH_STYLE"] = "true"
	env["AUTH_MODE"] = "none"
	return env, nil
}

// functionEnv is the getenv the sections build a function with, through
// its composition root: the template's environment (localFunctionEnv) and
// overrides, each a setting a section measures at another value than the
// template's, said where it is passed. So a setting the section does not
// name is the deployed one.
func functionEnv(e *env, function string, overrides map[string]string) (func(string) string, error) {
	vars, err := localFunctionEnv(e, function)
	if err != nil {
		return nil, err
	}
	maps.Copy(vars, overrides)
	return func(name string) string { return vars[name] }, nil
}

// slaveRoutes is SlavesFunction's handler as its composition root builds
// it from the template's environment, over db, behind web.Wrap.
func slaveRoutes(ctx context.Context, e *env, db dynamo.API) (http.Handler, error) {
	getenv, err := functionEnv(e, "SlavesFunction", nil)
	if err != nil {
		return nil, err
	}
	h, err := slavesapp.New(ctx, getenv, slavesapp.Options{DynamoDB: db})
	if err != nil {
		return nil, err
	}
	return web.Wrap(h, web.Options{Logger: e.quiet}), nil
}

// logRoutes is LogsFunction's handler as its composition root builds it
// from the template's environment and overrides, over s3c and db (nil
// when the index is off), behind web.Wrap.
func logRoutes(ctx context.Context, e *env, s3c *s3.Client, db logindex.API, overrides map[string]string) (http.Handler, error) {
	getenv, err := functionEnv(e, "LogsFunction", overrides)
	if err != nil {
		return nil, err
	}
	h, err := logsapp.New(ctx, getenv, logsapp.Options{S3: s3c, DynamoDB: db})
	if err != nil {
		return nil, err
	}
	return web.Wrap(h, web.Options{Logger: e.quiet}), nil
}

// proxyResponseStatus returns the status code of an API Gateway proxy response, or
// "" for any other response.
func proxyResponseStatus(response []byte) string {
	var r struct {
		StatusCode int `json:"statusCode"`
	}
	if json.Unmarshal(response, &r) != nil || r.StatusCode == 0 {
		return ""
	}
	return strconv.Itoa(r.StatusCode)
}

// initTrace is what GODEBUG=inittrace=1 reports of a process's package
// initialization, summed.
type initTrace struct {
	packages      int
	ms            float64 // wall clock
	allocs, bytes int64   // heap allocations
	owners        string  // the largest shares of ms, by owner
}

func (i initTrace) String() string {
	return fmt.Sprintf("%d packages, %.2f ms, %d allocs, %.0f KB", i.packages, i.ms, i.allocs, float64(i.bytes)/1e3)
}

// packageInits runs fn once with GODEBUG=inittrace=1 and returns its
// package inits, with the largest shares of their time summed by owner (an
// AWS SDK service, the rest of the SDK, the standard library...). Tracing
// slows the run a little; the runtime's own start and main's work are not in
// the sums. The counts of allocations and bytes do not depend on the
// machine's load, as the times do.
func packageInits(ctx context.Context, fn lambdarun.Function, event []byte) (initTrace, error) {
	var logs bytes.Buffer
	fn.Env = maps.Clone(fn.Env)
	if fn.Env == nil {
		fn.Env = map[string]string{}
	}
	fn.Env["GODEBUG"] = "inittrace=1"
	fn.Logs = &logs
	if _, err := fn.Invoke(ctx, event); err != nil {
		return initTrace{}, fmt.Errorf("%s with inittrace: %w", fn.Name, err)
	}
	byOwner := map[string]float64{}
	var sum initTrace
	// init internal/bytealg @0.008 ms, 0 ms clock, 0 bytes, 0 allocs
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || f[6] != "clock," || f[8] != "bytes," || f[10] != "allocs" {
			continue
		}
		clock, err1 := strconv.ParseFloat(f[4], 64)
		size, err2 := strconv.ParseInt(f[7], 10, 64)
		allocs, err3 := strconv.ParseInt(f[9], 10, 64)
		if err := cmp.Or(err1, err2, err3); err != nil {
			continue
		}
		byOwner[initOwner(f[1])] += clock
		sum.packages++
		sum.ms += clock
		sum.bytes += size
		sum.allocs += allocs
	}
	owners := slices.Collect(maps.Keys(byOwner))
	slices.SortFunc(owners, func(a, b string) int { return cmp.Compare(byOwner[b], byOwner[a]) })
	var top []string
	for _, o := range owners[:min(5, len(owners))] {
		top = append(top, fmt.Sprintf("%s %.2f", o, byOwner[o]))
	}
	sum.owners = strings.Join(top, ", ")
	return sum, nil
}

// initOwner names who owns a package, for the init summary: an AWS SDK
// service by its name, the rest of the SDK, smithy-go, the standard library,
// or the module.
func initOwner(pkg string) string {
	const sdk = "github.com/aws/aws-sdk-go-v2/"
	switch {
	case strings.HasPrefix(pkg, sdk+"service/internal/"):
		return "aws-sdk-go-v2"
	case strings.HasPrefix(pkg, sdk+"service/"):
		service, _, _ := strings.Cut(strings.TrimPrefix(pkg, sdk+"service/"), "/")
		return "sdk " + service
	case strings.HasPrefix(pkg, sdk):
		return "aws-sdk-go-v2"
	case !strings.Contains(strings.Split(pkg, "/")[0], "."):
		return "std"
	}
	parts := strings.SplitN(pkg, "/", 4)
	return strings.Join(parts[:min(3, len(parts))], "/")
}
