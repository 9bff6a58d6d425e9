package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
)

// The DynamoDB model of the report figures: every call waits its latency,
// as DynamoDB in the function's region answers (single-digit milliseconds
// for an item, more for a transaction), and a Scan page of 1 MB waits
// scanLatency as in the fleet section.
const (
	itemReadLatency  = 10 * time.Millisecond // TransactGetItems of a slave, its record and the set
	itemWriteLatency = 15 * time.Millisecond // TransactWriteItems, or UpdateItem of a description
	batchLatency     = 30 * time.Millisecond // TransactWriteItems of change.CreateBatch new slaves, 100 items
	scanPageBytes    = 1 << 20
	scanSegments     = 8
)

// On-demand prices, us-east-1, standard table class (per million request
// units, since November 2024), and the reports of a month at one a minute.
const (
	readUnitPrice   = 0.125 / 1e6
	writeUnitPrice  = 0.625 / 1e6
	reportsPerMonth = 730 * 60
)

// reportFigures measures machine reports: a complete report of the fleet
// with 1% changed and a first report of a new fleet, on the DynamoDB model
// (wall time, calls, request units, cost a month); the peak memory of the
// real InventoryFunction binary applying a complete report object of the
// whole fleet; and a first report of 20,000 machines on the emulator.
func reportFigures(ctx context.Context, e *env) ([]row, error) {
	// A first report at its smallest still takes two parts
	// (config.DefaultPartSize).
	size, firstSize, emulatorSize := e.size(100_000, 10_000, 1_000), e.size(100_000, 10_000, 4_000), e.size(20_000, 2_000, 200)
	itemBytes := approxItemBytes(fleettable.Items(1, 0)[0])
	fn, err := e.local.Template.FunctionConfig("InventoryFunction")
	if err != nil {
		return nil, err
	}
	inventoryTimeout := fn.Timeout
	var rows []row

	// Complete report, 1% changed.
	model := newDynamoModel(size, itemBytes)
	for i := range size {
		model.Put(fleetSlave(i))
	}
	changed := size / 100
	body := reportObject(size, func(i int) int {
		if i%100 == 0 {
			return 32 // 1%: more cpus than stored
		}
		return 16
	})
	took, longest, res, err := model.report(ctx, body, e)
	if err != nil {
		return nil, err
	}
	c := model.take()
	before := time.Duration(size) * itemReadLatency / 8 // every machine read, 8 at a time
	beforeRead := float64(size) * transactReadUnits
	rows = append(rows,
		row{figure: fmt.Sprintf("complete report of %d machines, 1%% changed: wall time on the DynamoDB model, before → after", size),
			value: fmt.Sprintf("%.0f s (computed: %d reads of %v, 8 at a time; over the %v timeout) → %.1f s (%d Scan pages, %d machines read and written; longest invocation %.1f s)",
				before.Seconds(), size, itemReadLatency, inventoryTimeout, took.Seconds(), c.pages, c.reads, longest.Seconds()),
			target: "≤ 30 s", met: verdict(took <= 30*time.Second && res.Failed == 0)},
		row{figure: "same: writes", value: fmt.Sprintf("%d writes for %d changed machines (+ 1 for the newest-report item)", c.writes(), changed),
			target: "= changed (+ a constant)", met: verdict(c.writes() == changed && res.Changed == changed)},
		row{figure: "same: request units a report, and a month at one report a minute (on-demand, us-east-1), before → after",
			value: fmt.Sprintf("%.0f RRU, %d WRU, $%.0f/month → %.0f RRU (%.0f of them the scan), %.0f WRU, $%.0f/month",
				beforeRead, changed, monthly(beforeRead, float64(changed)), c.readUnits(), c.scanUnits, c.writeUnits+1, monthly(c.readUnits(), c.writeUnits+1))},
	)

	// First complete report of a new fleet: every machine is created, in
	// parts.
	first := newDynamoModel(0, itemBytes)
	beforeFirst := time.Duration(firstSize) * (itemReadLatency + itemWriteLatency) / 8
	took, longest, res, err = first.report(ctx, reportObject(firstSize, func(int) int { return 16 }), e)
	if err != nil {
		return nil, err
	}
	c = first.take()
	rows = append(rows,
		row{figure: fmt.Sprintf("first complete report of %d new machines: wall time on the DynamoDB model, before → after", firstSize),
			value: fmt.Sprintf("%.0f s in one invocation (computed: a read and a write each, 8 at a time) → %.1f s in %d parts of %d, %d created; longest invocation %.1f s",
				beforeFirst.Seconds(), took.Seconds(), res.Parts, config.DefaultPartSize, c.creates, longest.Seconds()),
			target: fmt.Sprintf("≤ 120 s, no invocation over %v", inventoryTimeout), met: verdict(took <= 120*time.Second && longest < inventoryTimeout && c.creates == firstSize)},
		row{figure: "same: request units, and the cost of one such report",
			value: fmt.Sprintf("%.0f RRU, %.0f WRU ($%.2f; a new fleet is reported once)", c.readUnits(), c.writeUnits,
				c.readUnits()*readUnitPrice+c.writeUnits*writeUnitPrice)},
	)

	peak, err := reportPeak(ctx, e, size)
	if err != nil {
		return nil, err
	}
	rows = append(rows, peak)
	emulator, err := emulatorReport(ctx, e, emulatorSize)
	if err != nil {
		return nil, err
	}
	return append(rows, emulator), nil
}

func monthly(readUnits, writeUnits float64) float64 {
	return reportsPerMonth * (readUnits*readUnitPrice + writeUnits*writeUnitPrice)
}

// Request units of the store's calls: a transactional read of three items
// under 4 KB costs 2 units each; transactional writes cost 2 units a KB of
// each item, a plain one 1.
const (
	transactReadUnits = 3 * 2
	describeUnits     = 1     // UpdateItem of the description
	changeUnits       = 3 * 2 // the slave, its new history entry and the previous entry's TTL
	createUnits       = 2 * 2 // the slave and its first history entry
)

// fleetSlave is the stored slave i of fleettable.Items.
func fleetSlave(i int) machine.Slave {
	at := time.Now().Add(-time.Hour).UnixMilli()
	id := fmt.Sprintf("fleet-%06d", i)
	return machine.Slave{ID: id, FirstSeenAt: at, DescribedAt: at,
		Current: machine.Update{SlaveID: id, State: machine.Active, Timestamp: at, Message: "Machine reported up"},
		Host:    fmt.Sprintf("node-%06d.us-east-1.compute.internal", i), RackID: fmt.Sprintf("us-east-1%c", 'a'+i%6),
		Attributes: map[string]string{"instance_type": "m5.4xlarge", "ami": "ami-0abcdef1234567890"},
		Resources:  json.RawMessage(fmt.Sprintf(`{"cpus":%d,"mem":63000,"disk":500000,"ports":"[31000-32000]"}`, 16)),
	}
}

// reportObject is a complete report of the machines of fleettable.Items, as
// a gzip-compressed JSON object, machine i with cpus(i) cpus.
func reportObject(size int, cpus func(int) int) []byte {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	io.WriteString(z, `{"complete":true,"machines":[`)
	for i := range size {
		if i > 0 {
			io.WriteString(z, ",")
		}
		fmt.Fprintf(z, `{"id":"fleet-%06d","host":"node-%06d.us-east-1.compute.internal","rackId":"us-east-1%c",`+
			`"attributes":{"instance_type":"m5.4xlarge","ami":"ami-0abcdef1234567890"},`+
			`"resources":{"cpus":%d,"mem":63000,"disk":500000,"ports":"[31000-32000]"}}`, i, i, 'a'+i%6, cpus(i))
	}
	io.WriteString(z, `]}`)
	z.Close()
	return buf.Bytes()
}

// approxItemBytes is DynamoDB's size of an item: names and values.
func approxItemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)/2 + 1
		case *types.AttributeValueMemberM:
			n += 3 + approxItemBytes(v.Value)
		}
	}
	return n
}

// dynamoModel is the store over memory, each call waiting as DynamoDB
// would, counting what DynamoDB would bill.
type dynamoModel struct {
	*memstore.Store
	itemBytes int
	size      atomic.Int64 // slaves stored, for the scan's pages
	counts    modelCounts
}

type modelCounts struct {
	pages, reads, describes, changes, creates atomic.Int64
}

// modelTotals is what one report cost on the model.
type modelTotals struct {
	pages, reads, describes, changes, creates int
	scanUnits, writeUnits                     float64
}

func (t modelTotals) writes() int { return t.describes + t.changes + t.creates }
func (t modelTotals) readUnits() float64 {
	return t.scanUnits + float64(t.reads)*transactReadUnits
}

func newDynamoModel(size, itemBytes int) *dynamoModel {
	m := &dynamoModel{Store: memstore.New(0), itemBytes: itemBytes}
	m.size.Store(int64(size))
	return m
}

// List waits for the pages of a parallel scan, 8 segments at a time.
func (m *dynamoModel) List(ctx context.Context, each func(machine.Slave) error) error {
	pages := int(math.Ceil(float64(m.size.Load()) * float64(m.itemBytes) / scanPageBytes))
	m.counts.pages.Add(int64(max(pages, scanSegments)))
	time.Sleep(time.Duration((pages+scanSegments-1)/scanSegments) * scanLatency)
	return m.Store.List(ctx, each)
}

// Apply waits for the transactional read and, when the plan writes, for
// the write.
func (m *dynamoModel) Apply(ctx context.Context, id string, decide machine.Decide) error {
	time.Sleep(itemReadLatency)
	m.counts.reads.Add(1)
	var wrote *machine.Plan
	var created bool
	err := m.Store.Apply(ctx, id, func(s machine.Snapshot) (*machine.Plan, error) {
		p, err := decide(s)
		wrote, created = p, s.Slave == nil
		return p, err
	})
	if err != nil || wrote == nil {
		return err
	}
	time.Sleep(itemWriteLatency)
	switch {
	case created:
		m.counts.creates.Add(1)
		m.size.Add(1)
	case wrote.Entry != nil:
		m.counts.changes.Add(1)
	default:
		m.counts.describes.Add(1)
	}
	return nil
}

// ApplyAbsent waits for one transactional write a batch of
// change.CreateBatch new slaves; a slave found stored is applied alone, as
// Apply, without the model's wait (a first report has none).
func (m *dynamoModel) ApplyAbsent(ctx context.Context, ids []string, decide func(string) machine.Decide) []error {
	var errs []error
	for start := 0; start < len(ids); start += change.CreateBatch {
		batch := ids[start:min(start+change.CreateBatch, len(ids))]
		time.Sleep(batchLatency)
		for _, err := range m.Store.ApplyAbsent(ctx, batch, decide) {
			if err == nil {
				m.counts.creates.Add(1)
				m.size.Add(1)
			}
			errs = append(errs, err)
		}
	}
	return errs
}

// take returns the counts since the last take.
func (m *dynamoModel) take() modelTotals {
	t := modelTotals{pages: int(m.counts.pages.Swap(0)), reads: int(m.counts.reads.Swap(0)),
		describes: int(m.counts.describes.Swap(0)), changes: int(m.counts.changes.Swap(0)), creates: int(m.counts.creates.Swap(0))}
	t.scanUnits = float64(t.pages) * scanPageBytes / 4096 / 2
	if fleetBytes := float64(m.size.Load()) * float64(m.itemBytes); t.pages > 0 && fleetBytes < t.scanUnits*4096*2 {
		t.scanUnits = math.Ceil(fleetBytes/4096) / 2 // the last pages are not full
	}
	t.writeUnits = float64(t.describes*describeUnits + t.changes*changeUnits + t.creates*createUnits)
	return t
}

// report applies body, a report object, as S3's event has it applied:
// ReportStateMachine run by the local driver, each step the inventory
// handler over the model, parts in memory. It returns the wall time, the
// longest invocation, and the plan step's result.
func (m *dynamoModel) report(ctx context.Context, body []byte, e *env) (time.Duration, time.Duration, inventory.Result, error) {
	def, err := statemachine.Load(e.local.Template, "ReportStateMachine")
	if err != nil {
		return 0, 0, inventory.Result{}, err
	}
	objects := &memObjects{objects: map[string][]byte{"reports/fleet.json.gz": body}}
	marks := &memMarks{}
	var mu sync.Mutex
	var longest time.Duration
	var plan inventory.Result
	machine := &statemachine.Machine{Definition: def, Read: objects.read,
		Invoke: func(ctx context.Context, _ string, payload json.RawMessage) (json.RawMessage, error) {
			h := inventory.New(m, machine.NoLossBrake, e.quiet, nil).ReadsFrom("reports", objects).FansOut(marks, objects, config.DefaultPartSize)
			start := time.Now()
			res, err := h.Handle(ctx, payload)
			mu.Lock()
			longest = max(longest, time.Since(start))
			if bytes.Contains(payload, []byte(`"step":"plan"`)) {
				plan = res
			}
			mu.Unlock()
			if err != nil {
				return nil, err
			}
			return json.Marshal(res)
		}}
	event := fmt.Sprintf(`{"detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":"reports"},"object":{"key":"reports/fleet.json.gz"}}}`,
		time.Now().UTC().Format(time.RFC3339))
	m.take()
	start := time.Now()
	_, err = machine.Run(ctx, json.RawMessage(event))
	return time.Since(start), longest, plan, err
}

// memObjects is the reports bucket in memory.
type memObjects struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (o *memObjects) Open(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	body, err := o.read(ctx, bucket, key)
	return io.NopCloser(bytes.NewReader(body)), err
}

func (o *memObjects) read(_ context.Context, _, key string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	body, ok := o.objects[key]
	if !ok {
		return nil, fmt.Errorf("no object %s", key)
	}
	return body, nil
}

func (o *memObjects) Put(_ context.Context, _, key string, body []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.objects[key] = body
	return nil
}

// memMarks records the newest report in memory (one item in DynamoDB: a
// write a report, which the model does not bill).
type memMarks struct {
	mu sync.Mutex
	at int64
	id string
}

func (k *memMarks) StartReport(_ context.Context, at int64, id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if at >= k.at {
		k.at, k.id = at, id
	}
	return nil
}

func (k *memMarks) NewestReport(context.Context) (int64, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.at, k.id, nil
}

// withMark answers the one UpdateItem a report makes besides its changes,
// that of the newest-report item, and hands the table everything else.
type withMark struct{ http.Handler }

func (m withMark) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
		m.Handler.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	io.WriteString(w, "{}")
}

// reportPeak runs the real InventoryFunction binary at the template's
// MemorySize on a complete report object of size machines in the local
// reports bucket, its DynamoDB being the in-memory fleet of the same
// machines (which answers Scan only: the report changes nothing, so the
// function reads the object, scans the fleet and writes nothing).
func reportPeak(ctx context.Context, e *env, size int) (row, error) {
	table, err := fleettable.New(fleettable.Items(size, 0), scanLatency)
	if err != nil {
		return row{}, err
	}
	srv := httptest.NewServer(withMark{table})
	defer srv.Close()
	dir, err := os.MkdirTemp("", "fleet-bench-report-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	fn, err := inventoryFunction(ctx, e, dir)
	if err != nil {
		return row{}, err
	}
	fn.Env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.URL
	body := reportObject(size, func(int) int { return 16 })
	key := "reports/bench-peak.json.gz"
	if _, err := e.local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.local.ReportsBucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		return row{}, err
	}
	event := fmt.Sprintf(`{"detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":%q},"object":{"key":%q}}}`,
		time.Now().UTC().Format(time.RFC3339), e.local.ReportsBucket, key)
	res, err := fn.Invoke(ctx, []byte(event))
	if err != nil {
		return row{}, fmt.Errorf("report of %d machines at %d MB: %w", size, fn.MemorySize, err)
	}
	return row{figure: fmt.Sprintf("InventoryFunction applying a complete report object of %d machines (%.1f MB gzip): peak memory (Lambda's Max Memory Used)", size, mb(len(body))),
		value:  fmt.Sprintf("%d MB at MemorySize %d MB (%.1f s, %d Scan pages; %s)", res.MaxMemory>>20, fn.MemorySize, res.Handler().Seconds(), table.Scans(), strings.TrimSpace(string(res.Response))),
		target: fmt.Sprintf("≤ %d MB", fn.MemorySize), met: verdict(res.MaxMemory <= int64(fn.MemorySize)<<20)}, nil
}

// inventoryFunction builds the real InventoryFunction binary into dir, for
// this machine, and gives it the template's memory size and timeout and
// the local stack's environment, as make report runs it.
func inventoryFunction(ctx context.Context, e *env, dir string) (lambdarun.Function, error) {
	binary := filepath.Join(dir, "bootstrap")
	if err := lambdarun.Build(ctx, e.root, runtime.GOARCH, "./functions/inventory", binary); err != nil {
		return lambdarun.Function{}, err
	}
	cfg, err := e.local.Template.FunctionConfig("InventoryFunction")
	if err != nil {
		return lambdarun.Function{}, err
	}
	fn := lambdarun.Function{Binary: binary, Name: "InventoryFunction", MemorySize: cfg.MemorySize, Timeout: cfg.Timeout}
	fn.Env, err = localFunctionEnv(e, "InventoryFunction")
	return fn, err
}

// emulatorReport sends a first report of size new machines through the
// local reports bucket, as make report does: ReportStateMachine run by the
// local driver, each step an invocation of the real InventoryFunction
// binary on the emulator with the template's timeout, in parts of
// emulatorPartSize (dev/env.local.json's REPORT_PART_SIZE: the emulator
// answers one request at a time, so each of the 8 parts at once takes as
// long as all 8). It counts
// what was applied and the invocations that timed out.
func emulatorReport(ctx context.Context, e *env, size int) (row, error) {
	const emulatorPartSize = "200"
	for _, id := range e.local.Template.Tables() { // a fleet of its own
		if _, err := e.local.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(stack.LocalName(id))}); err != nil {
			return row{}, err
		}
	}
	if err := e.local.Template.CreateTables(ctx, e.local.DynamoDB, stack.LocalName); err != nil {
		return row{}, err
	}
	dir, err := os.MkdirTemp("", "fleet-bench-report-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	fn, err := inventoryFunction(ctx, e, dir)
	if err != nil {
		return row{}, err
	}
	fn.Env["REPORT_PART_SIZE"] = emulatorPartSize
	key := "reports/bench-emulator.json.gz"
	if _, err := e.local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.local.ReportsBucket), Key: aws.String(key),
		Body: bytes.NewReader(reportObject(size, func(int) int { return 16 }))}); err != nil {
		return row{}, err
	}
	def, err := statemachine.Load(e.local.Template, "ReportStateMachine")
	if err != nil {
		return row{}, err
	}
	var mu sync.Mutex
	var longest time.Duration
	timedOut := 0
	sm := &statemachine.Machine{Definition: def,
		Invoke: func(ctx context.Context, _ string, payload json.RawMessage) (json.RawMessage, error) {
			res, err := fn.Invoke(ctx, payload)
			var ferr *lambdarun.FunctionError
			mu.Lock()
			longest = max(longest, res.Handler())
			if errors.As(err, &ferr) && ferr.Type == "Sandbox.Timedout" {
				timedOut++
			}
			mu.Unlock()
			return res.Response, err
		},
		Read: func(ctx context.Context, bucket, key string) ([]byte, error) {
			out, err := e.local.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		}}
	event := fmt.Sprintf(`{"detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":%q},"object":{"key":%q}}}`,
		time.Now().UTC().Format(time.RFC3339), e.local.ReportsBucket, key)
	start := time.Now()
	_, runErr := sm.Run(ctx, json.RawMessage(event))
	took := time.Since(start)
	applied := -1 // the newest-report item is no machine
	pages := dynamodb.NewScanPaginator(e.local.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(stack.Tables.Slaves), Select: types.SelectCount})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return row{}, err
		}
		applied += int(out.Count)
	}
	value := fmt.Sprintf("%d of %d applied in %.0f s, %d invocations (parts of %s), longest %.1f s, %d timed out",
		applied, size, took.Seconds(), sm.Invocations.Load(), emulatorPartSize, longest.Seconds(), timedOut)
	if runErr != nil {
		value += fmt.Sprintf("; the execution failed: %v", runErr)
	}
	return row{figure: fmt.Sprintf("first report of %d machines on the emulator, as make report sends it (timeout %v an invocation)", size, fn.Timeout),
		value: value, target: "all applied, none timed out", met: verdict(runErr == nil && applied == size && timedOut == 0)}, nil
}
