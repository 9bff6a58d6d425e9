package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/change"
)

// On-demand list prices in us-east-1, from AWS's public pricing pages
// (aws.amazon.com/<service>/pricing) as published in November 2024, after
// DynamoDB's on-demand price cut of 1 November 2024; free tiers left out.
// Every cost the bench prints is computed from these.
const (
	// Lambda, arm64 (template.yaml's Architectures).
	lambdaGBSecond = 0.0000133334
	lambdaRequest  = 0.20 / 1e6
	// DynamoDB, on-demand, standard table class.
	readUnitPrice     = 0.125 / 1e6
	writeUnitPrice    = 0.625 / 1e6
	dynamoStorageGB   = 0.25 // a GB-month
	pointInTimeGB     = 0.20 // a GB-month of continuous backup
	streamReadsPrice  = 0    // a stream read by Lambda is free
	s3PutPrice        = 0.005 / 1000
	s3ListPrice       = 0.005 / 1000
	s3GetPrice        = 0.0004 / 1000 // GET and HEAD
	s3StorageGB       = 0.023         // S3 Standard, a GB-month
	eventBridgeEvent  = 1.00 / 1e6    // a custom event put on a bus (64 KB chunks)
	schedulerInvoke   = 1.00 / 1e6    // an EventBridge Scheduler invocation
	apiGatewayRequest = 3.50 / 1e6    // REST API, first 333 million a month
	stepTransition    = 0.025 / 1000  // Standard workflow state transition
	expressRequest    = 1.00 / 1e6    // Express workflow request
	expressGBSecond   = 0.00001667    // Express workflow duration, at 64 MB
	expressMemoryGB   = 64.0 / 1024
	minutesPerMonth   = 730 * 60 // AWS's month: 730 hours
	secondsPerMonth   = minutesPerMonth * 60
	hoursPerMonth     = 730
	gigabyte          = 1 << 30
)

// lambdaVCPU is the memory size at which Lambda gives a function one full
// vCPU; below it, a function gets that share of one.
const lambdaVCPU = 1769

// duration estimates a function's duration at memory MB from what it took
// here: its CPU at Lambda's share of a vCPU, or its time here when that is
// longer (waiting on pages).
func duration(cpu, wall time.Duration, memory int) time.Duration {
	return max(wall, time.Duration(float64(cpu)/min(1, float64(memory)/lambdaVCPU)))
}

// lambdaCost is what n invocations of d each cost at memory MB.
func lambdaCost(n float64, d time.Duration, memory int) float64 {
	return n * (d.Seconds()*float64(memory)/1024*lambdaGBSecond + lambdaRequest)
}

// The deployment the monthly cost is of: scaleMachines machines, 1% of
// them changing a minute (the changes the reports carry), deployedFollowers
// clients following the change feed all month, one complete machine report
// a minute, and scaleLogs task logs, as many uploaded a month (the log
// buckets keep about a month).
const (
	deployedFollowers        = 30
	deployedChangesPerMinute = scaleMachines / 100
	deployedChangesPerSecond = deployedChangesPerMinute / 60.0
	deployedReportsPerMonth  = minutesPerMonth
	deployedUploadsPerMonth  = scaleLogs
)

// The bench's model of a backend call that is not DynamoDB's (whose
// latencies are the report model's: itemReadLatency, itemWriteLatency):
// what the log figures add to every call (s3Delay).
const callLatency = s3Delay

// costInputs is what the sections measured that the monthly cost is
// computed from, each nil or empty while its section has not run.
type costInputs struct {
	follower  []followed        // change feed: a follower at two rates of change
	publisher *publishedBatch   // change feed: PublisherFunction over a batch
	report    *reportCost       // machine reports: one complete report at scaleMachines
	jobs      map[string]jobRun // round trips: ExpiryFunction's runs, by job
	indexer   *indexedLog       // log index: one log's event, and what a log stores
	reconcile *reconciledLogs   // log reconcile: a run over logs that drifted 1%
}

// reportCost is one complete report of scaleMachines machines, 1% changed,
// extrapolated from the sizes measured on the DynamoDB model.
type reportCost struct {
	invocations, seconds, states, readUnits, writeUnits, objectBytes float64
	from                                                             string // the sizes measured
}

// jobRun is one scheduled run of ExpiryFunction with nothing to do: its
// calls and how many of them follow one another.
type jobRun struct {
	calls map[string]int
	waves int
}

// indexedLog is IndexerFunction's work for one uploaded log, and the
// bytes the index holds for it.
type indexedLog struct {
	calls       map[string]float64 // a log
	storedBytes float64            // a log's items in the table, as DynamoDB bills them
}

// reconciledLogs is a reconciliation of logs logs, 1% of them drifted.
type reconciledLogs struct {
	logs    float64
	calls   map[string]float64 // the run's, by operation
	batches float64
	states  float64 // entered by the execution and its batches
}

// publishedBatch is PublisherFunction's handler over a batch of records
// of the feed.
type publishedBatch struct {
	records, calls, entries int
	entryBytes              float64
	took                    time.Duration // the handler, EventBridge answering at once
}

// part is one line of the monthly cost.
type part struct {
	service, what, arithmetic string
	dollars                   float64
}

// monthlyCost is the last figure: the monthly AWS cost of the deployment
// above, from what the sections before it measured and from template.yaml
// (memory sizes, schedules, batching, retention, indexes), at the prices
// above. Parts whose section did not run are named, not guessed.
func monthlyCost(ctx context.Context, e *env) ([]row, error) {
	in := e.costs
	var missing []string
	for name, ok := range map[string]bool{
		"change feed": len(in.follower) >= 2 && in.publisher != nil, "machine reports": in.report != nil,
		"round trips": len(in.jobs) > 0, "log index": in.indexer != nil, "log reconcile": in.reconcile != nil,
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return []row{{figure: "monthly AWS cost", value: "not computed: it needs the sections " + strings.Join(missing, ", ")}}, nil
	}
	tpl := e.local.Template
	memory := func(function string) (int, error) {
		cfg, err := tpl.FunctionConfig(function)
		return cfg.MemorySize, err
	}
	var parts []part
	add := func(service, what, arithmetic string, dollars float64) {
		parts = append(parts, part{service, what, arithmetic, dollars})
	}
	gbs := func(n, secs float64, mb int) float64 { return n * secs * float64(mb) / 1024 }

	// Followers of the change feed: SlavesFunction holds one request of
	// each at all times; each reads the feed's heads and what changed.
	slavesMB, err := memory("SlavesFunction")
	if err != nil {
		return nil, err
	}
	at := func(value func(followed) float64) float64 {
		return max(0, followerLine(in.follower, value).at(deployedChangesPerSecond)) * deployedFollowers * secondsPerMonth
	}
	requests, busy := at(func(r followed) float64 { return r.requests }), at(func(r followed) float64 { return r.busy })
	heads, entries, queries := at(func(r followed) float64 { return r.heads }), at(func(r followed) float64 { return r.entries }), at(func(r followed) float64 { return r.queries })
	add("API Gateway", fmt.Sprintf("%d followers' feed requests", deployedFollowers), fmt.Sprintf("%s requests", millions(requests)), requests*apiGatewayRequest)
	add("Lambda", "SlavesFunction holding the followers' requests", fmt.Sprintf("%s invocations, %s GB-s at %d MB", millions(requests), millions(gbs(1, busy, slavesMB)), slavesMB),
		requests*lambdaRequest+gbs(1, busy, slavesMB)*lambdaGBSecond)
	// A head is one strongly consistent read unit (under 4 KB); a Query
	// reads at least one, and one more per 4 KB of entries of about 1 KB.
	followerUnits := heads + queries + entries/4
	add("DynamoDB", "the followers' reads of the feed", fmt.Sprintf("%s heads, %s Queries, %s entries: %s read units", millions(heads), millions(queries), millions(entries), millions(followerUnits)),
		followerUnits*readUnitPrice)

	// One complete report a minute: ReportStateMachine (Standard), its
	// InventoryFunction invocations, the fleet's scan and the changes.
	inventoryMB, err := memory("InventoryFunction")
	if err != nil {
		return nil, err
	}
	r := in.report
	n := float64(deployedReportsPerMonth)
	add("Step Functions", "ReportStateMachine, a report a minute", fmt.Sprintf("%s transitions (%.0f a report)", millions(n*r.states), r.states), n*r.states*stepTransition)
	add("Lambda", "InventoryFunction applying the reports", fmt.Sprintf("%s invocations of %.1f s in all a report (%s), %s GB-s at %d MB", millions(n*r.invocations), r.seconds, r.from, millions(gbs(n, r.seconds, inventoryMB)), inventoryMB),
		n*r.invocations*lambdaRequest+gbs(n, r.seconds, inventoryMB)*lambdaGBSecond)
	add("DynamoDB", "the reports' scans, reads and writes", fmt.Sprintf("%s read units, %s write units (%.0f and %.0f a report)", millions(n*r.readUnits), millions(n*r.writeUnits), r.readUnits, r.writeUnits),
		n*(r.readUnits*readUnitPrice+r.writeUnits*writeUnitPrice))
	expireDays, err := reportExpiry(tpl)
	if err != nil {
		return nil, err
	}
	held := float64(expireDays) * 24 * 60 // objects at once, one a minute
	reportGB := r.objectBytes * held / gigabyte
	add("S3", "report objects: the scheduler's PUT, the plan's GET, kept until the bucket's lifecycle expires them", fmt.Sprintf("%s PUTs, %s GETs, %.1f GB held (%d days of %.2f MB)", millions(n), millions(n), reportGB, expireDays, r.objectBytes/(1<<20)),
		n*(s3PutPrice+s3GetPrice)+reportGB*s3StorageGB)

	// Every change of the feed is published: PublisherFunction takes the
	// stream's batches (reading the stream is free), EventBridge bills each
	// entry (in 64 KB chunks).
	publisherMB, err := memory("PublisherFunction")
	if err != nil {
		return nil, err
	}
	window, err := eventSeconds(tpl, "PublisherFunction", "Changes", "MaximumBatchingWindowInSeconds")
	if err != nil {
		return nil, err
	}
	p := in.publisher
	changes := float64(deployedChangesPerMinute * minutesPerMonth)
	batches := changes / float64(p.records)
	batchSeconds := (p.took + time.Duration(p.calls)*callLatency).Seconds()
	chunks := math.Ceil(p.entryBytes / (64 << 10))
	add("EventBridge", "Slave Changed events, one a change", fmt.Sprintf("%s entries of %.0f bytes", millions(changes*chunks), p.entryBytes), changes*chunks*eventBridgeEvent)
	add("Lambda", fmt.Sprintf("PublisherFunction, a batch every %.0f s (the stream's batching window)", window),
		fmt.Sprintf("%s invocations of %s (%d PutEvents of %s each), %s GB-s at %d MB", millions(batches), ms(time.Duration(batchSeconds*float64(time.Second))), p.calls, callLatency, millions(gbs(batches, batchSeconds, publisherMB)), publisherMB),
		batches*lambdaRequest+gbs(batches, batchSeconds, publisherMB)*lambdaGBSecond)

	// ExpiryFunction's schedules, with nothing due.
	expiryMB, err := memory("ExpiryFunction")
	if err != nil {
		return nil, err
	}
	for _, job := range []struct{ event, job string }{{"Expiry", "expiry"}, {"Retention", "retention"}} {
		every, err := tpl.ScheduleRate("ExpiryFunction", job.event)
		if err != nil {
			return nil, err
		}
		runs := float64(hoursPerMonth) * float64(time.Hour) / float64(every)
		run := in.jobs[job.job]
		secs := (time.Duration(run.waves) * itemReadLatency).Seconds()
		calls := 0
		for _, c := range run.calls {
			calls += c
		}
		// A Query that finds nothing reads half a unit (eventually consistent).
		units := runs * float64(calls) / 2
		add("Lambda, Scheduler, DynamoDB", fmt.Sprintf("ExpiryFunction's %s run every %v, nothing to do", job.job, every),
			fmt.Sprintf("%s runs of %d %s (%d in sequence, %v each): %s read units", thousands(runs), calls, plural(int64(calls), "call"), run.waves, itemReadLatency, thousands(units)),
			runs*(schedulerInvoke+lambdaRequest)+gbs(runs, secs, expiryMB)*lambdaGBSecond+units*readUnitPrice)
	}

	// The task-log index: every upload's event through IndexerFunction.
	indexerMB, err := memory("IndexerFunction")
	if err != nil {
		return nil, err
	}
	ix := in.indexer
	_, indexes, _, err := tpl.TableShape("LogIndexTable")
	if err != nil {
		return nil, err
	}
	u := float64(deployedUploadsPerMonth)
	heads, puts := ix.calls["HeadObject"], ix.calls["PutItem"]
	// Each PutItem of an item under 1 KB is a write unit on the table and
	// one on each index that holds the item.
	units := u * puts * float64(1+len(indexes))
	eventSecs := callLatency.Seconds()*heads + itemWriteLatency.Seconds()
	add("Lambda", "IndexerFunction, one event an upload", fmt.Sprintf("%s invocations of a HEAD and a wave of %.1f PutItems (%v + %v), %s GB-s at %d MB", millions(u), puts, callLatency, itemWriteLatency, millions(gbs(u, eventSecs, indexerMB)), indexerMB),
		u*lambdaRequest+gbs(u, eventSecs, indexerMB)*lambdaGBSecond)
	add("S3", "the indexer's HEAD of each upload", fmt.Sprintf("%s HEADs", millions(u*heads)), u*heads*s3GetPrice)
	add("DynamoDB", "the index's writes", fmt.Sprintf("%s write units (%.1f PutItems a log, each on the table and %d indexes)", millions(units), puts, len(indexes)), units*writeUnitPrice)
	// Every index holds a copy of what it projects: at most the item.
	stored := scaleLogs * ix.storedBytes * float64(1+len(indexes)) / gigabyte
	add("DynamoDB", "the index's storage", fmt.Sprintf("%.1f GB (%s logs of %.0f bytes, in the table and at most as much in each of %d indexes)", stored, thousands(scaleLogs), ix.storedBytes, len(indexes)), stored*dynamoStorageGB)

	// The reconciliation, as often as its schedule says.
	every, err := tpl.ScheduleRate("ReconcileStateMachine", "Daily")
	if err != nil {
		return nil, err
	}
	runs := float64(hoursPerMonth) * float64(time.Hour) / float64(every)
	rc := in.reconcile
	scale := runs * scaleLogs / rc.logs
	perCall := map[string]float64{"ListObjectsV2": s3ListPrice, "HeadObject": s3GetPrice,
		// ByBucket's entries, about 300 bytes, read eventually consistent.
		"Query": 0.5 * readUnitPrice * (500 * 300 / 4096), "PutItem": float64(1+len(indexes)) * writeUnitPrice, "DeleteItem": float64(1+len(indexes)) * writeUnitPrice,
		"UpdateItem": writeUnitPrice, "GetItem": readUnitPrice}
	var calls []string
	reconcileDollars := 0.0
	for _, op := range slices.Sorted(maps.Keys(rc.calls)) {
		c := rc.calls[op] * scale
		calls = append(calls, fmt.Sprintf("%s %s", millions(c), op))
		reconcileDollars += c * perCall[op]
	}
	rcBatches := rc.batches * scale
	batchSecs := callLatency.Seconds() * 2 // a batch's list and Query, one after the other
	reconcileDollars += rcBatches*(lambdaRequest+expressRequest) + gbs(rcBatches, batchSecs, indexerMB)*lambdaGBSecond + rcBatches*batchSecs*expressMemoryGB*expressGBSecond + rc.states*scale*stepTransition
	add("S3, DynamoDB, Lambda, Step Functions", fmt.Sprintf("ReconcileStateMachine every %v over %s logs, 1%% drifted", every, thousands(scaleLogs)),
		fmt.Sprintf("%s runs: %s; %s batches (Express, %v each)", thousands(runs), strings.Join(calls, ", "), millions(rcBatches), time.Duration(batchSecs*float64(time.Second))), reconcileDollars)

	// What the fleet's tables hold.
	slaveBytes := float64(approxItemBytes(fleettable.Items(1, 0)[0]) + 100) // DynamoDB adds 100 bytes an item
	_, byState, _, err := tpl.TableShape("SlavesTable")
	if err != nil {
		return nil, err
	}
	fleetGB := scaleMachines * slaveBytes * float64(1+len(byState)) / gigabyte
	backup, err := pointInTime(tpl, "SlavesTable")
	if err != nil {
		return nil, err
	}
	feedGB := deployedChangesPerMinute * change.FeedRetention.Minutes() * p.entryBytes / gigabyte
	storage := fleetGB + feedGB
	add("DynamoDB", "storage: the fleet (with its indexes) and the feed's entries of the last day", fmt.Sprintf("%.2f GB + %.2f GB", fleetGB, feedGB), storage*dynamoStorageGB)
	if backup {
		add("DynamoDB", "point-in-time recovery of the fleet", fmt.Sprintf("%.2f GB", fleetGB), fleetGB*pointInTimeGB)
	}

	total := 0.0
	rows := []row{}
	for _, p := range parts {
		total += p.dollars
		rows = append(rows, row{figure: fmt.Sprintf("%s: %s", p.service, p.what), value: fmt.Sprintf("$%.2f (%s)", p.dollars, p.arithmetic)})
	}
	return append(rows, row{figure: fmt.Sprintf("monthly AWS cost: %s machines (1%% changing a minute, %d followers, a report a minute), %s logs (us-east-1, on-demand)",
		thousands(scaleMachines), deployedFollowers, thousands(scaleLogs)), value: fmt.Sprintf("$%.0f", total)}), nil
}

// millions formats a count: 43.8 M, or 7,300 below a million.
func millions(v float64) string {
	if v >= 1e6 {
		return fmt.Sprintf("%.1f M", v/1e6)
	}
	return thousands(v)
}

// eventSeconds is a function's event setting in seconds.
func eventSeconds(tpl *stack.Template, function, event, property string) (float64, error) {
	s, err := tpl.EventSetting(function, event, property)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(s, 64)
}

// reportExpiry is how many days ReportsBucket keeps a report object: its
// lifecycle rule for reports/.
func reportExpiry(tpl *stack.Template) (int, error) {
	rules, _ := tpl.Resources["ReportsBucket"].Properties["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if rule["Prefix"] == "reports/" {
			if days, ok := rule["ExpirationInDays"].(int); ok {
				return days, nil
			}
		}
	}
	return 0, fmt.Errorf("template.yaml: ReportsBucket has no lifecycle rule expiring reports/")
}

// pointInTime reports whether the template keeps continuous backups of
// table.
func pointInTime(tpl *stack.Template, table string) (bool, error) {
	spec, ok := tpl.Resources[table].Properties["PointInTimeRecoverySpecification"].(map[string]any)
	if !ok {
		return false, nil
	}
	on, ok := spec["PointInTimeRecoveryEnabled"].(bool)
	if !ok {
		return false, fmt.Errorf("template.yaml: %s: PointInTimeRecoveryEnabled is not a boolean", table)
	}
	return on, nil
}
