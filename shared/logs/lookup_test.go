package logs_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/web"
)

// The GET lookups (task, request, deploy): what they find, and the input
// they refuse, as a JSON error that made no S3 call (recordingStore).

func TestTaskLookupReturnsTheTasksLogsNewestFirstWithLinks(t *testing.T) {
	f := &fakeStore{}
	want := append(uploaded(f, "logs-a", taskID, 3), uploaded(f, "logs-b", taskID, 2)...)
	uploaded(f, "logs-a", other, 3)
	uploaded(f, "not-configured", taskID, 3)
	r := serve(t, handler(t, f, settings("logs-a", "logs-b")), "GET", "/api/logs/task/"+taskID, "")
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", cc)
	}
	got := decode[[]logEntry](t, r)
	var keys []string
	for i, e := range got {
		keys = append(keys, e.Key)
		if i > 0 && e.LastModified > got[i-1].LastModified {
			t.Errorf("got %s after an older entry, want newest first", e.Key)
		}
		if e.GetURL == "" || e.DownloadURL == "" || e.StartTime == nil {
			t.Errorf("got %+v, want URLs and start time", e)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(want))) {
		t.Errorf("got keys %v, want %v", keys, want)
	}
}

func TestLookupFlagsLeaveOutMetadataAndLinks(t *testing.T) {
	f := &fakeStore{}
	uploaded(f, "logs", taskID, 2)
	h := handler(t, f, settings("logs"))
	got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/task/"+taskID+"?excludeMetadata=true&list=TRUE", ""))
	if len(got) != 2 || f.heads.Load() != 0 {
		t.Fatalf("got %d entries and %d HEADs, want 2 and none", len(got), f.heads.Load())
	}
	for _, e := range got {
		if e.GetURL != "" || e.DownloadURL != "" || e.StartTime != nil {
			t.Errorf("got %+v, want key, time and size only", e)
		}
	}
	got = decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/task/"+taskID+"?list=yes", ""))
	if got[0].GetURL == "" {
		t.Errorf("list=yes: got no URL, want URLs (only true means true)")
	}
}

func TestRequestAndDeployLookups(t *testing.T) {
	f := &fakeStore{}
	mine := uploaded(f, "logs", taskID, 3)
	theirs := uploaded(f, "logs", other, 2)
	h := handler(t, f, settings("logs"))
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web-api", "")); len(got) != len(mine)+len(theirs) {
		t.Errorf("request lookup: got %d entries, want %d", len(got), len(mine)+len(theirs))
	}
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web-api/deploy/d1", "")); len(got) != len(mine) {
		t.Errorf("deploy lookup: got %d entries, want %d", len(got), len(mine))
	}
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web-api?maxPerPage=2", "")); len(got) != 2 || got[0].Key != theirs[1] && got[0].Key != mine[2] {
		t.Errorf("maxPerPage=2: got %+v, want the 2 newest", got)
	}
	if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/request/web", "")); len(got) != 0 {
		t.Errorf("request web: got %d entries, want none of web-api's", len(got))
	}
}

func TestLookupRejectsBadInput(t *testing.T) {
	h := handler(t, &fakeStore{}, settings("logs"))
	tests := []struct {
		name, path string
		status     int
		message    string
	}{
		{"a task id with too few parts", "/api/logs/task/web-api-d1", 400, "web-api-d1 is not a valid task id"},
		{"a task id with a slash", "/api/logs/task/web%2F..-d1-1-0-h-r", 400, "web/..-d1-1-0-h-r is not a valid task id"},
		{"a request id with a percent sign", "/api/logs/request/web%25Y", 400, "web%Y is not a valid request id"},
		{"a deploy id with a dash", "/api/logs/request/web/deploy/d-1", 400, "d-1 is not a valid deploy id"},
		{"a start that is not 13 digits", "/api/logs/request/web?start=12345", 400, `start must be a time in epoch milliseconds (13 digits), got "12345"`},
		{"an end that overflows", "/api/logs/request/web?end=99999999999999999999", 400, `end must be a time in epoch milliseconds (13 digits), got "99999999999999999999"`},
		{"a zero maxPerPage", "/api/logs/request/web?maxPerPage=0", 400, `maxPerPage must be a whole number ≥ 1, got "0"`},
		{"an unknown route", "/api/logs/nothing", 404, "Not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := serve(t, h, "GET", tt.path, "")
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.status == 400 {
				r.wantError(t, tt.status, tt.message)
			}
		})
	}
}

func TestLookupOfTooManyPrefixesIsRefused(t *testing.T) {
	cfg := settings("logs")
	cfg.Format, _ = logkey.ParseFormat("%requestId/%Y/%m/%d/%H/%taskId_%index")
	h := handler(t, &fakeStore{}, cfg)
	hours84Days := taskStart.Add(5*24*time.Hour - 84*24*time.Hour).UnixMilli() // 2,016 hours before the test's now
	serve(t, h, "GET", fmt.Sprintf("/api/logs/request/web?start=%d", hours84Days), "").
		wantError(t, 400, "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests")
	if r := serve(t, h, "GET", fmt.Sprintf("/api/logs/request/web?start=%d", hours84Days+4*24*3600*1000), ""); r.status != 200 { // 80 days
		t.Errorf("four days less: got %d %s, want 200", r.status, r.body)
	}
}

func TestLookupWithoutBucketsIsNotFound(t *testing.T) {
	serve(t, handler(t, &fakeStore{}, settings()), "GET", "/api/logs/task/"+taskID, "").wantError(t, 404, "S3 configuration was absent")
	serve(t, handler(t, &fakeStore{}, settings()), "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"]}`).wantError(t, 404, "S3 configuration was absent")
}

func TestSlowS3AnswersGatewayTimeout(t *testing.T) {
	cfg := settings("logs")
	cfg.ListTimeout, cfg.LinkTimeout = 50*time.Millisecond, 50*time.Millisecond
	store := &fakeStore{block: true}
	serve(t, handler(t, store, cfg), "GET", "/api/logs/task/"+taskID, "").
		wantError(t, 504, "Timed out waiting for response from S3 for "+taskID)
	// The S3 call's deadline is the list timeout's, however long the
	// machine took to get there (a time measured around the request
	// would be the machine's speed).
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.left <= 0 || store.left > cfg.ListTimeout {
		t.Errorf("the S3 call had %v left when called, want at most the list timeout of %v", store.left, cfg.ListTimeout)
	}
}

func TestHostileLogBodiesAreRefusedBeforeAnyS3Call(t *testing.T) {
	nest := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	valid := `{"taskIds":["` + taskID + `"],"listOnly":true}`
	tests := []struct {
		name, body string
		status     int
		message    string
	}{
		{"a body one byte over 64 KiB", valid + strings.Repeat(" ", web.MaxBody-len(valid)+1), 413, "request body is larger than 65536 bytes"},
		{"a megabyte of task ids", `{"taskIds":[` + strings.Repeat(`"`+taskID+`",`, (1<<20)/len(taskID)) + `"x"]}`, 413, "request body is larger than 65536 bytes"},
		{"100,000 nested arrays", nest("[", "]", 100000), 413, "request body is larger than 65536 bytes"},
		{"32,000 nested arrays", nest("[", "]", 32000), 400, "request body is not valid JSON: invalid character '[' exceeded max depth"},
		{"10,900 nested objects", nest(`{"a":`, "}", 10900), 400, "request body is not valid JSON: invalid character '{' exceeded max depth"},
		{"task ids nested 20,000 deep", `{"taskIds":` + nest("[", "]", 20000) + `}`, 400, "request body is not valid JSON: invalid character '[' exceeded max depth"},
		{"10,000 nested arrays", nest("[", "]", 10000), 400, "request body must be a JSON object"},
		{"a JSON array", `[` + valid + `]`, 400, "request body must be a JSON object"},
		{"a JSON string", `"` + taskID + `"`, 400, "request body must be a JSON object"},
		{"not JSON", `{taskIds:[]}`, 400, "request body is not valid JSON: "},
	}
	for _, tt := range tests {
		for _, route := range logRoutes {
			t.Run(tt.name+" to "+route[0]+" "+route[1], func(t *testing.T) {
				f := newRecordingStore()
				uploaded(f.fakeStore, "logs", taskID, 3)
				serve(t, handler(t, f, settings("logs")), route[0], route[1], tt.body).wantJSONError(t, tt.status, tt.message)
				f.untouched(t)
			})
		}
	}
	t.Run("a body of exactly 64 KiB is read", func(t *testing.T) {
		f := newRecordingStore()
		uploaded(f.fakeStore, "logs", taskID, 3)
		body := valid + strings.Repeat(" ", web.MaxBody-len(valid))
		if p := decode[page](t, serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", body)); len(p.Results) != 3 {
			t.Errorf("got %d results, want 3", len(p.Results))
		}
	})
}

func TestHostileMaxPerPage(t *testing.T) {
	f := &fakeStore{}
	mine := uploaded(f, "logs", taskID, 3)
	h := handler(t, f, settings("logs"))
	for _, path := range []string{"/api/logs/request/web-api", "/api/logs/request/web-api/deploy/d1"} {
		for _, v := range []string{"1e12", "-1", "0", "abc", "9223372036854775808", "99999999999999999999", "", "1.5", "0x10", "%205", "1%00"} {
			t.Run(path+" maxPerPage="+v+" is 400", func(t *testing.T) {
				got, _ := url.QueryUnescape(v)
				serve(t, h, "GET", path+"?maxPerPage="+v, "").wantError(t, 400, fmt.Sprintf("maxPerPage must be a whole number ≥ 1, got %q", got))
			})
		}
		// GET lookups have no upper cap (docs/behaviour.md "Task logs"): a huge page is all.
		for _, v := range []string{"1000000000000", "9223372036854775807", "1001"} {
			t.Run(path+" maxPerPage="+v+" returns every object", func(t *testing.T) {
				if got := decode[[]logEntry](t, serve(t, h, "GET", path+"?maxPerPage="+v, "")); len(got) != len(mine) {
					t.Errorf("got %d entries, want %d", len(got), len(mine))
				}
			})
		}
	}
	t.Run("a task lookup takes no maxPerPage and ignores it", func(t *testing.T) {
		if got := decode[[]logEntry](t, serve(t, h, "GET", "/api/logs/task/"+taskID+"?maxPerPage=abc", "")); len(got) != len(mine) {
			t.Errorf("got %d entries, want %d", len(got), len(mine))
		}
	})
	for body, message := range map[string]string{
		`1e12`:                 "request body field maxPerPage must be a whole number",
		`1000000000000`:        "maxPerPage must be between 1 and 1000, got 1000000000000",
		`9223372036854775807`:  "maxPerPage must be between 1 and 1000, got 9223372036854775807",
		`9223372036854775808`:  "request body field maxPerPage must be a whole number",
		`-9223372036854775808`: "maxPerPage must be between 1 and 1000, got -9223372036854775808",
		`-1`:                   "maxPerPage must be between 1 and 1000, got -1",
		`0`:                    "maxPerPage must be between 1 and 1000, got 0",
		`1001`:                 "maxPerPage must be between 1 and 1000, got 1001",
		`"abc"`:                "request body field maxPerPage must be a whole number",
		`10.0`:                 "request body field maxPerPage must be a whole number",
		`true`:                 "request body field maxPerPage must be a whole number",
	} {
		t.Run("a search with maxPerPage "+body+" is 400", func(t *testing.T) {
			rf := newRecordingStore()
			serve(t, handler(t, rf, settings("logs")), "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"],"maxPerPage":`+body+`}`).wantError(t, 400, message)
			rf.untouched(t)
		})
	}
	for _, body := range []string{"1", "1000", "null"} {
		t.Run("a search with maxPerPage "+body+" is served", func(t *testing.T) {
			decode[page](t, serve(t, h, "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"],"maxPerPage":`+body+`}`))
		})
	}
}

func TestHostileTimeBounds(t *testing.T) {
	now := taskStart.Add(5 * 24 * time.Hour) // the handler's clock
	for _, route := range logRoutes[:3] {
		for _, v := range []string{
			"99999999999999999999", // 20 digits
			"9223372036854775808",  // 2^63
			"9223372036854775807",  // the largest int64, but 19 digits
			"-1", "-123456789012", "1e12", "", "0x1234567890a", "%201234567890123", "1234567890123%00", "１２３４５６７８９０１２３",
		} {
			for _, name := range []string{"start", "end"} {
				t.Run(route[1]+" "+name+"="+v+" is 400", func(t *testing.T) {
					f := newRecordingStore()
					got, _ := url.QueryUnescape(v)
					serve(t, handler(t, f, settings("logs")), "GET", route[1]+"?"+name+"="+v, "").
						wantError(t, 400, fmt.Sprintf("%s must be a time in epoch milliseconds (13 digits), got %q", name, got))
					f.untouched(t)
				})
			}
		}
		t.Run(route[1]+" a start with a plus sign is 400", func(t *testing.T) {
			f := newRecordingStore()
			serve(t, handler(t, f, settings("logs")), "GET", route[1]+"?start=%2B123456789012", "").
				wantError(t, 400, `start must be a time in epoch milliseconds (13 digits), got "+123456789012"`)
			f.untouched(t)
		})
		t.Run(route[1]+" an end before the start finds nothing and lists nothing", func(t *testing.T) {
			f := newRecordingStore()
			uploaded(f.fakeStore, "logs", taskID, 3)
			h := handler(t, f, settings("logs"))
			for _, q := range []string{
				fmt.Sprintf("start=%d&end=%d", now.UnixMilli(), taskStart.UnixMilli()),
				fmt.Sprintf("start=%d&end=%d", now.UnixMilli(), now.UnixMilli()),
				"start=9999999999999&end=0000000000000",
			} {
				if got := serve(t, h, "GET", route[1]+"?"+q, ""); got.status != 200 || got.body != "[]" {
					t.Errorf("%s: got %d %s, want 200 []", q, got.status, got.body)
				}
			}
			f.untouched(t)
		})
		t.Run(route[1]+" an end centuries away is too many prefixes", func(t *testing.T) {
			f := newRecordingStore()
			serve(t, handler(t, f, settings("logs")), "GET", route[1]+"?end=9999999999999", "").
				wantError(t, 400, "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests")
			f.untouched(t)
		})
	}
	search := func(extra string) string {
		return `{"taskIds":["` + taskID + `"],"requestsAndDeploys":{"web-api":["d1"]},"listOnly":true` + extra + `}`
	}
	for extra, message := range map[string]string{
		`,"start":9223372036854775808`:      "request body field start must be a whole number",
		`,"end":99999999999999999999`:       "request body field end must be a whole number",
		`,"start":1e12`:                     "request body field start must be a whole number",
		`,"start":-9223372036854775808`:     "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests",
		`,"end":9223372036854775807`:        "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests",
		`,"start":0,"end":9999999999999`:    "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests",
		`,"start":-62135596800001,"end":-1`: "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests",
	} {
		t.Run("a search with"+extra+" is 400", func(t *testing.T) {
			f := newRecordingStore()
			serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", search(extra)).wantError(t, 400, message)
			f.untouched(t)
		})
	}
	t.Run("a search whose end is before its start is an empty last page that lists nothing", func(t *testing.T) {
		f := newRecordingStore()
		uploaded(f.fakeStore, "logs", taskID, 3)
		for _, extra := range []string{
			fmt.Sprintf(`,"start":%d,"end":%d`, now.UnixMilli(), taskStart.UnixMilli()),
			`,"start":9223372036854775807,"end":-9223372036854775808`,
			`,"end":-1`,
		} {
			p := decode[page](t, serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", search(extra)))
			if !p.LastPage || len(p.Results) != 0 || len(p.ContinuationTokens) != 0 {
				t.Errorf("%s: got %+v, want an empty last page", extra, p)
			}
		}
		f.untouched(t)
	})
	// A search body's times are plain int64 ms: a negative start is a window
	// opening before 1970, which for a task is its own start.
	t.Run("a search with a negative start is served", func(t *testing.T) {
		f := newRecordingStore()
		mine := uploaded(f.fakeStore, "logs", taskID, 3)
		p := decode[page](t, serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"],"start":-1,"listOnly":true}`))
		if len(p.Results) != len(mine) {
			t.Errorf("got %d results, want %d", len(p.Results), len(mine))
		}
	})
}

func TestHostileLogIDs(t *testing.T) {
	refused := []struct{ path, message string }{
		{"/api/logs/task/a%2Fb-d1-1-0-h-r", "a/b-d1-1-0-h-r is not a valid task id"},
		{"/api/logs/task/%2e%2e", ".. is not a valid task id"},
		{"/api/logs/task/%2E%2E-d1-1-0-h-r", "..-d1-1-0-h-r is not a valid task id"},
		{"/api/logs/task/web-d1-1-0-h-r%00", "web-d1-1-0-h-r\x00 is not a valid task id"},
		{"/api/logs/task/web-d1-%2B1-0-h-r", "web-d1-+1-0-h-r is not a valid task id"},
		{"/api/logs/task/web-d1-99999999999999999999-0-h-r", "web-d1-99999999999999999999-0-h-r is not a valid task id"},
		{"/api/logs/task/web-d1-1-0-h-r%2F..%2F..", "web-d1-1-0-h-r/../.. is not a valid task id"},
		{"/api/logs/request/%2e%2e", ".. is not a valid request id"},
		{"/api/logs/request/.%2e", ".. is not a valid request id"},
		{"/api/logs/request/a..b", "a..b is not a valid request id"},
		{"/api/logs/request/web%2Fdeploy%2Fd1", "web/deploy/d1 is not a valid request id"},
		{"/api/logs/request/web%252F", "web%2F is not a valid request id"},
		{"/api/logs/request/web%25Y", "web%Y is not a valid request id"},
		{"/api/logs/request/%00", "\x00 is not a valid request id"},
		{"/api/logs/request/a%5Cb", `a\b is not a valid request id`},
		{"/api/logs/request/a%20b", "a b is not a valid request id"},
		{"/api/logs/request/a%0Ab", "a\nb is not a valid request id"},
		{"/api/logs/request/a%E2%80%A8b", "a\u2028b is not a valid request id"}, // a line separator
		{"/api/logs/request/" + strings.Repeat("x", 513), strings.Repeat("x", 513) + " is not a valid request id"},
		{"/api/logs/request/web/deploy/%2e%2e", ".. is not a valid deploy id"},
		{"/api/logs/request/web/deploy/d%2F1", "d/1 is not a valid deploy id"},
		{"/api/logs/request/web/deploy/d-1", "d-1 is not a valid deploy id"},
		{"/api/logs/request/%2e%2e/deploy/d1", ".. is not a valid request id"},
	}
	for _, tt := range refused {
		t.Run(tt.path+" is 400", func(t *testing.T) {
			f := newRecordingStore()
			uploaded(f.fakeStore, "logs", taskID, 3)
			serve(t, handler(t, f, settings("logs")), "GET", tt.path, "").wantError(t, 400, tt.message)
			f.untouched(t)
		})
	}
	t.Run("an id that is not UTF-8 is 400", func(t *testing.T) {
		f := newRecordingStore()
		serve(t, handler(t, f, settings("logs")), "GET", "/api/logs/request/web%FF", "").wantJSONError(t, 400, "web")
		f.untouched(t)
	})
	// A path segment that is exactly an escaped slash matches no route
	// wildcard of net/http's ServeMux, so it is the mux's 404.
	navigation := []string{
		"/api/logs/task/..", "/api/logs/task/.", "/api/logs/request/web/..", "/api/logs/request//deploy/d1",
		"/api/logs/request/web/deploy/../../task/x", "/api/logs/task/" + taskID + "/..", "/api/logs//search",
	}
	unrouted := []string{
		"/api/logs/task/", "/api/logs/request/web/deploy/", "/api/logs/task/" + taskID + "/", "/api/logs/search/",
		"/api/logs/request/%2F", "/api/logs/request/%2F/deploy/d1",
	}
	for _, path := range append(navigation, unrouted...) {
		t.Run(path+" is a JSON 404, never a redirect", func(t *testing.T) {
			f := newRecordingStore()
			for _, method := range []string{"GET", "POST"} {
				r := serve(t, handler(t, f, settings("logs")), method, path, "")
				r.wantJSONErrorBody(t, 404, "")
				if loc := r.header.Get("Location"); loc != "" {
					t.Errorf("got Location %q, want none", loc)
				}
			}
			f.untouched(t)
		})
	}
	t.Run("every 404 carries Cache-Control: no-store", func(t *testing.T) {
		for _, path := range unrouted {
			serve(t, handler(t, newRecordingStore(), settings("logs")), "GET", path, "").wantJSONError(t, 404, "")
		}
		for _, path := range navigation {
			serve(t, handler(t, newRecordingStore(), settings("logs")), "GET", path, "").wantJSONError(t, 404, "")
		}
	})
	searches := []struct{ body, message string }{
		{`{"taskIds":["../x-d1-1-0-h-r"]}`, "../x-d1-1-0-h-r is not a valid task id"},
		{`{"taskIds":[""]}`, " is not a valid task id"},
		{`{"taskIds":["web-d1-1-0-h-r\u0000"]}`, "web-d1-1-0-h-r\x00 is not a valid task id"},
		{`{"requestsAndDeploys":{"":[]}}`, " is not a valid request id"},
		{`{"requestsAndDeploys":{"a/b":[]}}`, "a/b is not a valid request id"},
		{`{"requestsAndDeploys":{"..":[]}}`, ".. is not a valid request id"},
		{`{"requestsAndDeploys":{"web":[".."]}}`, ".. is not a valid deploy id"},
		{`{"requestsAndDeploys":{"web":["d/1"]}}`, "d/1 is not a valid deploy id"},
		{`{"requestsAndDeploys":{"web":[""]}}`, " is not a valid deploy id"},
		{`{"taskIds":["` + taskID + `"],"requestsAndDeploys":{"web%2F":[]}}`, "web%2F is not a valid request id"},
	}
	for _, tt := range searches {
		t.Run("a search of "+tt.body+" is 400", func(t *testing.T) {
			f := newRecordingStore()
			serve(t, handler(t, f, settings("logs")), "POST", "/api/logs/search", tt.body).wantError(t, 400, tt.message)
			f.untouched(t)
		})
	}
}

func TestHostileUnicodeIDsFindTheirOwnLogs(t *testing.T) {
	at := taskStart.UnixMilli()
	tasks := map[string]string{ // request id → task id
		"ノード-1": fmt.Sprintf("ノード-1-d1-%d-0-node1-rack1", at),
		"é":     fmt.Sprintf("é-d1-%d-0-node1-rack1", at),
		"🚀":     fmt.Sprintf("🚀-d1-%d-0-node1-rack1", at),
		"nöde":  fmt.Sprintf("nöde-d1-%d-0-node1-rack1", at),
	}
	f := newRecordingStore()
	want := map[string][]string{}
	for request, task := range tasks {
		want[request] = uploaded(f.fakeStore, "logs", task, 2)
	}
	lookalikes := map[string]string{ // request ids sharing a start, or a look, with those above
		"ノード":        fmt.Sprintf("ノード-d1-%d-0-node1-rack1", at),
		"e":          fmt.Sprintf("e-d1-%d-0-node1-rack1", at),
		"no\u0308de": fmt.Sprintf("no\u0308de-d1-%d-0-node1-rack1", at), // nöde decomposed (NFD)
	}
	for request, task := range lookalikes {
		want[request] = uploaded(f.fakeStore, "logs", task, 1)
	}
	h := handler(t, f, settings("logs"))
	for request, task := range tasks {
		t.Run(request, func(t *testing.T) {
			for _, path := range []string{
				"/api/logs/task/" + url.PathEscape(task),
				"/api/logs/task/" + task, // as a client that does not escape sends it
				"/api/logs/request/" + url.PathEscape(request),
				"/api/logs/request/" + url.PathEscape(request) + "/deploy/d1",
			} {
				var keys []string
				for _, e := range decode[[]logEntry](t, serve(t, h, "GET", path, "")) {
					keys = append(keys, e.Key)
				}
				if !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(want[request]))) {
					t.Errorf("%s: got %q, want %q", path, keys, want[request])
				}
			}
			keys, _ := follow(t, h, map[string]any{"taskIds": []string{task}, "requestsAndDeploys": map[string][]string{request: {}}, "listOnly": true})
			if !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(want[request]))) {
				t.Errorf("search: got %q, want %q", keys, want[request])
			}
		})
	}
}
