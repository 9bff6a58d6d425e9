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

// One report a minute, the reports of a month.
const reportsPerMonth = minutesPerMonth

// reportFigures measures machine reports: a complete report of the fleet
// with 1% changed and a first report of a new fleet, on the DynamoDB model
// (wall time, calls, request units, cost a month); the peak memory of the
// real InventoryFunction binary applying a complete report object of the
// whole fleet; and a first report on the emulator. Each at two sizes, for
// the slope (fit) that gives the figure of 100,000 machines (20,000 on the
// emulator, make report's).
func reportFigures(ctx context.Context, e *env) ([]row, error) {
	// A first report at its smallest still takes two parts
	// (config.DefaultPartSize).
	sizes := []int{e.size(20_000, 5_000, 1_000), e.size(50_000, 10_000, 2_000)}
	firstSizes := []int{e.size(10_000, 4_000, 4_000), e.size(30_000, 8_000, 6_000)}
	emulatorSizes := []int{e.size(1_000, 500, 100), e.size(3_000, 1_000, 200)}
	itemBytes := approxItemBytes(fleettable.Items(1, 0)[0])
	fn, err := e.local.Template.FunctionConfig("InventoryFunction")
	if err != nil {
		return nil, err
	}
	inventoryTimeout := fn.Timeout
	var rows []row

	// Complete report, 1% changed.
	var took, busy, invocations, states, readUnits, writeUnits, objectBytes []point
	for _, size := range sizes {
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
		run, err := model.report(ctx, body, e)
		if err != nil {
			return nil, err
		}
		c := model.take()
		at := float64(size)
		took, busy = append(took, point{at, run.took.Seconds()}), append(busy, point{at, run.busy.Seconds()})
		invocations, states = append(invocations, point{at, float64(run.invocations)}), append(states, point{at, float64(run.states)})
		readUnits, writeUnits = append(readUnits, point{at, c.readUnits()}), append(writeUnits, point{at, c.writeUnits + 1})
		objectBytes = append(objectBytes, point{at, float64(len(body))})
		if size != sizes[len(sizes)-1] {
			continue
		}
		before := time.Duration(size) * itemReadLatency / 8 // every machine read, 8 at a time
		beforeRead := float64(size) * transactReadUnits
		rows = append(rows,
			row{figure: fmt.Sprintf("complete report of %d machines, 1%% changed: wall time on the DynamoDB model, before → after", size),
				value: fmt.Sprintf("%.0f s (computed: %d reads of %v, 8 at a time) → %.1f s (%d Scan pages, %d machines read and written; longest invocation %.1f s)",
					before.Seconds(), size, itemReadLatency, run.took.Seconds(), c.pages, c.reads, run.longest.Seconds()),
				target: "≤ 30 s", met: verdict(run.took <= 30*time.Second && run.plan.Failed == 0)},
			row{figure: "same: writes", value: fmt.Sprintf("%d writes for %d changed machines (+ 1 for the newest-report item)", c.writes(), changed),
				target: "= changed (+ a constant)", met: verdict(c.writes() == changed && run.plan.Changed == changed)},
			row{figure: "same: request units a report, and a month at one report a minute (on-demand, us-east-1), before → after",
				value: fmt.Sprintf("%.0f RRU, %d WRU, $%.0f/month → %.0f RRU (%.0f of them the scan), %.0f WRU, $%.0f/month",
					beforeRead, changed, monthly(beforeRead, float64(changed)), c.readUnits(), c.scanUnits, c.writeUnits+1, monthly(c.readUnits(), c.writeUnits+1))},
		)
	}
	tookAt := fit(took...)
	read, write := fit(readUnits...), fit(writeUnits...)
	rows = append(rows,
		row{figure: fmt.Sprintf("complete report of %s machines, 1%% changed, on the DynamoDB model: wall time", thousands(scaleMachines)),
			value: tookAt.extrapolated(scaleMachines, seconds), target: fmt.Sprintf("≤ 30 s, within the %v timeout", inventoryTimeout),
			met: verdict(tookAt.at(scaleMachines) <= 30 && tookAt.at(scaleMachines) < inventoryTimeout.Seconds())},
		row{figure: "same: request units a report, read and written, and a month at one report a minute",
			value: fmt.Sprintf("%s RRU; %s WRU; $%.0f/month", read.extrapolated(scaleMachines, count), write.extrapolated(scaleMachines, count),
				monthly(read.at(scaleMachines), write.at(scaleMachines)))},
	)
	e.costs.report = &reportCost{invocations: fit(invocations...).at(scaleMachines), seconds: fit(busy...).at(scaleMachines),
		states: fit(states...).at(scaleMachines), readUnits: read.at(scaleMachines), writeUnits: write.at(scaleMachines),
		objectBytes: fit(objectBytes...).at(scaleMachines), from: fmt.Sprintf("extrapolated from %s and %s machines", thousands(float64(sizes[0])), thousands(float64(sizes[1])))}

	// First complete report of a new fleet: every machine is created, in
	// parts.
	var firstTook, firstLongest, firstRead, firstWrite []point
	for _, firstSize := range firstSizes {
		first := newDynamoModel(0, itemBytes)
		run, err := first.report(ctx, reportObject(firstSize, func(int) int { return 16 }), e)
		if err != nil {
			return nil, err
		}
		c := first.take()
		at := float64(firstSize)
		firstTook, firstLongest = append(firstTook, point{at, run.took.Seconds()}), append(firstLongest, point{at, run.longest.Seconds()})
		firstRead, firstWrite = append(firstRead, point{at, c.readUnits()}), append(firstWrite, point{at, c.writeUnits})
		if firstSize != firstSizes[len(firstSizes)-1] {
			continue
		}
		beforeFirst := time.Duration(firstSize) * (itemReadLatency + itemWriteLatency) / 8
		rows = append(rows,
			row{figure: fmt.Sprintf("first complete report of %d new machines: wall time on the DynamoDB model, before → after", firstSize),
				value: fmt.Sprintf("%.0f s in one invocation (computed: a read and a write each, 8 at a time) → %.1f s in %d parts of %d, %d created; longest invocation %.1f s",
					beforeFirst.Seconds(), run.took.Seconds(), run.plan.Parts, config.DefaultPartSize, c.creates, run.longest.Seconds()),
				target: fmt.Sprintf("no invocation over %v", inventoryTimeout), met: verdict(run.longest < inventoryTimeout && c.creates == firstSize)},
		)
	}
	longestAt := fit(firstLongest...)
	firstRU, firstWU := fit(firstRead...).at(scaleMachines), fit(firstWrite...).at(scaleMachines)
	rows = append(rows,
		row{figure: fmt.Sprintf("first complete report of %s new machines on the DynamoDB model: wall time, longest invocation", thousands(scaleMachines)),
			value:  fmt.Sprintf("%s; %s", fit(firstTook...).extrapolated(scaleMachines, seconds), longestAt.extrapolated(scaleMachines, seconds)),
			target: fmt.Sprintf("≤ 120 s, no invocation over %v", inventoryTimeout), met: verdict(fit(firstTook...).at(scaleMachines) <= 120 && longestAt.at(scaleMachines) < inventoryTimeout.Seconds())},
		row{figure: "same: request units, and the cost of one such report",
			value: fmt.Sprintf("%s RRU, %s WRU ($%.2f; a new fleet is reported once)", thousands(firstRU), thousands(firstWU), firstRU*readUnitPrice+firstWU*writeUnitPrice)},
	)

	var peaks []point
	for _, size := range sizes {
		peak, err := reportPeak(ctx, e, size)
		if err != nil {
			return nil, err
		}
		peaks = append(peaks, point{float64(size), float64(peak.MaxMemory) / (1 << 20)})
	}
	peakAt := fit(peaks...)
	rows = append(rows, row{figure: fmt.Sprintf("InventoryFunction applying a complete report object of %s machines: peak memory (Lambda's Max Memory Used)", thousands(scaleMachines)),
		value:  fmt.Sprintf("%s at MemorySize %d MB", peakAt.extrapolated(scaleMachines, megabytes), fn.MemorySize),
		target: fmt.Sprintf("≤ %d MB", fn.MemorySize), met: verdict(peakAt.at(scaleMachines) <= float64(fn.MemorySize))})

	var emulatorTook []point
	for _, size := range emulatorSizes {
		r, err := emulatorReport(ctx, e, size)
		if err != nil {
			return nil, err
		}
		emulatorTook = append(emulatorTook, point{float64(size), r.took.Seconds()})
		if size == emulatorSizes[len(emulatorSizes)-1] {
			rows = append(rows, r.row)
		}
	}
	const makeReport = 20_000 // the first report make report is measured with (BENCHMARKS.md)
	// Its parts are of one size: the longest invocation does not grow
	// with the report, its time does.
	return append(rows, row{figure: fmt.Sprintf("first report of %s machines on the emulator, as make report sends it: time", thousands(makeReport)),
		value: fit(emulatorTook...).extrapolated(makeReport, seconds)}), nil
}

func monthly(readUnits, writeUnits float64) float64 {
	return reportsPerMonth * (readUnits*readUnitPrice + writeUnits*writeUnitPrice)
}

// Request units of the store's calls: a transactional read of items
// under 4 KB costs 2 units each; transactional writes cost 2 units a KB of
// each item. Every change also reads its feed shard's head and writes the
// head and an entry of about 1 KB in its transaction (docs/decisions.md "A
// change feed positioned in the change's own transaction"), a description
// too.
const (
	feedReadUnits     = 2     // the shard's head
	feedWriteUnits    = 2 * 2 // the head and the entry
	transactReadUnits = 3*2 + feedReadUnits
	describeUnits     = 2 + feedWriteUnits   // the slave's Update
	changeUnits       = 3*2 + feedWriteUnits // the slave, its new history entry and the previous entry's TTL
	createUnits       = 3 * 2                // the slave, its first history entry and its feed entry (the batch's heads shared)
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

// reportRun is what one report cost on the model: its wall time, its
// longest invocation and all its invocations' time, the invocations and
// the states entered, and the plan step's result.
type reportRun struct {
	took, longest, busy time.Duration
	invocations, states int64
	plan                inventory.Result
}

// report applies body, a report object, as S3's event has it applied:
// ReportStateMachine run by the local driver, each step the inventory
// handler over the model, parts in memory.
func (m *dynamoModel) report(ctx context.Context, body []byte, e *env) (reportRun, error) {
	def, err := statemachine.Load(e.local.Template, "ReportStateMachine")
	if err != nil {
		return reportRun{}, err
	}
	objects := &memObjects{objects: map[string][]byte{"reports/fleet.json.gz": body}}
	marks := &memMarks{}
	var mu sync.Mutex
	var run reportRun
	machine := &statemachine.Machine{Definition: def, Read: objects.read,
		Invoke: func(ctx context.Context, _ string, payload json.RawMessage) (json.RawMessage, error) {
			h := inventory.New(m, machine.NoLossBrake, e.quiet, nil).ReadsFrom("reports", objects).FansOut(marks, objects, config.DefaultPartSize)
			start := time.Now()
			res, err := h.Handle(ctx, payload)
			took := time.Since(start)
			mu.Lock()
			run.longest = max(run.longest, took)
			run.busy += took
			if bytes.Contains(payload, []byte(`"step":"plan"`)) {
				run.plan = res
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
	run.took = time.Since(start)
	run.invocations, run.states = machine.Invocations.Load(), machine.States.Load()
	return run, err
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
// function reads the object, scans the fleet and writes nothing), and
// returns what Lambda would report of it.
func reportPeak(ctx context.Context, e *env, size int) (lambdarun.Result, error) {
	table, err := fleettable.New(fleettable.Items(size, 0), scanLatency)
	if err != nil {
		return lambdarun.Result{}, err
	}
	srv := httptest.NewServer(withMark{table})
	defer srv.Close()
	dir, err := os.MkdirTemp("", "fleet-bench-report-")
	if err != nil {
		return lambdarun.Result{}, err
	}
	defer os.RemoveAll(dir)
	fn, err := inventoryFunction(ctx, e, dir)
	if err != nil {
		return lambdarun.Result{}, err
	}
	fn.Env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.URL
	body := reportObject(size, func(int) int { return 16 })
	key := "reports/bench-peak.json.gz"
	if _, err := e.local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.local.ReportsBucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		return lambdarun.Result{}, err
	}
	event := fmt.Sprintf(`{"detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":%q},"object":{"key":%q}}}`,
		time.Now().UTC().Format(time.RFC3339), e.local.ReportsBucket, key)
	res, err := fn.Invoke(ctx, []byte(event))
	if err != nil {
		return res, fmt.Errorf("report of %d machines at %d MB: %w", size, fn.MemorySize, err)
	}
	return res, nil
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
// binary on the emulator with the template's timeout, in the parts of
// make report (dev/env.local.json's REPORT_PART_SIZE: the emulator
// answers one request at a time, so each of the 8 parts at once takes as
// long as all 8). It counts what was applied and the invocations that
// timed out.
func emulatorReport(ctx context.Context, e *env, size int) (emulated, error) {
	local, err := e.local.Template.InvokeEnv("InventoryFunction", func(string) (string, bool) { return "", false }, filepath.Join(e.root, "dev", "env.local.json"))
	if err != nil {
		return emulated{}, err
	}
	emulatorPartSize := local["REPORT_PART_SIZE"]
	for _, id := range e.local.Template.Tables() { // a fleet of its own
		if _, err := e.local.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(stack.LocalName(id))}); err != nil {
			return emulated{}, err
		}
	}
	if err := e.local.Template.CreateTables(ctx, e.local.DynamoDB, stack.LocalName); err != nil {
		return emulated{}, err
	}
	dir, err := os.MkdirTemp("", "fleet-bench-report-")
	if err != nil {
		return emulated{}, err
	}
	defer os.RemoveAll(dir)
	fn, err := inventoryFunction(ctx, e, dir)
	if err != nil {
		return emulated{}, err
	}
	fn.Env["REPORT_PART_SIZE"] = emulatorPartSize
	key := "reports/bench-emulator.json.gz"
	if _, err := e.local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(e.local.ReportsBucket), Key: aws.String(key),
		Body: bytes.NewReader(reportObject(size, func(int) int { return 16 }))}); err != nil {
		return emulated{}, err
	}
	def, err := statemachine.Load(e.local.Template, "ReportStateMachine")
	if err != nil {
		return emulated{}, err
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
			return emulated{}, err
		}
		applied += int(out.Count)
	}
	value := fmt.Sprintf("%d of %d applied in %.0f s, %d invocations (parts of %s), longest %.1f s, %d timed out",
		applied, size, took.Seconds(), sm.Invocations.Load(), emulatorPartSize, longest.Seconds(), timedOut)
	if runErr != nil {
		value += fmt.Sprintf("; the execution failed: %v", runErr)
	}
	return emulated{took: took, longest: longest, row: row{figure: fmt.Sprintf("first report of %d machines on the emulator, as make report sends it (timeout %v an invocation)", size, fn.Timeout),
		value: value, target: "all applied, none timed out", met: verdict(runErr == nil && applied == size && timedOut == 0)}}, nil
}

// emulated is a first report on the emulator: its time, its longest
// invocation, and its row.
type emulated struct {
	took, longest time.Duration
	row           row
}
