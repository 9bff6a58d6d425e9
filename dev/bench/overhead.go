package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/app/slavesapp"
	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/web"
)

// The targets of a route's own time (p50): what it takes beyond its SDK
// calls made alone (replayed), which no handler can go below
// (docs/decisions.md "Handler time").
const (
	maxSlaveOverhead = 100 * time.Microsecond
	maxLogOverhead   = 500 * time.Microsecond
)

// overheadRoute is one route, driven by its sample event.
type overheadRoute struct {
	name  string
	event string        // in events/
	state machine.State // of the one slave the route reads or changes, if any
	unit  string        // what the answer lists, for the figure; "" for none
	logs  bool          // a log route: informative, no target
}

var overheadRoutes = []overheadRoute{
	{name: "list", event: "slaves-list.json", unit: "slaves"},
	{name: "list by state", event: "slaves-list-frozen.json", unit: "slaves"},
	{name: "details", event: "slaves-details.json", state: machine.Active},
	{name: "history", event: "slaves-history.json", state: machine.Active, unit: "entries"},
	{name: "expiring list", event: "slaves-list-expiring.json", unit: "records"},
	{name: "freeze", event: "slaves-freeze.json", state: machine.Active},
	{name: "decommission", event: "slaves-decommission.json", state: machine.Active},
	{name: "activate", event: "slaves-activate.json", state: machine.Frozen},
	{name: "delete", event: "slaves-delete.json", state: machine.Active},
	{name: "delete expiring", event: "slaves-delete-expiring.json"},
	{name: "log task lookup", event: "logs-task.json", unit: "logs", logs: true},
	{name: "log request lookup", event: "logs-request.json", unit: "logs", logs: true},
	{name: "log search", event: "logs-search.json", unit: "logs", logs: true},
}

// overhead times each route's handler, built as its function builds it,
// over SDK clients whose HTTP client answers from memory: what is left is
// the handler's own time, SDK serialization, signing and middleware
// included, backend I/O excluded.
func overhead(ctx context.Context, e *env) ([]row, error) {
	n := e.size(2000, 500, 50)
	var rows []row
	for _, route := range overheadRoutes {
		raw, err := os.ReadFile(filepath.Join(e.root, "events", route.event))
		if err != nil {
			return nil, err
		}
		request, err := requestMaker(ctx, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", route.event, err)
		}

		// The calls a request makes, counted on a handler of its own, so
		// that counting costs the timed handler nothing, after a first
		// request (the timed ones follow a warm-up too: an instance's first
		// list scans in more segments, its first feed read its key).
		c := newCalls()
		counted, err := memoryHandler(e, route, c)
		if err != nil {
			return nil, err
		}
		counted.ServeHTTP(httptest.NewRecorder(), request())
		c.take()
		rec := httptest.NewRecorder()
		counted.ServeHTTP(rec, request())
		inputs := c.recorded()
		byOp, ops := c.take()
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("%s (%s): status %d after %s: %s", route.name, route.event, rec.Code, ops, rec.Body)
		}
		sdkCalls := total(byOp)
		figure := route.name + " handler time p50 (" + ops
		if route.unit != "" {
			length, err := answerLength(rec)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", route.name, route.event, err)
			}
			figure += fmt.Sprintf(" → %d %s", length, route.unit)
		}
		if rec.Header().Get("Content-Encoding") == "gzip" {
			figure += ", gzipped"
		}
		figure += ")"

		h, err := memoryHandler(e, route, nil)
		if err != nil {
			return nil, err
		}
		// The route's own time: its p50 less its SDK calls' made alone.
		replay, err := replayer(ctx, e, route, inputs)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", route.name, route.event, err)
		}
		t, sdk, err := timeBoth(h, request, replay, n)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", route.name, route.event, err)
		}
		target := maxSlaveOverhead
		if route.logs {
			target = maxLogOverhead
		}
		own := t.p50 - sdk.p50
		rows = append(rows, row{
			figure: figure,
			value: fmt.Sprintf("own %s, %.0f allocs (all %s, p99 %s, %.0f allocs; its %d SDK %s alone %s, %.0f allocs)", micros(own), t.allocs-sdk.allocs,
				micros(t.p50), micros(t.p99), t.allocs, sdkCalls, map[bool]string{true: "call", false: "calls"}[sdkCalls == 1], micros(sdk.p50), sdk.allocs),
			target: fmt.Sprintf("own ≤ %s p50", micros(target)),
			met:    verdict(own <= target),
		})
	}
	return rows, nil
}

// micros formats a duration in whole microseconds.
func micros(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

// requestMaker converts a sample event the way the edge does and returns a
// function that makes fresh copies of the request (a body is read once).
func requestMaker(ctx context.Context, event []byte) (func() *http.Request, error) {
	tmpl, _, err := edge.Request(ctx, event)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(tmpl.Body)
	if err != nil {
		return nil, err
	}
	return func() *http.Request {
		r := tmpl.Clone(tmpl.Context())
		r.Body = http.NoBody
		if len(body) > 0 {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		return r
	}, nil
}

// memoryHandler builds the route's handler as functions/slaves or
// functions/logs does, from the template's environment (AUTH_MODE none, as
// in localFunctionEnv), over clients answered by memoryAWS.
func memoryHandler(e *env, route overheadRoute, c *calls) (http.Handler, error) {
	function := "SlavesFunction"
	if route.logs {
		function = "LogsFunction"
	}
	vars, err := localFunctionEnv(e, function)
	if err != nil {
		return nil, err
	}
	getenv := func(name string) string { return vars[name] }
	cfg := memoryConfig()
	opts := web.Options{Logger: e.quiet, RequestID: edge.RequestID}
	if route.logs {
		// memoryAWS answers S3 only: the lookups list the bucket, as
		// before the template's LogIndex read the index.
		vars["LOG_INDEX"] = "false"
		cfg.HTTPClient = &http.Client{Transport: newMemoryAWS(strings.Split(vars["LOG_BUCKETS"], ",")[0], nil)}
		if c != nil {
			c.count(&cfg)
		}
		client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
		h, err := logsapp.New(context.Background(), getenv, logsapp.Options{S3: client})
		if err != nil {
			return nil, err
		}
		return web.Wrap(h, opts), nil
	}
	tables := dynamo.Tables{Slaves: vars["SLAVES_TABLE"], History: vars["HISTORY_TABLE"], Expiring: vars["EXPIRING_TABLE"], Requests: vars["REQUESTS_TABLE"], Changes: vars["CHANGES_TABLE"]}
	cfg.HTTPClient = &http.Client{Transport: newMemoryAWS("", newFakeTables(tables, route.state))}
	if c != nil {
		c.count(&cfg)
	}
	h, err := slavesapp.New(context.Background(), getenv, slavesapp.Options{DynamoDB: dynamodb.NewFromConfig(cfg)})
	if err != nil {
		return nil, err
	}
	return web.Wrap(h, opts), nil
}

// memoryConfig is the SDK configuration of the memory handlers, but for
// its HTTP client: the service's retryer, static credentials.
func memoryConfig() aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDBENCH", "bench-secret", ""),
		BaseEndpoint: aws.String("http://aws.invalid"),
		Retryer:      sdkconfig.Retryer,
	}
}

// replayer makes a route's SDK calls again alone, one after another, from
// the inputs the route gave them, over the memory answers the route got:
// what the calls cost whatever the handler around them does. (The route
// makes some at once; on two cores, over memory, that saves little.)
func replayer(ctx context.Context, e *env, route overheadRoute, inputs []any) (func() error, error) {
	vars, err := localFunctionEnv(e, map[bool]string{false: "SlavesFunction", true: "LogsFunction"}[route.logs])
	if err != nil {
		return nil, err
	}
	tables := dynamo.Tables{Slaves: vars["SLAVES_TABLE"], History: vars["HISTORY_TABLE"], Expiring: vars["EXPIRING_TABLE"], Requests: vars["REQUESTS_TABLE"], Changes: vars["CHANGES_TABLE"]}
	cfg := memoryConfig()
	cfg.HTTPClient = &http.Client{Transport: newMemoryAWS("", newFakeTables(tables, route.state))}
	db := dynamodb.NewFromConfig(cfg)
	cfg = memoryConfig()
	cfg.HTTPClient = &http.Client{Transport: newMemoryAWS(strings.Split(vars["LOG_BUCKETS"], ",")[0], nil)}
	objects := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	return func() error {
		for _, in := range inputs {
			var err error
			switch in := in.(type) {
			case *dynamodb.GetItemInput:
				_, err = db.GetItem(ctx, in)
			case *dynamodb.QueryInput:
				_, err = db.Query(ctx, in)
			case *dynamodb.ScanInput:
				_, err = db.Scan(ctx, in)
			case *dynamodb.BatchGetItemInput:
				_, err = db.BatchGetItem(ctx, in)
			case *dynamodb.TransactGetItemsInput:
				_, err = db.TransactGetItems(ctx, in)
			case *dynamodb.TransactWriteItemsInput:
				_, err = db.TransactWriteItems(ctx, in)
			case *dynamodb.PutItemInput:
				_, err = db.PutItem(ctx, in)
			case *dynamodb.UpdateItemInput:
				_, err = db.UpdateItem(ctx, in)
			case *dynamodb.DeleteItemInput:
				_, err = db.DeleteItem(ctx, in)
			case *dynamodb.BatchWriteItemInput:
				_, err = db.BatchWriteItem(ctx, in)
			case *s3.ListObjectsV2Input:
				_, err = objects.ListObjectsV2(ctx, in)
			case *s3.HeadObjectInput:
				_, err = objects.HeadObject(ctx, in)
			default:
				err = fmt.Errorf("no replay of a %T", in)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// answerLength is the number of elements of a JSON array answer, or of the
// results of a search answer. The answer may be gzipped (web.Wrap does it for
// clients that accept it, as the sample events do).
func answerLength(rec *httptest.ResponseRecorder) (int, error) {
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return 0, err
		}
	}
	var list []json.RawMessage
	if json.Unmarshal(body, &list) == nil {
		return len(list), nil
	}
	var search struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &search); err != nil {
		return 0, fmt.Errorf("answer is neither a list nor a search result: %w", err)
	}
	return len(search.Results), nil
}

// handlerTimes are the timings of one route.
type handlerTimes struct {
	p50, p99 time.Duration
	allocs   float64 // per request
}

// timeBoth warms h and replay up, then times n requests of h and n
// replays, one by one, in alternating rounds, so that a change of the
// machine's load meets both alike: the route's own time is the difference.
// Requests and recorders are made before each batch, so that the
// allocations counted are the handler's.
func timeBoth(h http.Handler, request func() *http.Request, replay func() error, n int) (route, sdk handlerTimes, err error) {
	for range max(n/10, 50) {
		rec := httptest.NewRecorder()
		if h.ServeHTTP(rec, request()); rec.Code != http.StatusOK {
			return route, sdk, fmt.Errorf("status %d: %s", rec.Code, rec.Body)
		}
		if err := replay(); err != nil {
			return route, sdk, fmt.Errorf("replay its calls: %w", err)
		}
	}
	const rounds = 10
	var r, c samples
	for i := range rounds {
		k := n / rounds
		if i < n%rounds {
			k++ // n in all
		}
		if err := r.handler(h, request, k); err != nil {
			return route, sdk, err
		}
		if err := c.calls(replay, k); err != nil {
			return route, sdk, fmt.Errorf("replay its calls: %w", err)
		}
	}
	return r.times(), c.times(), nil
}

// samples are the times and allocations of requests or calls.
type samples struct {
	each    []time.Duration
	mallocs uint64
}

// handler times k requests of h, in batches whose requests and recorders
// are made before them.
func (s *samples) handler(h http.Handler, request func() *http.Request, k int) error {
	const batch = 250
	reqs := make([]*http.Request, batch)
	recs := make([]*httptest.ResponseRecorder, batch)
	var before, after runtime.MemStats
	for done := 0; done < k; {
		b := min(batch, k-done)
		for i := range b {
			reqs[i], recs[i] = request(), httptest.NewRecorder()
		}
		runtime.ReadMemStats(&before)
		for i := range b {
			start := time.Now()
			h.ServeHTTP(recs[i], reqs[i])
			s.each = append(s.each, time.Since(start))
		}
		runtime.ReadMemStats(&after)
		s.mallocs += after.Mallocs - before.Mallocs
		for i := range b {
			if recs[i].Code != http.StatusOK {
				return fmt.Errorf("status %d: %s", recs[i].Code, recs[i].Body)
			}
		}
		done += b
	}
	return nil
}

// calls times k calls of call.
func (s *samples) calls(call func() error, k int) error {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range k {
		start := time.Now()
		if err := call(); err != nil {
			return err
		}
		s.each = append(s.each, time.Since(start))
	}
	runtime.ReadMemStats(&after)
	s.mallocs += after.Mallocs - before.Mallocs
	return nil
}

func (s *samples) times() handlerTimes {
	slices.Sort(s.each)
	n := len(s.each)
	return handlerTimes{p50: s.each[n/2], p99: s.each[n*99/100], allocs: float64(s.mallocs) / float64(n)}
}

// memoryAWS answers DynamoDB (by X-Amz-Target) and S3 requests from memory
// with valid, canned responses, as fast as it can: what a route costs over
// it is its own work.
type memoryAWS struct {
	tables *fakeTables // nil: no DynamoDB
	bucket string      // the S3 bucket, "" for none
	lists  sync.Map    // ListObjectsV2 answers by query string
}

func newMemoryAWS(bucket string, tables *fakeTables) *memoryAWS {
	return &memoryAWS{tables: tables, bucket: bucket}
}

func (m *memoryAWS) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" && m.tables != nil {
		_, op, _ := strings.Cut(target, ".")
		a, ok := m.tables.answer(op, body)
		if !ok {
			a = dynamoAnswer(400, `{"__type":"com.amazonaws.dynamodb.v20120810#UnknownOperationException","message":"memoryAWS has no answer for `+op+`"}`)
		}
		h := http.Header{}
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("X-Amz-Crc32", a.crc)
		h.Set("X-Amzn-Requestid", "BENCH0REQUEST0ID")
		return memoryResponse(r, a.status, h, a.body), nil
	}
	if m.bucket == "" {
		return memoryResponse(r, http.StatusNotFound, http.Header{}, nil), nil
	}
	return m.s3(r), nil
}

func memoryResponse(r *http.Request, status int, h http.Header, body []byte) *http.Response {
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

// Log objects: every prefix holds logsPerPrefix objects, with start and end
// times in their metadata as the task uploader writes them.
const (
	logsPerPrefix = 4
	logStart      = 1793491200000
)

var logModified = time.UnixMilli(logStart + 3_600_000).UTC()

func (m *memoryAWS) s3(r *http.Request) *http.Response {
	h := http.Header{}
	h.Set("X-Amz-Request-Id", "BENCH0REQUEST0ID")
	if r.Method == http.MethodHead {
		h.Set("Content-Type", "application/gzip")
		h.Set("Content-Length", "48213")
		h.Set("Etag", `"9b2cf535f27731c974343645a3985328"`)
		h.Set("Last-Modified", logModified.Format(http.TimeFormat))
		h.Set("X-Amz-Meta-Starttime", strconv.Itoa(logStart))
		h.Set("X-Amz-Meta-Endtime", strconv.Itoa(logStart+3_540_000))
		return &http.Response{Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: http.NoBody, ContentLength: 48213, Request: r}
	}
	q := r.URL.Query()
	if q.Get("list-type") != "2" {
		return memoryResponse(r, http.StatusNotImplemented, h, nil)
	}
	h.Set("Content-Type", "application/xml")
	if v, ok := m.lists.Load(r.URL.RawQuery); ok {
		return memoryResponse(r, http.StatusOK, h, v.([]byte))
	}
	body := listAnswer(m.bucket, q.Get("prefix"), q.Get("start-after"), q.Get("max-keys"))
	m.lists.Store(r.URL.RawQuery, body)
	return memoryResponse(r, http.StatusOK, h, body)
}

// listAnswer is a ListObjectsV2 answer: the prefix's objects after
// startAfter, at most maxKeys of them.
func listAnswer(bucket, prefix, startAfter, maxKeys string) []byte {
	limit, err := strconv.Atoi(maxKeys)
	if err != nil {
		limit = 1000
	}
	var keys []string
	for i := range logsPerPrefix {
		key := prefix + fmt.Sprintf("%d-%d-service.log.gz", i, logStart+int64(i)*60_000)
		if !strings.HasSuffix(prefix, "_") {
			key = prefix + fmt.Sprintf("web-api-v42-%d-%d-node17-us_east_1a_0-%d-service.log.gz", logStart, i, logStart)
		}
		if key > startAfter {
			keys = append(keys, key)
		}
	}
	truncated := len(keys) > limit
	keys = keys[:min(limit, len(keys))]
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	fmt.Fprintf(&b, "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys><IsTruncated>%t</IsTruncated>",
		escapeXML(bucket), escapeXML(prefix), len(keys), limit, truncated)
	if truncated {
		fmt.Fprintf(&b, "<NextContinuationToken>%s</NextContinuationToken>", escapeXML(keys[len(keys)-1]))
	}
	for _, k := range keys {
		fmt.Fprintf(&b, `<Contents><Key>%s</Key><LastModified>%s</LastModified><ETag>"9b2cf535f27731c974343645a3985328"</ETag><Size>48213</Size><StorageClass>STANDARD</StorageClass></Contents>`,
			escapeXML(k), logModified.Format("2006-01-02T15:04:05.000Z"))
	}
	b.WriteString("</ListBucketResult>")
	return b.Bytes()
}

func escapeXML(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// cannedAnswer is a DynamoDB answer, with the CRC32 header the SDK checks.
type cannedAnswer struct {
	status int
	body   []byte
	crc    string
}

// cannedJSON is a 200 answer holding v, which holds only maps, slices,
// strings, numbers and booleans.
func cannedJSON(v wireObj) cannedAnswer {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return dynamoAnswer(http.StatusOK, string(body))
}

func dynamoAnswer(status int, body string) cannedAnswer {
	return cannedAnswer{status: status, body: []byte(body), crc: strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10)}
}

// fakeTables holds the canned answers of the store's calls, in the shapes
// of shared/dynamo's records: a fleet of 12 slaves (3 per Scan segment), the
// slave the routes name in state, its history of 6 entries, 3 expiring
// records and a decommissioning set holding one other slave.
type fakeTables struct {
	tables  dynamo.Tables
	mu      sync.Mutex              // the store scans segments in parallel
	answers map[string]cannedAnswer // by operation, or operation/case; Scan's added on first use
}

const (
	fakeSlaveID  = "20261121-051400-16777343-5050-1234-S1"
	fakeNow      = 1795238040000
	fakeFleet    = 12
	fakeHistory  = 6
	fakeExpiring = 3
	fakeByState  = 4
	// fakeRetention is how long a superseded entry is kept: any value
	// does, as the canned answers are only read.
	fakeRetention = 90 * 24 * 3600 // s
)

func newFakeTables(tables dynamo.Tables, state machine.State) *fakeTables {
	f := &fakeTables{tables: tables, answers: map[string]cannedAnswer{}}
	put := func(key string, v wireObj) { f.answers[key] = cannedJSON(v) }
	slave := fakeSlave(fakeSlaveID, 1, state)
	put("GetItem", wireObj{"Item": slave})
	var frozen []wireObj
	for i := range fakeByState {
		frozen = append(frozen, fakeSlave(fmt.Sprintf("20261121-051400-16777343-5050-1234-S%d", i+1), i+1, machine.Frozen))
	}
	put("Query/ByState", queryPage(frozen))
	var history, keys []wireObj
	for seq := fakeHistory; seq >= 1; seq-- {
		st := []machine.State{machine.Active, machine.Frozen}[seq%2]
		var expiresAt int64
		if seq < fakeHistory {
			expiresAt = fakeNow/1000 + fakeRetention
		}
		entry := machine.Update{SlaveID: fakeSlaveID, State: st, Timestamp: fakeNow - int64(fakeHistory-seq)*3_600_000,
			User: "ops@example.com", Message: "kernel upgrade on node-1.example.com"}
		history = append(history, fixture(dynamo.HistoryItem(entry, int64(seq), expiresAt)))
		keys = append(keys, wireObj{"slaveId": attrS(fakeSlaveID), "seq": attrN(int64(seq))})
	}
	put("Query/history", queryPage(history))
	put("Query/keys", queryPage(keys))
	var expiring, existing []wireObj
	for i := range fakeExpiring {
		id := fmt.Sprintf("20261121-051400-16777343-5050-1234-S%d", i+1)
		expiring = append(expiring, fakeExpiringRecord(id))
		existing = append(existing, wireObj{"id": attrS(id)})
	}
	put("Scan/expiring", queryPage(expiring))
	put("BatchGetItem", wireObj{"Responses": wireObj{tables.Slaves: existing}, "UnprocessedKeys": wireObj{}})
	limit := fixture(dynamo.DecommissioningItem([]string{"20261121-051400-16777343-5050-1234-S9"}, fakeNow-86_400_000))
	put("TransactGetItems", wireObj{"Responses": []wireObj{{"Item": slave}, {}, {"Item": limit}, {}, {}}})
	// The change feed: its cursor key; its heads (BatchGetItem, above,
	// answers none of them) are all 0, an empty feed.
	put("GetItem/feedkey", wireObj{"Item": fixture(dynamo.FeedKeyItem(bytes.Repeat([]byte{7}, 32)), nil)})
	for _, op := range []string{"TransactWriteItems", "PutItem", "DeleteItem", "UpdateItem"} {
		put(op, wireObj{})
	}
	put("BatchWriteItem", wireObj{"UnprocessedItems": wireObj{}})
	return f
}

// answer picks the canned answer of one call, telling the tables and
// indexes apart by the request.
func (f *fakeTables) answer(op string, body []byte) (cannedAnswer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := op
	switch op {
	case "GetItem":
		if bytes.Contains(body, []byte(`"TableName":"`+f.tables.Changes+`"`)) {
			key = "GetItem/feedkey"
		}
	case "Scan":
		if !bytes.Contains(body, []byte(`"TableName":"`+f.tables.Slaves+`"`)) {
			key = "Scan/expiring"
			break
		}
		// The store scans in parallel segments: each gets its share.
		seg, total := jsonInt(body, "Segment"), max(jsonInt(body, "TotalSegments"), 1)
		key = fmt.Sprintf("Scan/%d/%d", seg, total)
		if _, ok := f.answers[key]; !ok {
			var items []wireObj
			for i := seg; i < fakeFleet; i += total {
				items = append(items, fakeSlave(fmt.Sprintf("20261121-051400-16777343-5050-1234-S%d", i+1), i+1, machine.Active))
			}
			f.answers[key] = cannedJSON(queryPage(items))
		}
	case "Query":
		switch {
		case bytes.Contains(body, []byte(`"IndexName":"ByState"`)):
			key = "Query/ByState"
		case bytes.Contains(body, []byte(`"ProjectionExpression"`)):
			key = "Query/keys"
		default:
			key = "Query/history"
		}
	}
	a, ok := f.answers[key]
	return a, ok
}

// jsonInt reads the integer member name of a compact JSON object, 0 when
// there is none.
func jsonInt(body []byte, name string) int {
	_, rest, ok := bytes.Cut(body, []byte(`"`+name+`":`))
	if !ok {
		return 0
	}
	end := bytes.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(rest)
	}
	v, _ := strconv.Atoi(string(rest[:end]))
	return v
}

// wireObj is a JSON object of DynamoDB's wire format.
type wireObj = map[string]any

func attrS(v string) wireObj { return wireObj{"S": v} }
func attrN(v int64) wireObj  { return wireObj{"N": strconv.FormatInt(v, 10)} }

func queryPage(items []wireObj) wireObj {
	return wireObj{"Items": items, "Count": len(items), "ScannedCount": len(items)}
}

// fixture is an item the store would write (shared/dynamo's items), in
// DynamoDB's JSON; an item that cannot be built is a bug of the bench.
func fixture(item map[string]types.AttributeValue, err error) wireObj {
	if err != nil {
		panic(fmt.Sprintf("bench: fake item: %v", err))
	}
	return fleettable.Wire(item)
}

func fakeSlave(id string, i int, state machine.State) wireObj {
	return fixture(dynamo.SlaveItem(machine.Slave{
		ID:          id,
		FirstSeenAt: fakeNow - 30*86_400_000,
		Current:     machine.Update{SlaveID: id, State: state, Timestamp: fakeNow, User: "ops@example.com", Message: "kernel upgrade on node-1.example.com"},
		Host:        fmt.Sprintf("node-%d.example.com", i),
		RackID:      "us-east-1a",
		Attributes:  map[string]string{"instance_type": "m5.4xlarge", "pool": "default"},
		Resources:   json.RawMessage(`{"cpus":16,"mem":63000,"disk":400000,"ports":"[31000-32000]"}`),
	}, fakeHistory))
}

func fakeExpiringRecord(id string) wireObj {
	hour, active := int64(3_600_000), machine.Active
	return fixture(dynamo.ExpiringItem(machine.Expiring{MachineID: id, User: "ops@example.com", StartMillis: fakeNow,
		ActionID: "5f0c6e1e-2b7d-4c8a-9f3e-0d1a2b3c4d5e", RevertTo: active,
		Request: machine.ChangeRequest{Message: "freeze for one hour while the disk is replaced", DurationMillis: &hour,
			RevertToState: &active, ActionID: "5f0c6e1e-2b7d-4c8a-9f3e-0d1a2b3c4d5e"}}))
}
