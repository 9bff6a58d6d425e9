package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// lambdaResponseLimit is Lambda's limit on a synchronous response payload.
const lambdaResponseLimit = 6 << 20

// scanLatency is the latency the full-list figure gives every Scan page: a
// 1 MB DynamoDB page takes tens of milliseconds. The emulator's own pages
// take seconds on a large table (it walks the whole table for each), so the
// list is measured over an in-memory table (fleettable) that answers after
// this latency, and the emulator answers the state query, whose figure is
// items read.
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

// lambdaVCPU is the memory size at which Lambda gives a function one full
// vCPU; below it, a function gets that share of one.
const lambdaVCPU = 1769

// fleet measures the slave list of a large fleet (100 of them FROZEN): the
// full list through the real SlavesFunction binary at the template's memory
// size and environment, as API Gateway calls it (its Lambda response with
// and without gzip, its latency in Scan pages, its peak memory as Lambda
// reports it), and the items the state query reads.
func fleet(ctx context.Context, e *env) ([]row, error) {
	size, frozen := 100_000, 100
	if e.quick {
		size = 10_000
	}
	items := fleettable.Items(size, frozen)
	rows, err := fullList(ctx, e, items)
	if err != nil {
		return nil, err
	}

	// The state query, against the emulator holding the same fleet.
	loadStart := time.Now()
	if err := putItems(ctx, e, stack.Tables.Slaves, items); err != nil {
		return nil, err
	}
	loaded := time.Since(loadStart)
	mcfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, time.Minute) // the emulator is slow on a large table
	if err != nil {
		return nil, err
	}
	c := newCalls()
	c.count(&mcfg)
	moto := edge.Handler(web.Wrap(slaves.New(dynamo.New(dynamodb.NewFromConfig(mcfg), stack.Tables, 0), access.Policy{}, machine.Limits{}), web.Options{Logger: e.quiet}))
	c.scanned.Store(0)
	out, err := moto(ctx, proxyGet("/api/slaves?state=FROZEN", ""))
	if err != nil {
		return nil, err
	}
	_, frozenText := c.take()
	var frozenList struct {
		Body string `json:"body"`
	}
	var got []json.RawMessage
	if err := json.Unmarshal(out, &frozenList); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(frozenList.Body), &got); err != nil || len(got) < frozen {
		return nil, fmt.Errorf("list FROZEN: got %d slaves (%v), want at least %d", len(got), err, frozen)
	}
	readRatio := float64(c.scanned.Load()) / float64(len(got))
	return append(rows,
		row{figure: fmt.Sprintf("GET /api/slaves?state=FROZEN (%d of %d): items read ÷ returned", frozen, size), value: fmt.Sprintf("%.2f (%d read, %d returned; %s)", readRatio, c.scanned.Load(), len(got), frozenText),
			target: "≤ 1.1", met: verdict(readRatio <= 1.1)},
		row{figure: fmt.Sprintf("fleet of %d slaves written to the emulator (BatchWriteItem)", size), value: fmt.Sprintf("%.1f s", loaded.Seconds())},
	), nil
}

// fullList measures GET /api/slaves of items through the real
// SlavesFunction binary, run by lambdarun at the template's MemorySize
// (a peak over it fails the invocation, as Lambda would stop it) with the
// template's environment, its DynamoDB being the in-memory table.
func fullList(ctx context.Context, e *env, items []map[string]types.AttributeValue) ([]row, error) {
	table, err := fleettable.New(items, scanLatency)
	if err != nil {
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
	fn := lambdarun.Function{Binary: binary, Name: "SlavesFunction", MemorySize: cfg.MemorySize, Timeout: time.Minute}
	if fn.Env, err = localFunctionEnv(e, "SlavesFunction"); err != nil {
		return nil, err
	}
	fn.Env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.URL

	type answer struct {
		res        lambdarun.Result
		body       []byte // as the client reads it
		count      string // X-Result-Count of a cut answer
		compressed bool
	}
	invoke := func(acceptEncoding string) (answer, error) {
		res, err := fn.Invoke(ctx, proxyGet("/api/slaves", acceptEncoding))
		if err != nil {
			return answer{}, fmt.Errorf("GET /api/slaves (Accept-Encoding %q) at %d MB: %w", acceptEncoding, fn.MemorySize, err)
		}
		var out struct {
			StatusCode int               `json:"statusCode"`
			Headers    map[string]string `json:"headers"`
			Body       string            `json:"body"`
			Base64     bool              `json:"isBase64Encoded"`
		}
		if err := json.Unmarshal(res.Response, &out); err != nil || out.StatusCode != 200 {
			return answer{}, fmt.Errorf("list: status %d (%v)", out.StatusCode, err)
		}
		a := answer{res: res, body: []byte(out.Body), count: out.Headers[web.CountHeader], compressed: out.Headers["Content-Encoding"] == "gzip"}
		if out.Base64 {
			if a.body, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
				return answer{}, err
			}
		}
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
	zipped, err := invoke("gzip")
	if err != nil {
		return nil, err
	}
	pages, segments := table.Scans(), table.Segments()
	plain, err := invoke("")
	if err != nil {
		return nil, err
	}
	size := len(items)
	took, peak := zipped.res.Handler(), zipped.res.MaxMemory
	share := min(1, float64(fn.MemorySize)/lambdaVCPU)
	return []row{
		{figure: fmt.Sprintf("GET /api/slaves of %d slaves, gzip: Lambda response", size), value: fmt.Sprintf("%.2f MB (%.1f MB of JSON, all %d slaves)", mb(len(zipped.res.Response)), mb(len(zipped.body)), size),
			target: "≤ 6 MB", met: verdict(len(zipped.res.Response) <= lambdaResponseLimit && zipped.compressed && zipped.count == "")},
		{figure: fmt.Sprintf("GET /api/slaves of %d slaves, no gzip: Lambda response", size), value: fmt.Sprintf("%.2f MB (the first %s slaves, cut to fit)", mb(len(plain.res.Response)), plain.count),
			target: "≤ 6 MB", met: verdict(len(plain.res.Response) <= lambdaResponseLimit)},
		{figure: fmt.Sprintf("GET /api/slaves: peak memory (Lambda's Max Memory Used) at MemorySize %d MB, before → after", fn.MemorySize),
			value:  fmt.Sprintf("%d MB → %d MB (before: peak heap in the bench process, at %d MB; %d MB without gzip now)", beforePeakMB, peak>>20, beforeMemorySize, plain.res.MaxMemory>>20),
			target: fmt.Sprintf("≤ %d MB", fn.MemorySize), met: verdict(peak <= int64(fn.MemorySize)<<20)},
		{figure: fmt.Sprintf("GET /api/slaves: latency ÷ one Scan page (%v a page), before → after", scanLatency),
			value: fmt.Sprintf("%.1f× → %.1f× (%.1f ms → %s; %d pages in %d segments; %.1f s CPU, %.1f s at the %.2f vCPU Lambda gives %d MB)",
				beforeLatencyMS/float64(scanLatency.Milliseconds()), took.Seconds()/scanLatency.Seconds(), beforeLatencyMS, ms(took), pages, segments,
				zipped.res.CPU.Seconds(), zipped.res.CPU.Seconds()/share, share, fn.MemorySize),
			target: "parallel Scan segments", met: verdict(segments > 1)},
	}, nil
}

func mb(n int) float64 { return float64(n) / (1 << 20) }

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
