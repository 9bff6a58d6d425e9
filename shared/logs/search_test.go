package logs_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/payload"
)

// The paginated search: every object exactly once across pages, pages
// bounded by what Lambda can return, and the requests it refuses.

type page struct {
	ContinuationTokens map[string]json.RawMessage `json:"continuationTokens"`
	LastPage           bool                       `json:"lastPage"`
	Results            []logEntry                 `json:"results"`
}

// follow runs the search page by page, sending back the tokens, and returns
// every key returned and the pages.
func follow(t *testing.T, h http.Handler, body map[string]any) ([]string, []page) {
	t.Helper()
	var keys []string
	var pages []page
	for range 1000 {
		raw, _ := json.Marshal(body)
		p := decode[page](t, serve(t, h, "POST", "/api/logs/search", string(raw)))
		pages = append(pages, p)
		for _, e := range p.Results {
			keys = append(keys, e.Key)
		}
		if p.LastPage {
			return keys, pages
		}
		body["continuationTokens"] = p.ContinuationTokens
	}
	t.Fatal("search never reached its last page")
	return nil, nil
}

func TestSearchPagesReturnEveryObjectExactlyOnce(t *testing.T) {
	f := &fakeStore{}
	var want []string
	for i := range 6 {
		start := taskStart.Add(time.Duration(i) * -20 * 24 * time.Hour) // tasks started over 4 months
		id := fmt.Sprintf("web-api-d%d-%d-%d-node%d-rack1", i%2, start.UnixMilli(), i, i)
		want = append(want, uploaded(f, "logs-a", id, 25+i)...)
		want = append(want, uploaded(f, "logs-b", id, 10)...)
	}
	uploaded(f, "logs-a", "other-d1-1-0-h-r", 5)
	h := handler(t, f, settings("logs-a", "logs-b"))
	for _, per := range []int{1, 7, 10, 64, 1000} {
		t.Run(fmt.Sprintf("%d per page", per), func(t *testing.T) {
			// The window holds every log, those the fake clock's future holds too.
			start, end := taskStart.Add(-110*24*time.Hour).UnixMilli(), taskStart.Add(60*24*time.Hour).UnixMilli()
			keys, pages := follow(t, h, map[string]any{"requestsAndDeploys": map[string][]string{"web-api": {}}, "maxPerPage": per, "start": start, "end": end, "listOnly": true})
			for i, p := range pages {
				if len(p.Results) > per {
					t.Errorf("page %d: got %d results, want at most %d", i, len(p.Results), per)
				}
			}
			if len(keys) != len(want) {
				t.Errorf("got %d keys over %d pages, want %d", len(keys), len(pages), len(want))
			}
			seen := map[string]bool{}
			for _, k := range keys {
				if seen[k] {
					t.Errorf("got %s twice", k)
				}
				seen[k] = true
			}
			for _, k := range want {
				if !seen[k] {
					t.Errorf("never got %s", k)
				}
			}
		})
	}
}

func TestSearchByTasksAndDeploys(t *testing.T) {
	f := &fakeStore{}
	mine := uploaded(f, "logs", taskID, 3)
	theirs := uploaded(f, "logs", other, 2)
	h := handler(t, f, settings("logs"))
	keys, _ := follow(t, h, map[string]any{"taskIds": []string{taskID}, "requestsAndDeploys": map[string][]string{"web-api": {"d2"}}})
	if len(keys) != len(mine)+len(theirs) {
		t.Errorf("got %d keys, want %d", len(keys), len(mine)+len(theirs))
	}
	// The older field name wins when both are sent.
	keys, _ = follow(t, h, map[string]any{"taskIds": []string{taskID}, "fileNamePrefixWhitelist": []string{"web-api/"}, "fileNamePrefixAllowlist": []string{"nothing"}})
	if len(keys) != len(mine) {
		t.Errorf("allowlisted: got %d keys, want %d", len(keys), len(mine))
	}
}

func TestSearchRejectsBadRequests(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs"))
	tests := []struct{ name, body, message string }{
		{"no body", "", "Must specify at least one request or task to search"},
		{"nothing to search", `{"taskIds":[],"requestsAndDeploys":{}}`, "Must specify at least one request or task to search"},
		{"too large a page", `{"taskIds":["` + taskID + `"],"maxPerPage":1001}`, "maxPerPage must be between 1 and 1000, got 1001"},
		{"a bad task id", `{"taskIds":["nope"]}`, "nope is not a valid task id"},
		{"a request id escaping its prefix", `{"requestsAndDeploys":{"../x":[]}}`, "../x is not a valid request id"},
		{"a start of the wrong type", `{"taskIds":["` + taskID + `"],"start":"yesterday"}`, "request body field start must be a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := serve(t, h, "POST", "/api/logs/search", tt.body)
			if r.status != 400 || !strings.Contains(r.body, tt.message) {
				t.Errorf("got %d %s, want 400 with %q", r.status, r.body, tt.message)
			}
		})
	}
}

func TestSearchWithNoPrefixesIsTheLastPage(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs"))
	end := taskStart.Add(-time.Hour).UnixMilli() // before the task started: an empty window
	p := decode[page](t, serve(t, h, "POST", "/api/logs/search", fmt.Sprintf(`{"taskIds":[%q],"end":%d}`, taskID, end)))
	if !p.LastPage || len(p.Results) != 0 {
		t.Errorf("got %+v, want an empty last page", p)
	}
}

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
				if n := payload.BodySize(rec.Header(), rec.Body.Bytes()); n > payload.Budget {
					t.Fatalf("page %d takes %d bytes in Lambda's response, want at most %d", pages, n, payload.Budget)
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

func TestHostileSearchFieldsOfTheWrongTypeAre400NamingTheField(t *testing.T) {
	tests := []struct{ name, body, message string }{
		{"taskIds as a string", `{"taskIds":"` + taskID + `"}`, "request body field taskIds must be an array"},
		{"a task id as a number", `{"taskIds":[5]}`, "request body field taskIds must be a string"},
		{"requestsAndDeploys as a list", `{"requestsAndDeploys":["web-api"]}`, "request body field requestsAndDeploys must be an object"},
		{"a request's deploys as a string", `{"requestsAndDeploys":{"web-api":"d1"}}`, "request body field requestsAndDeploys must be an array"},
		{"maxPerPage as a string", `{"taskIds":["` + taskID + `"],"maxPerPage":"10"}`, "request body field maxPerPage must be a whole number"},
		{"start as a string", `{"taskIds":["` + taskID + `"],"start":"1"}`, "request body field start must be a whole number"},
		{"end as a fraction", `{"taskIds":["` + taskID + `"],"end":1.5}`, "request body field end must be a whole number"},
		{"listOnly as a string", `{"taskIds":["` + taskID + `"],"listOnly":"true"}`, "request body field listOnly must be a boolean"},
		{"excludeMetadata as 1", `{"taskIds":["` + taskID + `"],"excludeMetadata":1}`, "request body field excludeMetadata must be a boolean"},
		{"the allowlist as a string", `{"taskIds":["` + taskID + `"],"fileNamePrefixAllowlist":"web"}`, "request body field fileNamePrefixAllowlist must be an array"},
		{"continuationTokens as a list", `{"taskIds":["` + taskID + `"],"continuationTokens":[]}`, "request body field continuationTokens must be an object"},
		{"a token's lastPage as a string", `{"taskIds":["` + taskID + `"],"continuationTokens":{"k":{"lastPage":"yes"}}}`, "request body field continuationTokens.lastPage must be a boolean"},
		{"a token's value as a number", `{"taskIds":["` + taskID + `"],"continuationTokens":{"k":{"value":5}}}`, "request body field continuationTokens.value must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRecordingStore()
			serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", tt.body).wantError(t, 400, tt.message)
			f.untouched(t)
		})
	}
	t.Run("a GET lookup's user record of the wrong type", func(t *testing.T) {
		for _, route := range logRoutes[:3] {
			f := newRecordingStore()
			serve(t, handler(t, f, settings("logs")), route[0], route[1], `{"groups":"admins"}`).wantError(t, 400, "request body field groups must be an array")
			f.untouched(t)
		}
	})
}

func TestHostileContinuationTokensCannotWidenTheSearch(t *testing.T) {
	f := newRecordingStore()
	mine := uploaded(f.fakeStore, "logs", taskID, 3)
	uploaded(f.fakeStore, "secret-logs", taskID, 3)
	theirs := uploaded(f.fakeStore, "logs", other, 3)
	h := handler(t, f, settings("logs"))
	isMine := func(k string) bool { return slices.Contains(mine, k) }

	t.Run("tokens of sources the search does not cover are dropped unused", func(t *testing.T) {
		tokens := map[string]any{
			"default-secret-logs-web-api/": map[string]any{"lastPage": false},
			"default-logs-":                map[string]any{"lastPage": false},
			"default-logs-web-api/":        map[string]any{"value": "", "lastPage": false},
			"default-logs-../":             map[string]any{"lastPage": false},
			"default-logs-" + theirs[0]:    map[string]any{"lastPage": false},
		}
		keys, pages := follow(t, h, map[string]any{"taskIds": []string{taskID}, "listOnly": true, "continuationTokens": tokens})
		if !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(mine))) {
			t.Errorf("got %q, want the task's own keys %q", keys, mine)
		}
		for _, p := range pages {
			for k := range p.ContinuationTokens {
				if _, forged := tokens[k]; forged {
					t.Errorf("got forged token %q back", k)
				}
			}
		}
		for _, l := range f.listed {
			if !strings.HasPrefix(l, "logs/web-api/") || !strings.Contains(l, taskID) {
				t.Errorf("listed %s, want only the task's prefixes in the configured bucket", l)
			}
		}
	})
	t.Run("a forged value resumes inside its own prefix only", func(t *testing.T) {
		first := decode[page](t, serve(t, h, "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"],"maxPerPage":1,"listOnly":true}`))
		if len(first.ContinuationTokens) == 0 {
			t.Fatal("got no tokens")
		}
		for _, value := range []string{"", "a", "web-api/", "zzzz", theirs[0], "../../" + theirs[1], strings.Repeat("~", 1024)} {
			tokens := map[string]any{}
			for k := range first.ContinuationTokens {
				tokens[k] = map[string]any{"value": value, "lastPage": false}
			}
			body, _ := json.Marshal(map[string]any{"taskIds": []string{taskID}, "maxPerPage": 1000, "listOnly": true, "continuationTokens": tokens})
			p := decode[page](t, serve(t, h, "POST", "/api/logs/search", string(body)))
			for _, e := range p.Results {
				if !isMine(e.Key) {
					t.Errorf("value %.40q: got %s, want only the task's keys", value, e.Key)
				}
			}
		}
	})
	t.Run("a token value longer than any S3 key is 400", func(t *testing.T) {
		f := newRecordingStore()
		body := map[string]any{"taskIds": []string{taskID}, "continuationTokens": map[string]any{"k": map[string]any{"value": strings.Repeat("a", 1025)}}}
		raw, _ := json.Marshal(body)
		serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", string(raw)).wantError(t, 400, "continuation token k is not one this service gave")
		f.untouched(t)
	})
}
