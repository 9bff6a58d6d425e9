package logs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/web"
)

// The mode byte of a fuzz input: its low two bits say who calls, bit 2
// leaves LOG_BUCKETS empty.
const (
	authOff    byte = 0 // AUTH_MODE none
	authAdmin  byte = 1 // behind the authorizer, in an admin group
	authReader byte = 2 // behind the authorizer, in a read group only
	authNobody byte = 3 // behind the authorizer, with no identity
	noBuckets  byte = 4
)

// FuzzRoutes sends arbitrary requests through the real route table over logs in
// two buckets, and checks docs/behaviour.md "Wire conventions" on every answer:
// never a panic or a 5xx (the fake S3 answers at once, so not even a 504),
// always Content-Type application/json, errors as {"code", "message"}, a 200
// that is a JSON array of logs (lookups) or a search result, never cached, and
// every answer matches openapi.yaml.
func FuzzRoutes(f *testing.F) {
	seeds := []struct {
		method, path, query, body string
		mode                      byte
	}{
		{"GET", "/api/logs/task/" + taskID, "", "", authOff},
		{"GET", "/api/logs/task/" + taskID, fmt.Sprintf("start=%d&end=%d&list=TRUE&excludeMetadata=true", taskStart.UnixMilli(), taskStart.UnixMilli()+86_400_000), "", authReader},
		{"GET", "/api/logs/task/" + other, "start=0000000000000", `{"id":"u","groups":["readers"]}`, authAdmin},
		{"GET", "/api/logs/task/web%2F..-d1-1-0-h-r", "", "", authOff},
		{"GET", "/api/logs/task/" + taskID, "", "", authNobody},
		{"GET", "/api/logs/request/web-api", "maxPerPage=2", "", authOff},
		{"GET", "/api/logs/request/web-api", "maxPerPage=0&start=12345", "", authOff},
		{"GET", "/api/logs/request/web%25Y", "", "", authOff},
		{"GET", "/api/logs/request/web-api/deploy/d1", "end=9999999999999", "null", authOff},
		{"GET", "/api/logs/request/web-api/deploy/d-1", "", "", authOff},
		{"GET", "/api/logs/request/web-api", "", "", authOff | noBuckets},
		{"POST", "/api/logs/search", "", `{"taskIds":["` + taskID + `"]}`, authOff},
		{"POST", "/api/logs/search", "", `{"requestsAndDeploys":{"web-api":["d1","d2"]},"maxPerPage":1,"listOnly":true,"excludeMetadata":true}`, authReader},
		{"POST", "/api/logs/search", "", `{"requestsAndDeploys":{"web-api":[]},"continuationTokens":{"default-logs-a-web-api/2026/10/web-api-":{"value":"web-api/2026/10/web-api-d1","lastPage":false},"default-logs-b-web-api/2026/11/web-api-":{"lastPage":true}}}`, authOff},
		{"POST", "/api/logs/search", "", `{"taskIds":["` + taskID + `"],"fileNamePrefixWhitelist":["web-api/"],"fileNamePrefixAllowlist":["nothing"],"start":1,"end":2}`, authOff},
		{"POST", "/api/logs/search", "", `{"taskIds":["nope"],"maxPerPage":1001}`, authOff},
		{"POST", "/api/logs/search", "", "", authOff},
		{"POST", "/api/logs/search", "", `{"taskIds":"` + taskID + `"}`, authOff},
		{"POST", "/api/logs/search", "", `{"requestsAndDeploys":{"../x":[]}}`, authOff | noBuckets},
		{"DELETE", "/api/logs/task/" + taskID, "", "", authOff},
		{"GET", "/api/logs//task/x", "", "", authOff},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, []byte(s.body), s.mode)
	}
	store := &fakeStore{}
	uploaded(store, "logs-a", taskID, 3)
	uploaded(store, "logs-b", taskID, 2)
	uploaded(store, "logs-a", other, 40)
	doc := apidoc.MustLoad(f)
	handlers := map[byte]http.Handler{}
	for mode := range byte(8) {
		cfg := settings("logs-a", "logs-b")
		if mode&noBuckets != 0 {
			cfg = settings()
		}
		if mode&3 != authOff {
			cfg.Policy = access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admins"}, ReadGroups: []string{"readers"}}
		}
		handlers[mode] = routes(store, cfg)
	}
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte, mode byte) {
		target, ok := requestTarget(path, query)
		if !ok {
			t.Skip("not a request-target a server would accept")
		}
		r, err := http.NewRequestWithContext(fuzzCaller(context.Background(), mode), method, "/", bytes.NewReader(body))
		if err != nil {
			t.Skip("not a valid method")
		}
		r.URL, r.RequestURI = target, target.RequestURI()
		rec := httptest.NewRecorder()
		handlers[mode&7].ServeHTTP(rec, r)
		checkAnswer(t, rec, strings.HasPrefix(target.Path, "/api/logs/search"))
		if err := doc.CheckAny(r, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Errorf("%s %s: %v", r.Method, target, err)
		}
	})
}

// requestTarget reads path as the escaped path of a request line, as a
// server does, and adds the raw query. Paths a server would refuse, or
// that are not absolute, are not served.
func requestTarget(path, query string) (*url.URL, bool) {
	if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
		return nil, false
	}
	u, err := url.ParseRequestURI(path)
	if err != nil || u.Host != "" || u.Opaque != "" {
		return nil, false
	}
	u.RawQuery = query
	return u, true
}

// fuzzCaller returns ctx with the identity the edge would have found.
func fuzzCaller(ctx context.Context, mode byte) context.Context {
	switch mode & 3 {
	case authAdmin:
		return access.WithIdentity(ctx, access.Identity{ID: "ops", Email: "ops@example.com", Groups: []string{"admins"}})
	case authReader:
		return access.WithIdentity(ctx, access.Identity{ID: "viewer", Groups: []string{"readers"}})
	}
	return ctx
}

// checkAnswer checks one answer against docs/behaviour.md "Wire conventions" and
// docs/behaviour.md "Task logs"; a 200 of the search is a search result, any
// other 200 a list of logs.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, search bool) {
	t.Helper()
	status, body := rec.Code, rec.Body.Bytes()
	if status >= 500 {
		t.Fatalf("got %d %s, want no 5xx from a store that answers at once", status, body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q on %d %q, want application/json", ct, status, body)
	}
	if status < 200 || status > 299 {
		var e web.ErrorBody
		d := json.NewDecoder(bytes.NewReader(body))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil || d.More() {
			t.Fatalf("got %d with body %q, want a JSON error body (%v)", status, body, err)
		}
		if e.Code != status || e.Message == "" {
			t.Errorf("got error body %+v on %d, want code %d and a message", e, status, status)
		}
		return
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("got Cache-Control %q on %d, want no-store: the answer may hold presigned URLs", cc, status)
	}
	var err error
	if search {
		var p page
		err = json.Unmarshal(body, &p)
	} else {
		var entries []logEntry
		err = json.Unmarshal(body, &entries)
	}
	if err != nil {
		t.Errorf("got %d with body %q, want a %s (%v)", status, body, map[bool]string{true: "search result", false: "list of logs"}[search], err)
	}
}
