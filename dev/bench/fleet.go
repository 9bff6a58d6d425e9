package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// benchTables are the template's tables as the local stack names them.
var benchTables = dynamo.Tables{Slaves: "SlavesTable", History: "HistoryTable", Expiring: "ExpiringTable", Requests: "RequestsTable"}

// scanLatency is the latency the full-list figure gives every Scan page: a
// 1 MB DynamoDB page takes tens of milliseconds. The emulator's own pages
// take seconds on a large table (it walks the whole table for each), so the
// list's critical path is measured over an in-memory table that answers
// after this latency, and the emulator answers the state query, whose
// figure is items read.
const scanLatency = 50 * time.Millisecond

// memoryLimit reads SlavesFunction's GOMEMLIMIT (in MiB) from the template.
func memoryLimit(e *env) (int64, error) {
	vars, err := e.local.Template.FunctionEnv("SlavesFunction", stack.LocalName)
	if err != nil {
		return 0, err
	}
	mib, err := strconv.ParseInt(strings.TrimSuffix(vars["GOMEMLIMIT"], "MiB"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("SlavesFunction GOMEMLIMIT %q: want a size in MiB", vars["GOMEMLIMIT"])
	}
	return mib << 20, nil
}

// fleet measures the slave list of a large fleet (100 of them FROZEN)
// through the real SlavesFunction handler and edge adapter, as API Gateway
// would call it: the Lambda response size with gzip, the latency in Scan
// pages, and the items the state query reads.
func fleet(ctx context.Context, e *env) ([]row, error) {
	size, frozen := 100_000, 100
	if e.quick {
		size = 10_000
	}
	items := fleetItems(size, frozen)

	// The full list, over the in-memory table.
	table, err := newScanTable(items, scanLatency)
	if err != nil {
		return nil, err
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""),
		HTTPClient: &http.Client{Transport: table}, Retryer: sdkconfig.Retryer}
	c := newCalls()
	c.count(&cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://dynamodb.bench") }), benchTables, 0)
	h := edge.Handler(web.Wrap(slaves.New(store, access.Policy{}, machine.Limits{}), web.Options{Logger: e.quiet}))
	// As deployed: SlavesFunction runs with the GOMEMLIMIT of template.yaml.
	limit, err := memoryLimit(e)
	if err != nil {
		return nil, err
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	runtime.GC()
	peak := watchHeap()
	cpu := cpuTime()
	start := time.Now()
	all, err := h(ctx, proxyGet("/api/slaves", "gzip"))
	if err != nil {
		return nil, err
	}
	listTook := time.Since(start)
	cpu = cpuTime() - cpu
	heap := peak()
	listCalls, _ := c.take()
	var list struct {
		StatusCode int    `json:"statusCode"`
		Body       string `json:"body"`
	}
	if err := json.Unmarshal(all, &list); err != nil || list.StatusCode != 200 {
		return nil, fmt.Errorf("list: status %d (%v)", list.StatusCode, err)
	}
	plain, err := h(ctx, proxyGet("/api/slaves", ""))
	if err != nil {
		return nil, err
	}
	c.take()

	// The state query, against the emulator holding the same fleet.
	loadStart := time.Now()
	if err := putItems(ctx, e, benchTables.Slaves, items); err != nil {
		return nil, err
	}
	loaded := time.Since(loadStart)
	mcfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, time.Minute) // the emulator is slow on a large table
	if err != nil {
		return nil, err
	}
	c.count(&mcfg)
	moto := edge.Handler(web.Wrap(slaves.New(dynamo.New(dynamodb.NewFromConfig(mcfg), benchTables, 0), access.Policy{}, machine.Limits{}), web.Options{Logger: e.quiet}))
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

	pages := listCalls["Scan"]
	return []row{
		{figure: fmt.Sprintf("GET /api/slaves of %d slaves, gzip: Lambda response", size), value: fmt.Sprintf("%.2f MB (%.1f MB uncompressed)", mb(len(all)), mb(len(plain))),
			target: "≤ 6 MB", met: verdict(len(all) <= lambdaResponseLimit)},
		{figure: fmt.Sprintf("GET /api/slaves: latency ÷ one Scan page (%v a page)", scanLatency), value: fmt.Sprintf("%.1f× (%s; %d pages in %d segments; %.1f s CPU; peak heap %d MB)", listTook.Seconds()/scanLatency.Seconds(), ms(listTook), pages, table.segments(), cpu.Seconds(), heap>>20),
			target: "parallel Scan segments", met: verdict(table.segments() > 1)},
		{figure: fmt.Sprintf("GET /api/slaves?state=FROZEN (%d of %d): items read ÷ returned", frozen, size), value: fmt.Sprintf("%.2f (%d read, %d returned; %s)", readRatio, c.scanned.Load(), len(got), frozenText),
			target: "≤ 1.1", met: verdict(readRatio <= 1.1)},
		{figure: fmt.Sprintf("fleet of %d slaves written to the emulator (BatchWriteItem)", size), value: fmt.Sprintf("%.1f s", loaded.Seconds())},
	}, nil
}

// watchHeap samples the heap in use until the returned function is called,
// which returns the largest sample.
func watchHeap() func() uint64 {
	var most atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > most.Load() {
				most.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		return most.Load()
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
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

// putItems writes items to table, 25 to a BatchWriteItem, 8 batches at a
// time.
func putItems(ctx context.Context, e *env, table string, items []map[string]types.AttributeValue) error {
	work := make(chan []map[string]types.AttributeValue)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for batch := range work {
				var reqs []types.WriteRequest
				for _, item := range batch {
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
				}
				pending := map[string][]types.WriteRequest{table: reqs}
				for len(pending) > 0 {
					out, err := e.local.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err != nil {
						errs <- err
						return
					}
					pending = out.UnprocessedItems
				}
			}
		})
	}
	for i := 0; i < len(items); i += 25 {
		work <- items[i:min(i+25, len(items))]
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// fleetItems returns size slave items as the store writes them, frozen of
// them FROZEN and the rest ACTIVE.
func fleetItems(size, frozen int) []map[string]types.AttributeValue {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	items := make([]map[string]types.AttributeValue, size)
	for i := range items {
		state := "ACTIVE"
		if i%(size/frozen) == 0 {
			state = "FROZEN"
		}
		items[i] = map[string]types.AttributeValue{
			"id":             &types.AttributeValueMemberS{Value: fmt.Sprintf("fleet-%06d", i)},
			"state":          &types.AttributeValueMemberS{Value: state},
			"stateTimestamp": &types.AttributeValueMemberN{Value: now},
			"stateMessage":   &types.AttributeValueMemberS{Value: "Machine reported up"},
			"firstSeenAt":    &types.AttributeValueMemberN{Value: now},
			"host":           &types.AttributeValueMemberS{Value: fmt.Sprintf("node-%06d.us-east-1.compute.internal", i)},
			"rackId":         &types.AttributeValueMemberS{Value: fmt.Sprintf("us-east-1%c", 'a'+i%6)},
			"attributes": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"instance_type": &types.AttributeValueMemberS{Value: "m5.4xlarge"},
				"ami":           &types.AttributeValueMemberS{Value: "ami-0abcdef1234567890"},
			}},
			"resources": &types.AttributeValueMemberS{Value: `{"cpus":16,"mem":63000,"disk":500000,"ports":"[31000-32000]"}`},
			"version":   &types.AttributeValueMemberN{Value: "1"},
		}
	}
	return items
}

// scanTable answers DynamoDB Scan requests over items from memory, after a
// fixed latency, in pages of at most 1 MB of segment's items, as DynamoDB
// pages a parallel scan.
type scanTable struct {
	wire    [][]byte // each item in DynamoDB's JSON
	latency time.Duration
	mu      sync.Mutex
	seen    map[int32]bool // the segments asked for
}

func newScanTable(items []map[string]types.AttributeValue, latency time.Duration) (*scanTable, error) {
	t := &scanTable{latency: latency, seen: map[int32]bool{}}
	for _, item := range items {
		raw, err := json.Marshal(wireItem(item))
		if err != nil {
			return nil, err
		}
		t.wire = append(t.wire, raw)
	}
	return t, nil
}

func (t *scanTable) segments() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

func (t *scanTable) RoundTrip(r *http.Request) (*http.Response, error) {
	var in struct {
		Segment           int32
		TotalSegments     int32
		ExclusiveStartKey map[string]map[string]string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return nil, err
	}
	r.Body.Close()
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".Scan") {
		return nil, fmt.Errorf("the in-memory table answers Scan only, not %s", r.Header.Get("X-Amz-Target"))
	}
	t.mu.Lock()
	t.seen[in.Segment] = true
	t.mu.Unlock()
	total := max(in.TotalSegments, 1)
	after := -1
	if k, ok := in.ExclusiveStartKey["id"]; ok {
		after, _ = strconv.Atoi(strings.TrimPrefix(k["S"], "fleet-"))
	}
	var body bytes.Buffer
	body.WriteString(`{"Items":[`)
	count, size, last := 0, 0, -1
	for i := after + 1; i < len(t.wire); i++ {
		if int32(i)%total != in.Segment {
			continue
		}
		if size+len(t.wire[i]) > 1<<20 {
			break
		}
		if count > 0 {
			body.WriteByte(',')
		}
		body.Write(t.wire[i])
		count, size, last = count+1, size+len(t.wire[i]), i
	}
	fmt.Fprintf(&body, `],"Count":%d,"ScannedCount":%d`, count, count)
	if last >= 0 && t.more(last, total, in.Segment) {
		fmt.Fprintf(&body, `,"LastEvaluatedKey":{"id":{"S":"fleet-%06d"}}`, last)
	}
	body.WriteByte('}')
	time.Sleep(t.latency)
	resp := &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"},
			"X-Amz-Crc32": {strconv.FormatUint(uint64(crc32.ChecksumIEEE(body.Bytes())), 10)}},
		Body: io.NopCloser(&body), ContentLength: int64(body.Len())}
	return resp, nil
}

// more reports whether segment has items after index last.
func (t *scanTable) more(last int, total, segment int32) bool {
	for i := last + 1; i < len(t.wire); i++ {
		if int32(i)%total == segment {
			return true
		}
	}
	return false
}

// wireItem is an item in DynamoDB's JSON.
func wireItem(item map[string]types.AttributeValue) map[string]any {
	out := map[string]any{}
	for k, v := range item {
		out[k] = wireValue(v)
	}
	return out
}

func wireValue(v types.AttributeValue) map[string]any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": wireItem(v.Value)}
	}
	panic(fmt.Sprintf("bench: no wire form for %T", v))
}
