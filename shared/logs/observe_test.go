package logs_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"
)

// countingStore counts each list and HEAD in the request's counter, as the
// SDK middleware counts each S3 attempt; presigning makes no call.
type countingStore struct{ *fakeStore }

func (c countingStore) All(ctx context.Context, bucket, prefix string) ([]logkey.Object, error) {
	callcount.From(ctx).Add(false)
	return c.fakeStore.All(ctx, bucket, prefix)
}

func (c countingStore) Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error) {
	callcount.From(ctx).Add(false)
	return c.fakeStore.Page(ctx, bucket, prefix, after, limit)
}

func (c countingStore) Times(ctx context.Context, bucket, key string) (*int64, *int64, error) {
	callcount.From(ctx).Add(false)
	return c.fakeStore.Times(ctx, bucket, key)
}

func parseLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestLookupsAreLoggedAndCountedByScope(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		scope                    string
		status, logs             int
		line                     map[string]any // on the request's log line
	}{
		{name: "a task lookup", method: "GET", path: "/api/logs/task/" + taskID, scope: "task", status: 200, logs: 3,
			line: map[string]any{"task_id": taskID, "logs": 3.0, "user": "u1"}},
		{name: "a request lookup", method: "GET", path: "/api/logs/request/web-api?excludeMetadata=true", scope: "request", status: 200, logs: 6,
			line: map[string]any{"log_request_id": "web-api", "logs": 6.0}},
		{name: "a deploy lookup", method: "GET", path: "/api/logs/request/web-api/deploy/d2", scope: "deploy", status: 200, logs: 3,
			line: map[string]any{"log_request_id": "web-api", "deploy_id": "d2", "logs": 3.0}},
		{name: "a search", method: "POST", path: "/api/logs/search", body: `{"taskIds":["` + other + `"],"maxPerPage":2}`, scope: "search", status: 200, logs: 2,
			line: map[string]any{"logs": 2.0}},
		{name: "a refused lookup still counts, with no logs and no call", method: "GET", path: "/api/logs/task/not-a-task", scope: "task", status: 400,
			line: map[string]any{"task_id": "not-a-task", "logs": 0.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeStore{}
			uploaded(f, "logs", taskID, 3)
			uploaded(f, "logs", other, 3)
			var logLines, emf bytes.Buffer
			m, _ := metrics.New(&emf, "Fleet", "fleet-LogsFunction-1")
			h := logs.New(countingStore{f}, settings("logs"))
			logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
			srv := web.Wrap(h, web.Options{Logger: slog.New(slog.NewJSONHandler(&logLines, nil)), Metrics: m})

			body := tt.body
			if tt.scope == "task" && tt.status == 200 {
				body = `{"id":"u1","name":"User One"}` // AUTH_MODE none: the body names the user
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(body)))
			if rec.Code != tt.status {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body.String(), tt.status)
			}

			var lookups []map[string]any
			for _, d := range parseLines(t, &emf) {
				if _, ok := d[metrics.LogLookups]; ok {
					lookups = append(lookups, d)
				}
			}
			if len(lookups) != 1 {
				t.Fatalf("got %d lookup documents, want 1: %s", len(lookups), emf.String())
			}
			d := lookups[0]
			calls := float64(f.lists.Load() + f.heads.Load())
			want := map[string]any{"Scope": tt.scope, metrics.LogLookups: 1.0, metrics.LogObjects: float64(tt.logs), metrics.S3Calls: calls}
			for k, v := range want {
				if d[k] != v {
					t.Errorf("got %s = %v, want %v", k, d[k], v)
				}
			}
			dims := d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"]
			if b, _ := json.Marshal(dims); string(b) != `[["Function","Scope"]]` {
				t.Errorf("got Dimensions %s, want [[\"Function\",\"Scope\"]]", b)
			}

			var line map[string]any
			for _, l := range parseLines(t, &logLines) {
				if l["msg"] == "request" {
					line = l
				}
			}
			for k, v := range tt.line {
				if line[k] != v {
					t.Errorf("got line %s = %v, want %v", k, line[k], v)
				}
			}
			if line["backend_calls"] != calls {
				t.Errorf("got backend_calls %v, want %v", line["backend_calls"], calls)
			}
			if strings.Contains(logLines.String(), "https://") || strings.Contains(emf.String(), "https://") {
				t.Errorf("got a presigned URL in the log: %s", logLines.String())
			}
		})
	}
}
