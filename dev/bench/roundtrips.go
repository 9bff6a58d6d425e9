package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/expiryapp"
	"github.com/fleetops/fleet/app/inventoryapp"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// roundTrips counts the backend calls (every HTTP attempt) one request of
// each route makes, with the functions built by their composition roots
// from the template's environment over counted SDK clients: DynamoDB on
// moto for the slave routes, the report that seeds them and the expiry
// trigger, S3 on MinIO for the log routes.
func roundTrips(ctx context.Context, e *env) ([]row, error) {
	rows, err := slaveRoundTrips(ctx, e)
	if err != nil {
		return nil, err
	}
	logRows, err := logRoundTrips(ctx, e)
	if err != nil {
		return nil, err
	}
	return append(rows, logRows...), nil
}

// callCheck is a target on the calls of one request.
type callCheck struct {
	target string
	ok     func(map[string]int) bool
}

// exactly is the target of a request that makes n calls of op and nothing
// else.
func exactly(n int, op string) *callCheck {
	return &callCheck{
		target: fmt.Sprintf("%d %s", n, op),
		ok:     func(got map[string]int) bool { return len(got) == 1 && got[op] == n },
	}
}

// listWithCursor is the target of a list by state: one Query of the index,
// and the change feed's cursor of what it answered (docs/decisions.md "A
// change feed positioned in the change's own transaction"): the heads read
// before and after, a Query of each shard's recent entries, and of the
// entries committed during the list.
var listWithCursor = &callCheck{
	target: "1 Query + 2 BatchGetItem, ≤ 32 Query",
	ok: func(got map[string]int) bool {
		return got["BatchGetItem"] == 2 && got["Query"] >= 1 && got["Query"] <= 1+2*16 && len(got) == 2
	},
}

// oneWrite is the target of a state change (issue text): one
// TransactWriteItems, plus at most one read.
var oneWrite = &callCheck{
	target: "1 TransactWriteItems + ≤ 1 read",
	ok: func(got map[string]int) bool {
		reads := got["GetItem"] + got["TransactGetItems"] + got["Query"] + got["Scan"] + got["BatchGetItem"]
		return got["TransactWriteItems"] == 1 && reads <= 1 && total(got) == 1+reads
	},
}

// slaveFunctions is SlavesFunction's routes and InventoryFunction's
// handler as their composition roots build them, over one DynamoDB client
// whose calls are counted.
type slaveFunctions struct {
	calls  *calls
	db     *dynamodb.Client
	routes http.Handler
	report inventoryapp.Handler
}

func newSlaveFunctions(ctx context.Context, e *env) (slaveFunctions, error) {
	// make run's attempts: on the emulator, a state query walks every
	// slave the sections before wrote (25,000 after the fleet's), which on
	// a loaded machine takes longer than the deployed second.
	cfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, stack.DynamoDBAttemptTimeout)
	if err != nil {
		return slaveFunctions{}, err
	}
	f := slaveFunctions{calls: newCalls()}
	f.calls.count(&cfg)
	f.db = dynamodb.NewFromConfig(cfg)
	if f.routes, err = slaveRoutes(ctx, e, f.db); err != nil {
		return f, err
	}
	inventoryEnv, err := functionEnv(e, "InventoryFunction", nil)
	if err != nil {
		return f, err
	}
	f.report, err = inventoryapp.New(ctx, inventoryEnv, inventoryapp.Options{Log: e.quiet, DynamoDB: f.db, S3: e.local.S3})
	return f, err
}

// slaveRoundTrips seeds four slaves with a machine report and counts the
// DynamoDB calls of each slave route and of one expiry-trigger run.
func slaveRoundTrips(ctx context.Context, e *env) ([]row, error) {
	f, err := newSlaveFunctions(ctx, e)
	if err != nil {
		return nil, err
	}
	c, db, h, report := f.calls, f.db, f.routes, f.report
	expiryEnv, err := functionEnv(e, "ExpiryFunction", nil)
	if err != nil {
		return nil, err
	}
	expire, err := expiryapp.New(ctx, expiryEnv, expiryapp.Options{Log: e.quiet, DynamoDB: db})
	if err != nil {
		return nil, err
	}

	run := time.Now().UnixMilli()
	id := func(n int) string { return fmt.Sprintf("bench-rt-%d-S%d", run, n) }
	var machines []string
	for n := 1; n <= 4; n++ {
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"s%d.example.com","rackId":"us-east-1a","attributes":{},"resources":{"cpus":8},"runningTasks":0}`, id(n), n))
	}
	detail := `{"complete":false,"machines":[` + strings.Join(machines, ",") + `]}`
	if _, err := report(ctx, json.RawMessage(detail)); err != nil {
		return nil, fmt.Errorf("report the slaves: %w", err)
	}
	// The later sections share the tables: leave no slave behind, least of
	// all one holding a place under the decommission limit.
	defer func() {
		for n := 1; n <= 4; n++ {
			serve(context.WithoutCancel(ctx), h, "DELETE", "/api/slaves/slave/"+id(n), "")
		}
	}()

	const expiring = `{"message":"bench","durationMillis":3600000,"revertToState":"ACTIVE"}`
	steps := []struct {
		figure, method, path, body string
		check                      *callCheck
	}{
		{"GET /api/slaves (List: 8 parallel Scan segments, 1 call per 1 MB page each)", "GET", "/api/slaves", "", nil},
		{"GET /api/slaves/slave/{id}/details", "GET", "/api/slaves/slave/" + id(1) + "/details", "", exactly(1, "GetItem")},
		{"GET /api/slaves/slave/{id} (history)", "GET", "/api/slaves/slave/" + id(1), "", exactly(1, "Query")},
		{"POST /api/slaves/slave/{id}/freeze", "POST", "/api/slaves/slave/" + id(1) + "/freeze", "", oneWrite},
		{"GET /api/slaves?state=FROZEN (ByState index, 1 page here; the feed's cursor: its heads before and after, a Query per shard that moved in 10 s)", "GET", "/api/slaves?state=FROZEN", "", listWithCursor},
		{"POST /api/slaves/slave/{id}/freeze with durationMillis (expiring)", "POST", "/api/slaves/slave/" + id(2) + "/freeze", expiring, oneWrite},
		{"GET /api/slaves/expiring (Scan, then consistent BatchGetItem of the slaves)", "GET", "/api/slaves/expiring", "", nil},
		{"DELETE /api/slaves/slave/{id}/expiring", "DELETE", "/api/slaves/slave/" + id(2) + "/expiring", "", nil},
		{"POST /api/slaves/slave/{id}/decommission", "POST", "/api/slaves/slave/" + id(3) + "/decommission", "", oneWrite},
		{"POST /api/slaves/slave/{id}/activate", "POST", "/api/slaves/slave/" + id(3) + "/activate", "", oneWrite},
		{"DELETE /api/slaves/slave/{id} (3 history entries)", "DELETE", "/api/slaves/slave/" + id(3), "", nil},
	}
	var rows []row
	for _, s := range steps {
		c.take()
		c.scanned.Store(0)
		status, body := serve(ctx, h, s.method, s.path, s.body)
		if status != http.StatusOK {
			return nil, fmt.Errorf("%s %s: got %d %s, want 200", s.method, s.path, status, body)
		}
		got, text := c.take()
		if n := c.scanned.Load(); n > 0 {
			text += fmt.Sprintf(" (%d %s read)", n, plural(n, "item"))
		}
		r := row{figure: s.figure, value: text}
		if s.check != nil {
			r.target, r.met = s.check.target, verdict(s.check.ok(got))
		}
		rows = append(rows, r)
	}

	// One expiry-trigger run over one due record: a change of 1 ms, due
	// as soon as it is made.
	if status, body := serve(ctx, h, "POST", "/api/slaves/slave/"+id(4)+"/freeze", `{"durationMillis":1,"revertToState":"ACTIVE"}`); status != http.StatusOK {
		return nil, fmt.Errorf("freeze %s for 1 ms: got %d %s, want 200", id(4), status, body)
	}
	time.Sleep(10 * time.Millisecond)
	c.take()
	res, err := expire(ctx, json.RawMessage(`{"job":"expiry"}`))
	if err != nil {
		return nil, fmt.Errorf("expiry run: %w", err)
	}
	_, text := c.take()
	rows = append(rows, row{
		figure: fmt.Sprintf("expiry trigger run, %d due %s, %d applied (1 Query per ByDue shard, then per record 1 read + 1 write)", res.Due, plural(int64(res.Due), "record"), res.Applied),
		value:  text,
	})
	// Each scheduled job once more with nothing to do, as most of its runs
	// are: the monthly cost's. The shards' Queries go at once: one wave.
	for _, job := range []string{"expiry", "retention"} {
		if _, err := expire(ctx, json.RawMessage(fmt.Sprintf(`{"job":%q}`, job))); err != nil {
			return nil, fmt.Errorf("%s run: %w", job, err)
		}
		got, text := c.take()
		e.costs.jobs[job] = jobRun{calls: got, waves: 1}
		rows = append(rows, row{figure: fmt.Sprintf("%s run with nothing to do", job), value: text})
	}
	return rows, nil
}

// logRoundTrips counts the S3 calls of the log routes over one task whose
// 12 logs are spread over 3 months.
func logRoundTrips(ctx context.Context, e *env) ([]row, error) {
	const bucket = "bench-roundtrip-logs"
	now := time.Now().UTC()
	const months, files = 3, 12
	format, task, err := putTaskLogs(ctx, e, bucket, fmt.Sprintf("bench-rt-%d", now.UnixMilli()), months, files, now)
	if err != nil {
		return nil, err
	}

	cfg, err := sdkconfig.Load(ctx, sdkconfig.S3, sdkconfig.S3AttemptTimeout)
	if err != nil {
		return nil, err
	}
	c := newCalls()
	c.count(&cfg)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	// The listing's calls: the log index section measures the index.
	h, err := logRoutes(ctx, e, client, nil, map[string]string{"LOG_BUCKETS": bucket, "LOG_INDEX": "false"})
	if err != nil {
		return nil, err
	}
	// LOG_LOOKBACK as deployed: the request lookup covers the months the
	// last 30 days touch, not the task's whole window.
	logsEnv, err := functionEnv(e, "LogsFunction", nil)
	if err != nil {
		return nil, err
	}
	settings, err := config.LoadLogs(logsEnv)
	if err != nil {
		return nil, err
	}
	lookback := settings.Lookback

	requestPrefixes, err := format.Prefixes(logkey.RequestScope(task.RequestID), logkey.LookbackWindow(nil, nil, lookback, now.UnixMilli()), logkey.MaxPrefixes)
	if err != nil {
		return nil, err
	}
	search := fmt.Sprintf(`{"taskIds":[%q],"maxPerPage":5}`, task.ID)
	steps := []struct {
		method, path, body string
		figure             func(found int) string
	}{
		{"GET", "/api/logs/task/" + task.ID, "", func(found int) string {
			return fmt.Sprintf("GET /api/logs/task/{id}: 1 list per monthly prefix (%d) + 1 HEAD per log (%d)", months, found)
		}},
		{"GET", "/api/logs/task/" + task.ID + "?excludeMetadata=true", "", func(int) string {
			return fmt.Sprintf("GET /api/logs/task/{id}?excludeMetadata=true: 1 list per prefix (%d), no HEAD", months)
		}},
		{"GET", "/api/logs/request/" + task.RequestID, "", func(found int) string {
			return fmt.Sprintf("GET /api/logs/request/{id}: 1 list per prefix of the %d-day lookback (%d) + 1 HEAD per log (%d)", lookback/(24*time.Hour), len(requestPrefixes), found)
		}},
		{"POST", "/api/logs/search", search, func(found int) string {
			return fmt.Sprintf("POST /api/logs/search, one page of 5: 1 list per prefix (%d) + 1 HEAD per result (%d)", months, found)
		}},
	}
	var rows []row
	for _, s := range steps {
		c.take()
		status, body := serve(ctx, h, s.method, s.path, s.body)
		if status != http.StatusOK {
			return nil, fmt.Errorf("%s %s: got %d %s, want 200", s.method, s.path, status, body)
		}
		_, text := c.take()
		found, err := countLogs(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.method, s.path, err)
		}
		rows = append(rows, row{figure: s.figure(found), value: text})
	}
	return rows, nil
}

// serve sends one request through h, in process, and returns its answer.
func serve(ctx context.Context, h http.Handler, method, path, body string) (int, string) {
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	raw, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(raw)
}

// countLogs counts the logs of a lookup's answer (a JSON array) or of a
// search page (an object with results).
func countLogs(body string) (int, error) {
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(body), &list); err == nil {
		return len(list), nil
	}
	var page struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		return 0, fmt.Errorf("answer is neither a list of logs nor a search page: %.200s", body)
	}
	return len(page.Results), nil
}

// plural returns word, with an s unless n is 1.
func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
