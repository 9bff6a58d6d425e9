package web_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"
)

// changeRequest stands in for a handler's optional body.
type changeRequest struct {
	Message        string `json:"message"`
	DurationMillis int64  `json:"durationMillis"`
}

// jsonOfSize returns a JSON object of exactly n bytes.
func jsonOfSize(t *testing.T, n int) string {
	t.Helper()
	const frame = `{"message":""}`
	if n < len(frame) {
		t.Fatalf("jsonOfSize(%d): smaller than %d", n, len(frame))
	}
	return `{"message":"` + strings.Repeat("x", n-len(frame)) + `"}`
}

func TestDecodeBody(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		wantPresent bool
		wantMessage string // decoded message when present
		wantStatus  int    // 0: no error
		wantErrHas  string // substring of the fault message
	}{
		{name: "an empty body means no body", body: ""},
		{name: "a whitespace body means no body", body: " \n\t\r "},
		{name: "an empty object means no body", body: "{}"},
		{name: "an empty object with surrounding space means no body", body: "\n {} \n"},
		{name: "null means no body", body: "null"},
		{name: "null with surrounding space means no body", body: "  null\n"},
		{name: "an object with unknown fields decodes", body: `{"extra":true,"message":"hi","nested":{"a":[1]}}`,
			wantPresent: true, wantMessage: "hi"},
		{name: "an object of only unknown fields is a body", body: `{"extra":1}`, wantPresent: true},
		{name: "a field in another case cannot override the field", body: `{"message":"real","MESSAGE":"shadow"}`,
			wantPresent: true, wantMessage: "real"},
		{name: "a field in another case before the field cannot override it either", body: `{"Message":"shadow","message":"real","mESSAGE":"shadow"}`,
			wantPresent: true, wantMessage: "real"},
		{name: "a field in another case is an unknown field, whatever its type", body: `{"DURATIONMILLIS":"soon","Message":"shadow"}`,
			wantPresent: true},
		{name: "plain text is a 400", body: "freeze it please", wantStatus: http.StatusBadRequest, wantErrHas: "not valid JSON"},
		{name: "truncated JSON is a 400", body: `{"message":`, wantStatus: http.StatusBadRequest, wantErrHas: "not valid JSON"},
		{name: "trailing garbage after JSON is a 400", body: `{} x`, wantStatus: http.StatusBadRequest},
		{name: "a wrong field type is a 400 naming the field", body: `{"durationMillis":"soon"}`,
			wantStatus: http.StatusBadRequest, wantErrHas: "durationMillis must be a whole number"},
		{name: "an empty object with space inside means no body", body: "{ \n }"},
		{name: "an array is a 400 that names no Go type", body: `[1]`,
			wantStatus: http.StatusBadRequest, wantErrHas: "request body must be a JSON object"},
		{name: "a string is a 400 that names no Go type", body: `"x"`,
			wantStatus: http.StatusBadRequest, wantErrHas: "request body must be a JSON object"},
		{name: "a message with a byte that is not UTF-8 is a 400", body: "{\"message\":\"caf\xe9\"}",
			wantStatus: http.StatusBadRequest, wantErrHas: "not valid UTF-8"},
		{name: "an unknown field with a cut UTF-8 sequence is a 400", body: "{\"note\":\"\xf0\x9f\x98\",\"message\":\"hi\"}",
			wantStatus: http.StatusBadRequest, wantErrHas: "not valid UTF-8"},
		{name: "an encoded surrogate half is a 400", body: "{\"message\":\"\xed\xa0\x80\"}",
			wantStatus: http.StatusBadRequest, wantErrHas: "not valid UTF-8"},
		{name: "a body of exactly 64 KiB is accepted", body: jsonOfSize(t, web.MaxBody),
			wantPresent: true, wantMessage: strings.Repeat("x", web.MaxBody-len(`{"message":""}`))},
		{name: "a body of 64 KiB and one byte is a 413", body: jsonOfSize(t, web.MaxBody+1),
			wantStatus: http.StatusRequestEntityTooLarge},
		{name: "a huge non-JSON body is a 413, not a 400", body: strings.Repeat("z", 3*web.MaxBody),
			wantStatus: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/api/slaves/slave/S1/freeze", strings.NewReader(tt.body))
			var got changeRequest
			present, err := web.DecodeBody(r, &got)
			if tt.wantStatus != 0 {
				if err == nil {
					t.Fatalf("got no error (present=%v), want status %d", present, tt.wantStatus)
				}
				if s := web.Status(err); s != tt.wantStatus {
					t.Errorf("got status %d (%v), want %d", s, err, tt.wantStatus)
				}
				if !strings.Contains(fault.Message(err), tt.wantErrHas) {
					t.Errorf("got message %q, want it to contain %q", fault.Message(err), tt.wantErrHas)
				}
				if present {
					t.Errorf("got present=true with an error, want false")
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if present != tt.wantPresent {
				t.Errorf("got present=%v, want %v", present, tt.wantPresent)
			}
			if got.Message != tt.wantMessage {
				if len(got.Message)+len(tt.wantMessage) > 200 {
					t.Errorf("got message of %d bytes, want %d", len(got.Message), len(tt.wantMessage))
				} else {
					t.Errorf("got message %q, want %q", got.Message, tt.wantMessage)
				}
			}
		})
	}
}

func TestDecodeBodyWithoutBody(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/api/slaves/", nil)
	r.Body = nil
	var v changeRequest
	present, err := web.DecodeBody(r, &v)
	if present || err != nil {
		t.Fatalf("got (%v, %v), want (false, nil)", present, err)
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"invalid is 400", fault.Invalid("bad %s", "x"), http.StatusBadRequest},
		{"unauthorized is 401", fault.Unauthorized("authentication required"), http.StatusUnauthorized},
		{"forbidden is 403", fault.Forbidden("no"), http.StatusForbidden},
		{"not found is 404", fault.NotFound("gone"), http.StatusNotFound},
		{"conflict is 409", fault.Conflict("already"), http.StatusConflict},
		{"too large is 413", fault.TooLarge("big"), http.StatusRequestEntityTooLarge},
		{"unavailable is 503", fault.Unavailable("throttled"), http.StatusServiceUnavailable},
		{"timeout is 504", fault.Timeout("slow"), http.StatusGatewayTimeout},
		{"an explicit internal fault is 500", &fault.Error{Kind: fault.KindInternal, Message: "x"}, http.StatusInternalServerError},
		{"a plain error is 500", errors.New("boom"), http.StatusInternalServerError},
		{"a wrapped fault keeps its kind", fmt.Errorf("freeze S1: %w", fault.Conflict("already")), http.StatusConflict},
		{"an unknown kind is 500", &fault.Error{Kind: fault.Kind(99), Message: "x"}, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := web.Status(tt.err); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// logLines parses the JSON log lines in buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// linesWithMsg returns the log lines whose msg is msg.
func linesWithMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

func fixedID(id string) func(*http.Request) string {
	return func(*http.Request) string { return id }
}

func TestEveryJSONAnswerForbidsSniffing(t *testing.T) {
	for _, tt := range []struct {
		name     string
		answer   func(http.ResponseWriter, *http.Request)
		wantBody string
	}{
		{"an object", func(w http.ResponseWriter, _ *http.Request) { web.JSON(w, 200, map[string]string{"a": "<b>"}) }, `{"a":"\u003cb\u003e"}`},
		{"an array", func(w http.ResponseWriter, _ *http.Request) { web.JSON(w, 200, []string{"<script>"}) }, `["\u003cscript\u003e"]`},
		{"an empty change answer", func(w http.ResponseWriter, _ *http.Request) { web.OK(w) }, ""},
		{"an error", func(w http.ResponseWriter, r *http.Request) { web.Error(w, r, fault.Invalid("<html>")) }, `{"code":400,"message":"\u003chtml\u003e"}` + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			web.Wrap(http.HandlerFunc(tt.answer), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/slaves", nil))
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("got X-Content-Type-Options %q, want nosniff", got)
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("got body %q, want %q (success bodies as they were, errors ending with a newline)", got, tt.wantBody)
			}
		})
	}
}

func TestError(t *testing.T) {
	const secret = "dynamodb: AccessDenied arn:aws:iam::123456789012:role/secret"
	tests := []struct {
		name           string
		err            error
		wantStatus     int
		wantBody       string
		wantRetryAfter bool
		wantLogged     bool
	}{
		{name: "an internal error says only which request failed", err: errors.New(secret),
			wantStatus: 500, wantBody: `{"code":500,"message":"internal error (request req-42)"}` + "\n", wantLogged: true},
		{name: "a wrapped internal error says only which request failed", err: fmt.Errorf("freeze S1: %w", errors.New(secret)),
			wantStatus: 500, wantBody: `{"code":500,"message":"internal error (request req-42)"}` + "\n", wantLogged: true},
		{name: "an internal fault hides its message", err: &fault.Error{Kind: fault.KindInternal, Message: secret},
			wantStatus: 500, wantBody: `{"code":500,"message":"internal error (request req-42)"}` + "\n", wantLogged: true},
		{name: "unavailable sets Retry-After", err: fault.Unavailable("DynamoDB is throttling"),
			wantStatus: 503, wantBody: `{"code":503,"message":"DynamoDB is throttling"}` + "\n", wantRetryAfter: true, wantLogged: true},
		{name: "timeout keeps its safe message", err: fault.Timeout("Timed out waiting for response from S3 for r1"),
			wantStatus: 504, wantBody: `{"code":504,"message":"Timed out waiting for response from S3 for r1"}` + "\n", wantLogged: true},
		{name: "not found keeps its message", err: fault.NotFound("Couldn't find dead Slave with id S1"),
			wantStatus: 404, wantBody: `{"code":404,"message":"Couldn't find dead Slave with id S1"}` + "\n"},
		{name: "invalid keeps its message", err: fault.Invalid("bad"),
			wantStatus: 400, wantBody: `{"code":400,"message":"bad"}` + "\n"},
		{name: "a cancellation while the client still waits is a 500", err: fmt.Errorf("list slaves: %w", context.Canceled),
			wantStatus: 500, wantBody: `{"code":500,"message":"internal error (request req-42)"}` + "\n", wantLogged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				web.Error(w, r, tt.err)
			}), web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RequestID: fixedID("req-42")})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/slaves/", nil))

			if rec.Code != tt.wantStatus {
				t.Errorf("got status %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Body.String(); got != tt.wantBody {
				t.Errorf("got body %s, want %s", got, tt.wantBody)
			}
			if strings.Contains(rec.Body.String(), "AccessDenied") {
				t.Errorf("got body %s, want no internal text", rec.Body.String())
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("got X-Content-Type-Options %q, want nosniff", got)
			}
			if got := rec.Header().Get("Retry-After"); (got != "") != tt.wantRetryAfter {
				t.Errorf("got Retry-After %q, want present=%v", got, tt.wantRetryAfter)
			}
			failed := linesWithMsg(logLines(t, &logs), "request failed")
			if !tt.wantLogged {
				if len(failed) != 0 {
					t.Errorf("got %d error log lines, want 0", len(failed))
				}
				return
			}
			if len(failed) != 1 {
				t.Fatalf("got %d error log lines, want 1: %s", len(failed), logs.String())
			}
			if failed[0]["request_id"] != "req-42" {
				t.Errorf("got logged request_id %v, want req-42", failed[0]["request_id"])
			}
			if failed[0]["error"] != tt.err.Error() {
				t.Errorf("got logged error %v, want %q", failed[0]["error"], tt.err.Error())
			}
		})
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestWrapRequestID(t *testing.T) {
	tests := []struct {
		name      string
		requestID func(*http.Request) string
		want      string // "" means a random id
	}{
		{name: "the platform's id is used when it has one", requestID: fixedID("abc-123"), want: "abc-123"},
		{name: "a random id is made when the platform's is empty", requestID: fixedID("")},
		{name: "a random id is made when there is no platform id function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = append(seen, web.RequestID(r))
				web.OK(w)
			}), web.Options{Logger: slog.New(slog.DiscardHandler), RequestID: tt.requestID})
			for range 2 {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/slaves/", nil))
			}
			if len(seen) != 2 {
				t.Fatalf("got %d handled requests, want 2", len(seen))
			}
			if tt.want != "" {
				if seen[0] != tt.want || seen[1] != tt.want {
					t.Errorf("got ids %q, want %q", seen, tt.want)
				}
				return
			}
			for _, id := range seen {
				if !hexID.MatchString(id) {
					t.Errorf("got id %q, want 16 hex digits", id)
				}
			}
			if seen[0] == seen[1] {
				t.Errorf("got the same random id %q twice, want different ids", seen[0])
			}
		})
	}
}

func TestWrapRecoversPanic(t *testing.T) {
	var logs bytes.Buffer
	h := web.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("nil map in the secret handler")
	}), web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RequestID: fixedID("req-7")})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/slaves/", nil))

	if rec.Code != http.StatusInternalServerError {
		t.Errorf("got status %d, want 500", rec.Code)
	}
	if want := `{"code":500,"message":"internal error (request req-7)"}` + "\n"; rec.Body.String() != want {
		t.Errorf("got body %s, want %s", rec.Body.String(), want)
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", got)
	}
	lines := logLines(t, &logs)
	failed := linesWithMsg(lines, "request failed")
	if len(failed) != 1 || !strings.Contains(fmt.Sprint(failed[0]["error"]), "secret handler") {
		t.Errorf("got error log lines %v, want one carrying the panic value", failed)
	}
	reqs := linesWithMsg(lines, "request")
	if len(reqs) != 1 || reqs[0]["status"] != float64(500) {
		t.Errorf("got request log lines %v, want one with status 500", reqs)
	}
}

// testMux is a small route table like an endpoint group's.
func testMux(called *bool) *http.ServeMux {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) {
		*called = true
		web.JSON(w, http.StatusOK, map[string]string{"route": r.Pattern, "slaveId": r.PathValue("slaveId")})
	}
	mux.HandleFunc("GET /api/slaves/{$}", ok)
	mux.HandleFunc("GET /api/slaves/slave/{slaveId}/details", ok)
	mux.HandleFunc("GET /api/slaves/slave/{slaveId}", ok)
	mux.HandleFunc("GET /api/x", ok)
	mux.HandleFunc("GET /details", ok)
	mux.HandleFunc("/", web.NotFound)
	return mux
}

func TestWrapPaths(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantCalled bool
	}{
		{name: "a normal path reaches its route", path: "/api/slaves/slave/S1/details", wantStatus: 200, wantCalled: true},
		{name: "a trailing slash is fine", path: "/api/slaves/", wantStatus: 200, wantCalled: true},
		{name: "an empty slave id segment is a 404", path: "/api/slaves/slave//details", wantStatus: 404},
		{name: "a dot segment is a 404", path: "/api/./x", wantStatus: 404},
		{name: "a dot-dot segment is a 404", path: "/api/slaves/slave/../details", wantStatus: 404},
		{name: "a leading double slash is a 404", path: "//api/x", wantStatus: 404},
		{name: "a double slash before a trailing slash is a 404", path: "/api/slaves//", wantStatus: 404},
		{name: "a trailing dot segment is a 404", path: "/api/slaves/slave/.", wantStatus: 404},
		{name: "an unknown route is a JSON 404", path: "/api/nothing", wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var called bool
			h := web.Wrap(testMux(&called), web.Options{Logger: slog.New(slog.DiscardHandler)})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))

			if rec.Code != tt.wantStatus {
				t.Errorf("got status %d (Location %q), want %d", rec.Code, rec.Header().Get("Location"), tt.wantStatus)
			}
			if called != tt.wantCalled {
				t.Errorf("got handler called=%v, want %v", called, tt.wantCalled)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			if tt.wantStatus == 404 {
				var body web.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != 404 || body.Message == "" {
					t.Errorf("got body %s, want a JSON error with code 404", rec.Body.String())
				}
			}
		})
	}
}

// A query string that does not parse is a JSON 400 before any route runs,
// as API Gateway answers it: a route that read it would otherwise see it
// with the bad pair dropped, and answer as if it had not been sent.
func TestWrapRefusesAMalformedQueryString(t *testing.T) {
	tests := []struct {
		name, target string
		wantStatus   int
	}{
		{"a percent sign escaping nothing", "/api/slaves/?state=FROZEN%", 400},
		{"an escape that is not hexadecimal", "/api/slaves/?state=%zz", 400},
		{"a bad escape in a key", "/api/slaves/?st%ate=FROZEN", 400},
		{"a bad pair after a good one", "/api/slaves/?verbose=true&state=FROZEN%2", 400},
		{"a semicolon separator", "/api/slaves/?state=FROZEN;verbose=true", 400},
		{"a bad query on an unknown route", "/api/nothing?state=%", 400},
		{"a bad query on a path that navigates", "/api/slaves/../x?state=%", 400},
		{"an escaped percent sign", "/api/slaves/?state=FROZEN%25", 200},
		{"an escaped semicolon", "/api/slaves/?state=FROZEN%3B", 200},
		{"an empty value and an empty query", "/api/slaves/?state=&", 200},
		{"no query", "/api/slaves/", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var called bool
			h := web.Wrap(testMux(&called), web.Options{Logger: slog.New(slog.DiscardHandler)})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.target, nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("got status %d (%s), want %d", rec.Code, rec.Body.String(), tt.wantStatus)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			if tt.wantStatus == 200 {
				if !called {
					t.Error("got the route skipped, want it called")
				}
				return
			}
			if called {
				t.Error("got the route called, want it skipped")
			}
			if want := `{"code":400,"message":"malformed query string"}` + "\n"; rec.Body.String() != want {
				t.Errorf("got body %s, want %s", rec.Body.String(), want)
			}
		})
	}
}

func TestWrapLogsOneLinePerRequest(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		handler   http.HandlerFunc // nil: the route answers 200
		wantRoute string
		status    int
	}{
		{name: "a served request logs its route and status", path: "/api/slaves/slave/S1/details",
			wantRoute: "GET /api/slaves/slave/{slaveId}/details", status: 200},
		{name: "a failed request logs its fault status", path: "/api/slaves/slave/S1/details",
			handler: func(w http.ResponseWriter, r *http.Request) {
				web.Error(w, r, fault.NotFound("Couldn't find slave S1"))
			},
			wantRoute: "GET /api/slaves/slave/{slaveId}/details", status: 404},
		{name: "a panicking request logs status 500", path: "/api/slaves/slave/S1/details",
			handler:   func(http.ResponseWriter, *http.Request) { panic("boom") },
			wantRoute: "GET /api/slaves/slave/{slaveId}/details", status: 500},
		{name: "a rejected path logs a 404 with no route", path: "/api/slaves/slave//details", wantRoute: "", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			h := tt.handler
			if h == nil {
				h = func(w http.ResponseWriter, r *http.Request) { web.JSON(w, http.StatusOK, []string{}) }
			}
			mux.Handle("GET /api/slaves/slave/{slaveId}/details", h)
			var logs bytes.Buffer
			srv := web.Wrap(mux, web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RequestID: fixedID("req-1")})
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.status {
				t.Fatalf("got status %d, want %d", rec.Code, tt.status)
			}

			reqs := linesWithMsg(logLines(t, &logs), "request")
			if len(reqs) != 1 {
				t.Fatalf("got %d request log lines, want 1: %s", len(reqs), logs.String())
			}
			line := reqs[0]
			want := map[string]any{
				"request_id": "req-1",
				"status":     float64(tt.status),
				"route":      tt.wantRoute,
				"method":     "GET",
				"path":       tt.path,
			}
			for k, v := range want {
				if line[k] != v {
					t.Errorf("got %s=%v, want %v", k, line[k], v)
				}
			}
			if _, ok := line["latency_ms"].(float64); !ok {
				t.Errorf("got latency_ms=%v, want a number", line["latency_ms"])
			}
		})
	}
}

func TestJSONAndOK(t *testing.T) {
	t.Run("JSON writes the status, the body and the content type", func(t *testing.T) {
		rec := httptest.NewRecorder()
		web.JSON(rec, http.StatusCreated, map[string]int{"n": 1})
		if rec.Code != http.StatusCreated || rec.Body.String() != `{"n":1}` {
			t.Errorf("got %d %s, want 201 {\"n\":1}", rec.Code, rec.Body.String())
		}
		if got := rec.Header().Get("Content-Type"); got != "application/json" {
			t.Errorf("got Content-Type %q, want application/json", got)
		}
	})
	t.Run("OK writes an empty 200", func(t *testing.T) {
		rec := httptest.NewRecorder()
		web.OK(rec)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != http.StatusOK || len(body) != 0 {
			t.Errorf("got %d %q, want 200 with an empty body", rec.Code, body)
		}
	})
}

func TestWrapCompressesLargeBodiesForClientsThatAcceptGzip(t *testing.T) {
	big := make([]string, 2000)
	for i := range big {
		big[i] = fmt.Sprintf("slave-%d", i)
	}
	h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			web.JSON(w, http.StatusOK, big)
		case "/small":
			web.JSON(w, http.StatusOK, []string{"one"})
		case "/empty":
			web.OK(w)
		default:
			web.Error(w, r, fault.NotFound("%s", strings.Repeat("x", 8000)))
		}
	}), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	tests := []struct {
		name, path, accept string
		status             int
		gzipped            bool
	}{
		{"a large body for a gzip client is compressed", "/big", "gzip, deflate, br", 200, true},
		{"gzip is matched whatever its case and weight", "/big", "br;q=1.0, GZIP;q=0.5", 200, true},
		{"a large error keeps its status when compressed", "/missing", "gzip", 404, true},
		{"a small body is sent as it is", "/small", "gzip", 200, false},
		{"an empty 200 still goes out", "/empty", "gzip", 200, false},
		{"a client that refuses gzip gets plain JSON", "/big", "gzip;q=0, identity", 200, false},
		{"a client that says nothing gets plain JSON", "/big", "", 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			if tt.accept != "" {
				req.Header.Set("Accept-Encoding", tt.accept)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("got status %d, want %d", rec.Code, tt.status)
			}
			if got := rec.Header().Get("Content-Encoding") == "gzip"; got != tt.gzipped {
				t.Fatalf("got gzip %v, want %v", got, tt.gzipped)
			}
			if got := rec.Header().Get("Vary"); got != "Accept-Encoding" {
				t.Errorf("got Vary %q, want Accept-Encoding", got)
			}
			body := rec.Body.Bytes()
			if tt.gzipped {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if tt.path != "/empty" && !json.Valid(body) {
				t.Errorf("got %.80q, want JSON once decompressed", body)
			}
		})
	}
}

// emfDocs parses the EMF documents in buf, keyed by the metrics each holds.
func emfDocs(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	docs := logLines(t, buf)
	for _, d := range docs {
		if _, ok := d["_aws"].(map[string]any); !ok {
			t.Fatalf("got %v, want an EMF document with _aws", d)
		}
	}
	return docs
}

func TestWrapLogLineCarriesNotesAndBackendCalls(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/slaves/slave/{slaveId}/freeze", func(w http.ResponseWriter, r *http.Request) {
		web.Note(r, "slave_id", r.PathValue("slaveId"))
		web.Note(r, "user", "ops")
		web.Note(r, "empty", "")
		calls := callcount.From(r.Context())
		calls.Add(false)
		calls.Add(true)
		calls.Add(false)
		web.OK(w)
	})
	var logs, emf bytes.Buffer
	m, err := metrics.New(&emf, "Fleet", "fleet-SlavesFunction-1")
	if err != nil {
		t.Fatal(err)
	}
	h := web.Wrap(mux, web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RequestID: fixedID("req-7"), Metrics: m})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/slaves/slave/S1/freeze", strings.NewReader(`{"message":"secret body"}`)))

	reqs := linesWithMsg(logLines(t, &logs), "request")
	if len(reqs) != 1 {
		t.Fatalf("got %d request lines, want 1: %s", len(reqs), logs.String())
	}
	want := map[string]any{"request_id": "req-7", "route": "POST /api/slaves/slave/{slaveId}/freeze", "status": 200.0,
		"slave_id": "S1", "user": "ops", "backend_calls": 3.0, "throttled_calls": 1.0}
	for k, v := range want {
		if reqs[0][k] != v {
			t.Errorf("got %s=%v, want %v", k, reqs[0][k], v)
		}
	}
	if _, ok := reqs[0]["empty"]; ok {
		t.Errorf("got an empty note on the line, want it left out")
	}
	if strings.Contains(logs.String(), "secret body") {
		t.Errorf("got the request body in the log: %s", logs.String())
	}

	var throttles float64
	for _, d := range emfDocs(t, &emf) {
		if v, ok := d[metrics.BackendThrottles].(float64); ok {
			throttles += v
		}
	}
	if throttles != 1 {
		t.Errorf("got BackendThrottles %v, want 1: %s", throttles, emf.String())
	}
}

// A client that gives up closes its connection, and net/http cancels the
// request's context: the handler's backend call fails with "context
// canceled". That is the client's doing, not the service's: a 499 at INFO,
// no "request failed" at ERROR, no server error counted.
func TestAClientThatGoesAwayIsA499AtInfoAndNoServerError(t *testing.T) {
	var logs, emf bytes.Buffer
	m, _ := metrics.New(&emf, "Fleet", "fleet-SlavesFunction-1")
	arrived, served := make(chan struct{}), make(chan struct{})
	h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		// As the SDK words a call cut by its context.
		web.Error(w, r, fmt.Errorf("list slaves: operation error DynamoDB: Scan, %w", r.Context().Err()))
	}), web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RequestID: fixedID("req-7"), Metrics: m})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/slaves", nil)
	gaveUp := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gaveUp <- err
	}()
	<-arrived
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v from the client, want it to have given up", err)
	}
	select {
	case <-served:
	case <-time.After(time.Minute):
		t.Fatal("the handler still runs a minute after its client went away")
	}

	lines := logLines(t, &logs)
	for _, l := range lines {
		if l["level"] != "INFO" {
			t.Errorf("got a %v line, want only INFO: %v", l["level"], l)
		}
	}
	gone := linesWithMsg(lines, "client went away")
	if len(gone) != 1 || gone[0]["status"] != float64(499) || gone[0]["request_id"] != "req-7" || !strings.Contains(fmt.Sprint(gone[0]["error"]), "context canceled") {
		t.Errorf("got %v, want one line saying the client of req-7 went away (499, context canceled)", gone)
	}
	if reqs := linesWithMsg(lines, "request"); len(reqs) != 1 || reqs[0]["status"] != float64(499) {
		t.Errorf("got request lines %v, want one with status 499", reqs)
	}
	for _, d := range emfDocs(t, &emf) {
		if _, ok := d[metrics.ServerErrors]; ok {
			t.Errorf("got %v, want no server error counted", d)
		}
	}
}

func TestWrapCountsColdStartsAndServerErrors(t *testing.T) {
	var emf bytes.Buffer
	m, _ := metrics.New(&emf, "Fleet", "fleet-LogsFunction-1")
	h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/boom":
			web.Error(w, r, errors.New("dynamodb: broken"))
		case "/slow":
			web.Error(w, r, fault.Timeout("Timed out"))
		case "/missing":
			web.Error(w, r, fault.NotFound("gone"))
		default:
			web.OK(w)
		}
	}), web.Options{Logger: slog.New(slog.DiscardHandler), Metrics: m})
	for _, p := range []string{"/ok", "/boom", "/missing", "/slow", "/ok"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}

	counts := map[string]float64{}
	for _, d := range emfDocs(t, &emf) {
		if d["Function"] != "fleet-LogsFunction-1" {
			t.Errorf("got Function %v, want fleet-LogsFunction-1", d["Function"])
		}
		for _, name := range []string{metrics.ColdStarts, metrics.ServerErrors, metrics.BackendThrottles} {
			if v, ok := d[name].(float64); ok {
				counts[name] += v
			}
		}
	}
	want := map[string]float64{metrics.ColdStarts: 1, metrics.ServerErrors: 2}
	if !maps.Equal(counts, want) {
		t.Errorf("got %v, want %v (one cold start, a 500 and a 504)", counts, want)
	}
}

func TestHandlersReachTheMetricsOfWrap(t *testing.T) {
	var emf bytes.Buffer
	m, _ := metrics.New(&emf, "Fleet", "f")
	var got *metrics.Emitter
	h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = web.Metrics(r)
		web.OK(w)
	}), web.Options{Logger: slog.New(slog.DiscardHandler), Metrics: m})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if got != m {
		t.Errorf("got emitter %p, want Options.Metrics %p", got, m)
	}

	outside := httptest.NewRequest(http.MethodGet, "/", nil)
	web.Note(outside, "user", "nobody") // outside Wrap: nothing to add to, and no panic
	if web.Metrics(outside) != nil {
		t.Errorf("got an emitter outside Wrap, want nil")
	}
}

func TestOutcomeNamesTheStatusClass(t *testing.T) {
	for status, want := range map[int]string{200: "ok", 204: "ok", 304: "ok", 400: "refused", 404: "refused", 409: "refused",
		500: "failed", 503: "failed", 504: "failed"} {
		if got := web.Outcome(status); got != want {
			t.Errorf("Outcome(%d): got %q, want %q", status, got, want)
		}
	}
}

// An array is compressed from 4 KiB of JSON on, as any other body: the
// bytes right at the threshold decide, however the elements add up to them.
func TestAnArrayIsCompressedFromTheSameSizeAsAnyBody(t *testing.T) {
	const threshold = 4 << 10
	// short elements, then one padded to make the body exactly size bytes.
	array := func(size int) []string {
		var out []string
		for range (size - 100) / 13 {
			out = append(out, "xxxxxxxxxx")
		}
		out = append(out, "")
		b, _ := json.Marshal(out)
		out[len(out)-1] = strings.Repeat("y", size-len(b))
		return out
	}
	for _, tt := range []struct {
		size int
		want bool
	}{{threshold - 1, false}, {threshold, true}, {threshold + 1, true}} {
		elems := array(tt.size)
		if b, _ := json.Marshal(elems); len(b) != tt.size {
			t.Fatalf("the test's array is %d bytes, want %d", len(b), tt.size)
		}
		h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { web.JSON(w, http.StatusOK, elems) }),
			web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("Content-Encoding") == "gzip"; got != tt.want {
			t.Errorf("an array of %d bytes: got gzip %v, want %v", tt.size, got, tt.want)
		}
	}
}
