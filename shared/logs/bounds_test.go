package logs_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/payload"
	"github.com/fleetops/fleet/shared/web"
)

// longLogs uploads n logs of task to bucket whose keys are about 1,000
// bytes, mostly '<', which JSON writes as 6 bytes and Lambda carries as 7:
// keys near the longest S3 allows, and the costliest to answer.
func longLogs(f *fakeStore, bucket, task string, n int) []string {
	format, _ := logkey.ParseFormat(logkey.DefaultFormat)
	t, _ := logkey.ParseTaskID(task)
	var keys []string
	for i := range n {
		at := time.UnixMilli(t.StartedAt).Add(time.Duration(i) * time.Second)
		key := format.Key(logkey.File{Task: t, Filename: strings.Repeat("<", 900) + bucket + ".log", Index: i, Modified: at})
		f.add(bucket, key, at)
		keys = append(keys, key)
	}
	return keys
}

func TestSearchPagesStopWhereTheirAnswerWouldOutgrowLambdasResponse(t *testing.T) {
	f := &fakeStore{}
	want := append(longLogs(f, "logs-a", taskID, 700), longLogs(f, "logs-b", taskID, 500)...)
	want = append(want, uploaded(f, "logs-a", taskID, 3)...)
	want = append(want, uploaded(f, "logs-b", taskID, 3)...)
	others := longLogs(f, "logs-a", other, 300)
	h := handler(t, f, settings("logs-a", "logs-b"))
	// A request search lists the other task's logs too; this allowlist
	// drops them.
	allowed := want[0][:strings.Index(want[0], taskID)] + "web-api-d1-"
	if strings.HasPrefix(others[0], allowed) {
		t.Fatalf("allowlist %s keeps %s", allowed, others[0])
	}

	for _, tt := range []struct {
		name   string
		body   map[string]any
		wanted func(string) bool
	}{
		{"with links", map[string]any{"taskIds": []string{taskID}, "maxPerPage": 1000}, func(string) bool { return true }},
		{"metadata only, with an allowlist that drops most long keys", map[string]any{"requestsAndDeploys": map[string][]string{"web-api": {}}, "maxPerPage": 1000, "listOnly": true,
			"fileNamePrefixAllowlist": []string{allowed}},
			func(k string) bool { return strings.HasPrefix(k, allowed) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var keys []string
			pages := 0
			body := tt.body
			for ; pages < 100; pages++ {
				raw, _ := json.Marshal(body)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/logs/search", strings.NewReader(string(raw))))
				if n := payload.BodySize(rec.Header(), rec.Body.Bytes()); n > web.Budget {
					t.Fatalf("page %d takes %d bytes in Lambda's response, want at most %d", pages, n, web.Budget)
				}
				p := decode[page](t, result{rec.Code, rec.Body.String(), rec.Header()})
				for _, e := range p.Results {
					keys = append(keys, e.Key)
				}
				if p.LastPage {
					break
				}
				body["continuationTokens"] = p.ContinuationTokens
			}
			var expected []string
			for _, k := range want {
				if tt.wanted(k) {
					expected = append(expected, k)
				}
			}
			if pages == 0 {
				t.Errorf("got all %d logs on one page, want the answer cut", len(keys))
			}
			seen := map[string]int{}
			for _, k := range keys {
				seen[k]++
			}
			for _, k := range expected {
				if seen[k] != 1 {
					t.Errorf("got %.60s… %d times, want once", k, seen[k])
				}
			}
			if len(keys) != len(expected) {
				t.Errorf("got %d keys over %d pages, want %d", len(keys), pages+1, len(expected))
			}
		})
	}
}

func TestSearchWhoseTokensAloneWouldNotFitIsRefused(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs-a", "logs-b"))
	// Request ids of 500 '<', over 56 years of monthly prefixes: 1,350
	// token keys of about 7 KB each as Lambda carries them.
	long := strings.Repeat("<", 500)
	body := fmt.Sprintf(`{"requestsAndDeploys":{%q:[]},"start":1}`, long)
	r := serve(t, h, "POST", "/api/logs/search", body)
	if r.status != 400 || !strings.Contains(r.body, "too many prefixes, or too long ones") {
		t.Errorf("got %d %.200s, want a 400 saying the tokens would not fit", r.status, r.body)
	}
}
