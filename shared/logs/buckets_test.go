package logs_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"
)

// missingStore is fakeStore where the buckets named missing do not exist,
// as the S3 adapter reports it.
type missingStore struct {
	*fakeStore
	missing []string
}

func (m missingStore) All(ctx context.Context, bucket, prefix string) ([]logkey.Object, error) {
	if slices.Contains(m.missing, bucket) {
		return nil, fault.NotFound("S3 bucket %s does not exist", bucket)
	}
	return m.fakeStore.All(ctx, bucket, prefix)
}

func (m missingStore) Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error) {
	if slices.Contains(m.missing, bucket) {
		return nil, false, fault.NotFound("S3 bucket %s does not exist", bucket)
	}
	return m.fakeStore.Page(ctx, bucket, prefix, after, limit)
}

func TestAMissingBucketIsTheOperatorsFault(t *testing.T) {
	f := &fakeStore{}
	want := uploaded(f, "logs", taskID, 3)
	lookups := []struct{ name, method, path, body string }{
		{"a task lookup", "GET", "/api/logs/task/" + taskID + "?list=true", ""},
		{"a request lookup", "GET", "/api/logs/request/web-api?list=true&excludeMetadata=true", ""},
		{"a search", "POST", "/api/logs/search", `{"taskIds":["` + taskID + `"],"maxPerPage":100,"listOnly":true}`},
	}
	for _, tt := range []struct {
		name     string
		buckets  []string
		status   int
		errorLog string // the message of the one error line
	}{
		{"one missing bucket among others: the others answer, the missing ones are logged and counted", []string{"gone-a", "logs", "gone-b"}, 200,
			"log buckets of LOG_BUCKETS do not exist; answered with what the others hold"},
		{"every bucket missing: a 500", []string{"gone-a", "gone-b"}, 500, "request failed"},
	} {
		for _, l := range lookups {
			t.Run(tt.name+": "+l.name, func(t *testing.T) {
				var logLines, emf bytes.Buffer
				m, _ := metrics.New(&emf, "Fleet", "fleet-LogsFunction-1")
				h := logs.New(missingStore{f, []string{"gone-a", "gone-b"}}, settings(tt.buckets...))
				logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
				srv := web.Wrap(h, web.Options{Logger: slog.New(slog.NewJSONHandler(&logLines, nil)), Metrics: m})
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest(l.method, l.path, strings.NewReader(l.body)))
				if rec.Code != tt.status {
					t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.status)
				}
				if tt.status == 200 {
					got := rec.Body.String()
					for _, key := range want {
						if !strings.Contains(got, key) {
							t.Errorf("got %s, want every log of the bucket that exists (%s)", got, key)
						}
					}
				} else if strings.Contains(rec.Body.String(), "gone-") {
					t.Errorf("got %s, want no bucket named to the caller", rec.Body)
				}

				var errorLines []map[string]any
				for _, line := range parseLines(t, &logLines) {
					if line["level"] == "ERROR" {
						errorLines = append(errorLines, line)
					}
				}
				if len(errorLines) != 1 || errorLines[0]["msg"] != tt.errorLog || errorLines[0]["request_id"] == "" {
					t.Fatalf("got error lines %v, want one %q with the request id", errorLines, tt.errorLog)
				}
				if line := logLines.String(); !strings.Contains(line, "gone-a") || !strings.Contains(line, "gone-b") {
					t.Errorf("got log %s, want both missing buckets named", line)
				}

				var counted []float64
				for _, d := range parseLines(t, &emf) {
					if v, ok := d[metrics.MissingLogBuckets].(float64); ok {
						counted = append(counted, v)
						if d["Function"] != "fleet-LogsFunction-1" || len(d) != 3 { // Function, the metric, _aws
							t.Errorf("got document %v, want MissingLogBuckets filed under Function alone, as the alarm reads it", d)
						}
					}
				}
				if !slices.Equal(counted, []float64{2}) {
					t.Errorf("got MissingLogBuckets %v, want one document counting 2", counted)
				}
			})
		}
	}
}

func TestEveryBucketThereCountsNoMissingBucket(t *testing.T) {
	f := &fakeStore{}
	uploaded(f, "logs", taskID, 3)
	var logLines, emf bytes.Buffer
	m, _ := metrics.New(&emf, "Fleet", "fleet-LogsFunction-1")
	h := logs.New(missingStore{f, []string{"gone"}}, settings("logs", "empty"))
	logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
	srv := web.Wrap(h, web.Options{Logger: slog.New(slog.NewJSONHandler(&logLines, nil)), Metrics: m})
	srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/logs/task/"+taskID, nil))
	if strings.Contains(emf.String(), metrics.MissingLogBuckets) || strings.Contains(logLines.String(), `"level":"ERROR"`) {
		t.Errorf("got %s %s, want no missing bucket counted or logged", emf.String(), logLines.String())
	}
}
