package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/slaves"
)

// Lambda streams the first streamFastBytes of an answer at full speed, and
// the rest at streamRate bytes a second; API Gateway's own cap, the same
// rate, starts later, past 10 MB (docs/behaviour.md "Answers of any size").
const (
	streamFastBytes = 6 << 20
	streamRate      = 2 << 20
)

// streamedTime is how long API Gateway takes to stream n bytes that the
// function writes in took: the function's time, and what the bandwidth
// cap adds past the first streamFastBytes.
func streamedTime(took time.Duration, n int) time.Duration {
	return took + time.Duration(float64(max(0, n-streamFastBytes))/streamRate*float64(time.Second))
}

// scanLatency is the latency the full-list and state query figures give
// every Scan and Query page: a 1 MB DynamoDB page takes tens of
// milliseconds. The emulator's own pages take about a second on a large
// table (it walks the whole table for each), so both are measured over an
// in-memory table (fleettable) that answers after this latency; the
// emulator answers the state query too, for the items it reads and the
// local stack's deadlines.
const scanLatency = 50 * time.Millisecond

// The full list of 100,000 slaves before it was encoded as the store pages
// it in (docs/decisions.md, "The fleet list is held encoded"): the figures
// of BENCHMARKS.md then, measured in the bench process at the 1024 MB and
// 900 MiB GOMEMLIMIT the function needed.
const (
	beforePeakMB     = 567
	beforeLatencyMS  = 1642.8
	beforeMemorySize = 1024
)

// The full list of 100,000 slaves at the 256 MB SlavesFunction had before
// its slaves were decoded by hand and its memory sized for its CPU: the
// CPU it took, and what that makes at 256 MB (BENCHMARKS.md then).
const (
	beforeListCPU        = 1.7 // s
	beforeListMemorySize = 256
)

// otherRequest is what the cost figure assumes every other API request
// takes (a Get, a change: tens of milliseconds of waiting on DynamoDB,
// whatever the memory size).
const otherRequest = 20 * time.Millisecond

// cost is what n invocations of d each cost at memory MB.
func cost(n int, d time.Duration, memory int) float64 { return lambdaCost(float64(n), d, memory) }

// fleet measures the slave list of a large fleet (a fifth of it FROZEN):
// the full list and the state query through the real SlavesFunction binary
// at the template's memory size and environment, as API Gateway calls it
// (its Lambda response with and without gzip, its latency in pages, its
// peak memory as Lambda reports it, its CPU and the duration that makes at
// the memory size), and a state query of 20,000 slaves on the emulator,
// with the local stack's deadlines: the items it reads, and whether it
// answers within the function's timeout.
func fleet(ctx context.Context, e *env) ([]row, error) {
	size := e.size(100_000, 10_000, 1_000)
	frozen := size / 5
	items := fleettable.Items(size, frozen)
	rows, err := fullList(ctx, e, items)
	if err != nil {
		return nil, err
	}

	// The state query, against the emulator holding make run's fleet:
	// 20,000 slaves in the state asked, of 25,000. (Over 100,000 its pages
	// take seconds each: moto walks the whole table for every page.)
	localSize, active := e.size(25_000, 2_500, 250), e.size(20_000, 2_000, 200)
	loadStart := time.Now()
	if err := putItems(ctx, e, stack.Tables.Slaves, fleettable.Items(localSize, localSize-active)); err != nil {
		return nil, err
	}
	loaded := time.Since(loadStart)
	mcfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, stack.DynamoDBAttemptTimeout)
	if err != nil {
		return nil, err
	}
	c := newCalls()
	c.count(&mcfg)
	routes, err := slaveRoutes(ctx, e, dynamodb.NewFromConfig(mcfg))
	if err != nil {
		return nil, err
	}
	c.scanned.Store(0)
	// The route's deadline, as the function sets it (a stream's is longer).
	qctx, cancel := context.WithTimeout(ctx, slaves.RouteDeadline)
	defer cancel()
	req := httptest.NewRequestWithContext(qctx, http.MethodGet, "/api/slaves?state=ACTIVE", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	began := time.Now()
	routes.ServeHTTP(rec, req)
	took := time.Since(began)
	byOp, activeText := c.take()
	body, err := unzipped(rec.Result())
	if err != nil {
		return nil, err
	}
	if rec.Code != 200 {
		return nil, fmt.Errorf("list ACTIVE on the emulator: status %d after %v: %.200s", rec.Code, took, body)
	}
	// The emulator may hold the ACTIVE slaves of the sections before this
	// one too: the fleet's own are those fleettable.Items names.
	var got []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("list ACTIVE: %w", err)
	}
	mine := 0
	for _, s := range got {
		if strings.HasPrefix(s.ID, "fleet-") {
			mine++
		}
	}
	if mine != active {
		return nil, fmt.Errorf("list ACTIVE: got %d of the fleet's slaves (and %d others), want %d", mine, len(got)-mine, active)
	}
	readRatio := float64(c.scanned.Load()) / float64(len(got))
	pages := byOp["Query"]
	return append(rows,
		row{figure: fmt.Sprintf("GET /api/slaves?state=ACTIVE (%d of %d) on the emulator, attempts of %v (make run's): latency ÷ Query pages", active, localSize, stack.DynamoDBAttemptTimeout),
			value:  fmt.Sprintf("200 in %.1f s, %d pages: %.2f s a page", took.Seconds(), pages, took.Seconds()/float64(max(pages, 1))),
			target: fmt.Sprintf("200 within the route's %v", slaves.RouteDeadline), met: verdict(took < slaves.RouteDeadline)},
		row{figure: fmt.Sprintf("GET /api/slaves?state=ACTIVE (%d of %d) on the emulator: items read ÷ returned", active, localSize), value: fmt.Sprintf("%.2f (%d read, %d returned; %s)", readRatio, c.scanned.Load(), len(got), activeText),
			target: "≤ 1.1", met: verdict(readRatio <= 1.1)},
		row{figure: fmt.Sprintf("fleet of %d slaves written to the emulator (BatchWriteItem)", localSize), value: fmt.Sprintf("%.1f s", loaded.Seconds())},
	), nil
}

// fullList measures GET /api/slaves of items, and of its FROZEN ones,
// through the real SlavesFunction binary, run by lambdarun at the
// template's MemorySize (a peak over it fails the invocation, as Lambda
// would stop it) with the template's environment, its DynamoDB being the
// in-memory table.
func fullList(ctx context.Context, e *env, items []map[string]types.AttributeValue) ([]row, error) {
	table, err := fleettable.New(items, scanLatency)
	if err != nil {
		return nil, err
	}
	// The list's cursor reads the change feed, which the emulator holds.
	if _, err := table.Beside(e.local.Moto.Endpoint); err != nil {
		return nil, err
	}
	srv := httptest.NewServer(table)
	defer srv.Close()
	dir, err := os.MkdirTemp("", "fleet-bench-list-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	binary := filepath.Join(dir, "bootstrap")
	if err := lambdarun.Build(ctx, e.root, runtime.GOARCH, "./functions/slaves", binary); err != nil {
		return nil, err
	}
	cfg, err := e.local.Template.FunctionConfig("SlavesFunction")
	if err != nil {
		return nil, err
	}
	// Room for this machine past the route's deadline: the figures compare
	// the duration Lambda would take with it.
	fn := lambdarun.Function{Binary: binary, Name: "SlavesFunction", MemorySize: cfg.MemorySize, Timeout: 3 * slaves.RouteDeadline}
	if fn.Env, err = localFunctionEnv(e, "SlavesFunction"); err != nil {
		return nil, err
	}
	fn.Env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.URL

	type answer struct {
		res        lambdarun.Result
		body       []byte // as the client reads it
		wire       int    // the body's bytes as streamed, before gzip is undone
		compressed bool
	}
	invoke := func(target, acceptEncoding string) (answer, error) {
		res, err := fn.Invoke(ctx, proxyGet(target, acceptEncoding))
		if err != nil {
			return answer{}, fmt.Errorf("GET %s (Accept-Encoding %q) at %d MB: %w", target, acceptEncoding, fn.MemorySize, err)
		}
		var out struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Body       string            `json:"body"`
			Base64     bool              `json:"isBase64Encoded"`
		}
		if err := json.Unmarshal(res.Response, &out); err != nil || out.StatusCode != 200 {
			return answer{}, fmt.Errorf("GET %s: status %d (%v)", target, out.StatusCode, err)
		}
		a := answer{res: res, body: []byte(out.Body), compressed: out.Headers["Content-Encoding"] == "gzip"}
		if out.Base64 {
			if a.body, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
				return answer{}, err
			}
		}
		a.wire = len(a.body)
		if a.compressed {
			zr, err := gzip.NewReader(bytes.NewReader(a.body))
			if err == nil {
				a.body, err = io.ReadAll(zr)
			}
			if err != nil {
				return answer{}, err
			}
		}
		return a, nil
	}
	zipped, err := invoke("/api/slaves", "gzip")
	if err != nil {
		return nil, err
	}
	pages, segments := table.Scans(), table.Segments()
	plain, err := invoke("/api/slaves", "")
	if err != nil {
		return nil, err
	}
	query, err := invoke("/api/slaves?state=FROZEN", "gzip")
	if err != nil {
		return nil, err
	}
	queryPages := table.Queries()
	size, frozen := len(items), 0
	for _, item := range items {
		if s, _ := item["state"].(*types.AttributeValueMemberS); s != nil && s.Value == "FROZEN" {
			frozen++
		}
	}
	var got []json.RawMessage
	if err := json.Unmarshal(query.body, &got); err != nil || len(got) != frozen {
		return nil, fmt.Errorf("GET /api/slaves?state=FROZEN: got %d slaves (%v), want all %d", len(got), err, frozen)
	}
	took, peak := zipped.res.Handler(), zipped.res.MaxMemory
	share := min(1, float64(fn.MemorySize)/lambdaVCPU)
	cpu := zipped.res.CPU
	est := duration(cpu, took, fn.MemorySize)
	before := time.Duration(beforeListCPU / min(1, float64(beforeListMemorySize)/lambdaVCPU) * float64(time.Second))
	at256 := duration(cpu, took, beforeListMemorySize)
	// A month of 30,000 full lists (one a minute, from consoles left open
	// on the fleet) and a million other requests.
	const lists, others = 30_000, 1_000_000
	costBefore := cost(lists, before, beforeListMemorySize) + cost(others, otherRequest, beforeListMemorySize)
	costAfter := cost(lists, est, fn.MemorySize) + cost(others, otherRequest, fn.MemorySize)
	qTook, qEst := query.res.Handler(), duration(query.res.CPU, query.res.Handler(), fn.MemorySize)
	plainEst := duration(plain.res.CPU, plain.res.Handler(), fn.MemorySize)
	return []row{
		{figure: fmt.Sprintf("GET /api/slaves of %d slaves, gzip, streamed: answer, function's time, through API Gateway", size),
			value: fmt.Sprintf("%.2f MB (%.1f MB of JSON, %s), %s; %.1f s streamed", mb(zipped.wire), mb(len(zipped.body)), whole(zipped.body, size),
				ms(zipped.res.Handler()), streamedTime(est, zipped.wire).Seconds()),
			target: fmt.Sprintf("all, within the route's %v", slaves.RouteDeadline), met: verdict(zipped.compressed && isWhole(zipped.body, size) && streamedTime(est, zipped.wire) < slaves.RouteDeadline)},
		{figure: fmt.Sprintf("GET /api/slaves of %d slaves, no gzip, streamed: answer, function's time, through API Gateway", size),
			value: fmt.Sprintf("%.2f MB (%s), %s; %.1f s streamed (2 MB/s past 6 MB)", mb(plain.wire), whole(plain.body, size),
				ms(plain.res.Handler()), streamedTime(plainEst, plain.wire).Seconds()),
			target: fmt.Sprintf("all, within the route's %v", slaves.RouteDeadline), met: verdict(isWhole(plain.body, size) && streamedTime(plainEst, plain.wire) < slaves.RouteDeadline)},
		{figure: fmt.Sprintf("GET /api/slaves: peak memory (Lambda's Max Memory Used) at MemorySize %d MB, before → after", fn.MemorySize),
			value:  fmt.Sprintf("%d MB → %d MB (before: peak heap in the bench process, at %d MB; %d MB without gzip now)", beforePeakMB, peak>>20, beforeMemorySize, plain.res.MaxMemory>>20),
			target: fmt.Sprintf("≤ %d MB", fn.MemorySize), met: verdict(peak <= int64(fn.MemorySize)<<20)},
		{figure: fmt.Sprintf("GET /api/slaves: latency ÷ one Scan page (%v a page), before → after", scanLatency),
			value: fmt.Sprintf("%.1f× → %.1f× (%.1f ms → %s; %d pages in %d segments; %.2f s CPU, %.2f vCPU at %d MB)",
				beforeLatencyMS/float64(scanLatency.Milliseconds()), took.Seconds()/scanLatency.Seconds(), beforeLatencyMS, ms(took), pages, segments,
				cpu.Seconds(), share, fn.MemorySize),
			target: "parallel Scan segments", met: verdict(segments > 1)},
		{figure: fmt.Sprintf("GET /api/slaves of %d slaves: estimated Lambda duration (CPU ÷ share of a vCPU), before → after", size),
			value: fmt.Sprintf("%.1f s (%.1f s CPU at %d MB) → %.1f s (%.2f s CPU at %d MB; %.1f s at %d MB)",
				before.Seconds(), beforeListCPU, beforeListMemorySize, est.Seconds(), cpu.Seconds(), fn.MemorySize, at256.Seconds(), beforeListMemorySize),
			target: "≤ 3 s", met: verdict(est <= 3*time.Second)},
		{figure: fmt.Sprintf("Lambda cost a month: %d full lists of %d slaves and %d other requests (%v each), before → after", lists, size, others, otherRequest),
			value: fmt.Sprintf("$%.2f at %d MB → $%.2f at %d MB (a list $%.6f → $%.6f; a million other requests $%.2f → $%.2f)",
				costBefore, beforeListMemorySize, costAfter, fn.MemorySize, cost(1, before, beforeListMemorySize), cost(1, est, fn.MemorySize),
				cost(others, otherRequest, beforeListMemorySize), cost(others, otherRequest, fn.MemorySize))},
		{figure: fmt.Sprintf("GET /api/slaves?state=FROZEN (%d of %d), gzip, on the DynamoDB model (%v a page): latency ÷ Query pages", frozen, size, scanLatency),
			value: fmt.Sprintf("200 in %s, %d pages: %.1f× a page (%.2f s CPU: about %.1f s at %d MB)", ms(qTook), queryPages, qTook.Seconds()/float64(max(queryPages, 1))/scanLatency.Seconds(),
				query.res.CPU.Seconds(), qEst.Seconds(), fn.MemorySize),
			target: fmt.Sprintf("200 within the route's %v", slaves.RouteDeadline), met: verdict(qEst < slaves.RouteDeadline)},
	}, nil
}

// unzipped returns the body of res, gunzipped when it says it is gzip.
func unzipped(res *http.Response) ([]byte, error) {
	body, err := io.ReadAll(res.Body)
	if err != nil || res.Header.Get("Content-Encoding") != "gzip" {
		return body, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func mb(n int) float64 { return float64(n) / (1 << 20) }

// isWhole reports whether body is a JSON array of n elements.
func isWhole(body []byte, n int) bool {
	var elems []json.RawMessage
	return json.Unmarshal(body, &elems) == nil && len(elems) == n
}

// whole says whether body holds all n slaves.
func whole(body []byte, n int) string {
	if isWhole(body, n) {
		return fmt.Sprintf("all %d slaves", n)
	}
	return fmt.Sprintf("not all %d slaves", n)
}

// proxyGet is an API Gateway REST proxy event for a GET.
func proxyGet(path, acceptEncoding string) json.RawMessage {
	pathOnly, query, _ := strings.Cut(path, "?")
	ev := map[string]any{
		"resource": "/api/slaves/{proxy+}", "path": pathOnly, "httpMethod": "GET",
		"headers":        map[string]string{"Accept-Encoding": acceptEncoding, "Host": "api.example.com"},
		"requestContext": map[string]any{"requestId": "bench", "stage": "prod", "httpMethod": "GET", "path": "/prod" + pathOnly},
	}
	if query != "" {
		k, v, _ := strings.Cut(query, "=")
		ev["queryStringParameters"] = map[string]string{k: v}
		ev["multiValueQueryStringParameters"] = map[string][]string{k: {v}}
	}
	raw, _ := json.Marshal(ev)
	return raw
}

// putItems writes items to table in the emulator (fleettable.Put).
func putItems(ctx context.Context, e *env, table string, items []map[string]types.AttributeValue) error {
	return fleettable.Put(ctx, e.local.DynamoDB, table, items)
}
