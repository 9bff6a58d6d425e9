package slaves_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// The fuzz target's names stay clear of integration_test.go's (store,
// limits, call, ...), which shares this package under -tags integration.

var fuzzLimits = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}

// Slave ids of the fleet every fuzz input starts from.
const (
	activeID    = "20261121-051400-16777343-5050-1234-S1"
	frozenID    = "20261121-051400-16777343-5050-1234-S2" // with an expiring record reverting to ACTIVE
	startingID  = "20261121-051400-16777343-5050-1234-S3"
	retiredID   = "20261121-051400-16777343-5050-1234-S4" // DECOMMISSIONED
	deadID      = "20261121-051400-16777343-5050-1234-S5"
	missingID   = "20261121-051400-16777343-5050-1234-S6"
	drainingID  = "20261121-051400-16777343-5050-1234-S7" // DECOMMISSIONING, only in a fleet at the limit
	seededAt    = int64(1_763_702_040_000)                // 2025-11-21T05:14Z
	fuzzKey     = "3f1c9e1e-0000-4000-8000-000000000001"
	fuzzFreeze  = "/api/slaves/slave/" + activeID + "/freeze"
	fuzzDetails = "/api/slaves/slave/" + activeID + "/details"
)

// The mode byte of a fuzz input: its low two bits say who calls, bit 2 puts
// the fleet at the decommission limit.
const (
	authOff      byte = 0 // AUTH_MODE none
	authAdmin    byte = 1 // behind the authorizer, in an admin group
	authReader   byte = 2 // behind the authorizer, in a read group only
	authNobody   byte = 3 // behind the authorizer, with no identity
	fleetAtLimit byte = 4
)

// FuzzRoutes sends arbitrary requests through the real route table, the way API
// Gateway and the edge would deliver them, and checks docs/behaviour.md "Wire
// conventions" on every answer: never a panic or a 5xx (the store never fails),
// always Content-Type application/json, errors as {"code", "message"}, reads as
// JSON and changes as an empty 200, and every answer matches openapi.yaml. Each
// request is sent twice, as a client retrying would, and a change request that
// names itself (Idempotency-Key or actionId) must get the same answer the second
// time.
func FuzzRoutes(f *testing.F) {
	seeds := []struct {
		method, path, query, header, body string
		mode                              byte
	}{
		{"GET", "/api/slaves", "", "", "", authOff},
		{"GET", "/api/slaves/", "state=starting-decommission", "", "", authReader},
		{"GET", "/api/slaves", "state=nope&state=ACTIVE", "", "", authAdmin},
		{"GET", "/api/slaves/expiring", "", "", `{"id":"u","name":"U","groups":["admins"],"authenticated":true}`, authOff},
		{"GET", fuzzDetails, "", "", "", authReader},
		{"GET", "/api/slaves/slave/" + frozenID, "", "", "null", authOff},
		{"GET", "/api/slaves/slave/" + frozenID, "limit=1", "", "", authReader},
		{"GET", "/api/slaves/slave/" + frozenID, "limit=10001", "", "", authOff},
		{"GET", "/api/slaves/slave/a%2Fb/details", "", "", "", authOff},
		{"GET", "/api/slaves/slave/" + activeID + "/details", "", "", "{", authNobody},
		{"POST", fuzzFreeze, "", "", `{"message":"kernel patch"}`, authAdmin},
		{"POST", fuzzFreeze, "", "", `{"message":"` + strings.Repeat("é", slaves.MaxMessage+1) + `"}`, authAdmin},
		{"POST", fuzzFreeze, "", fuzzKey, `{"message":"kernel patch"}`, authOff},
		{"POST", fuzzFreeze, "", "", `{"durationMillis":3600000,"revertToState":"ACTIVE","actionId":"change-1"}`, authAdmin},
		{"POST", "/api/slaves/slave/" + frozenID + "/freeze", "", "", `{"durationMillis":60000,"revertToState":"ACTIVE"}`, authAdmin},
		{"POST", "/api/slaves/slave/" + activeID + "/decommission", "", fuzzKey, `{"message":"retire"}`, authAdmin},
		{"POST", "/api/slaves/slave/" + activeID + "/decommission", "", fuzzKey, "", authAdmin | fleetAtLimit},
		{"POST", "/api/slaves/slave/" + retiredID + "/decommission", "", "", `{"durationMillis":1,"revertToState":"DECOMMISSIONED","killTasksOnDecommissionTimeout":true}`, authAdmin},
		{"POST", "/api/slaves/slave/" + startingID + "/activate", "", "", `{"revertToState":"frozen","durationMillis":-1}`, authOff},
		{"POST", "/api/slaves/slave/" + deadID + "/activate", "", strings.Repeat("k", 256), "", authOff},
		{"POST", "/api/slaves/slave/nope/freeze", "", "", `{"message":7}`, authReader},
		{"DELETE", "/api/slaves/slave/" + deadID, "", "", "", authAdmin},
		{"DELETE", "/api/slaves/slave/" + frozenID + "/expiring", "", "", "[]", authOff},
		{"DELETE", "/api/slaves/dead", "", "", "", authReader},
		{"PUT", "/api/slaves//slave/x", "", "", "", authOff},
		{"HEAD", "/api/slaves/slave/%2e%2e", "", "", "", authOff},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.header, []byte(s.body), s.mode)
	}
	f.Add("POST", fuzzFreeze, "", "", bytes.Repeat([]byte(" "), web.MaxBody+1), authOff)
	doc := apidoc.MustLoad(f)
	f.Fuzz(func(t *testing.T, method, path, query, header string, body []byte, mode byte) {
		target, ok := requestTarget(path, query)
		if !ok {
			t.Skip("not a request-target a server would accept")
		}
		var logs bytes.Buffer
		h := web.Wrap(slaves.New(newFleet(mode&fleetAtLimit != 0), fuzzPolicy(mode), fuzzLimits),
			web.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		var answers [2]*httptest.ResponseRecorder
		for i := range answers {
			r, err := http.NewRequestWithContext(fuzzCaller(context.Background(), mode), method, "/", bytes.NewReader(body))
			if err != nil {
				t.Skip("not a valid method")
			}
			r.URL, r.RequestURI = target, target.RequestURI()
			if header != "" {
				r.Header.Set("Idempotency-Key", header)
			}
			answers[i] = httptest.NewRecorder()
			h.ServeHTTP(answers[i], r)
			checkAnswer(t, r.Method, answers[i], &logs) // NewRequest reads "" as GET
			if err := doc.CheckAny(r, answers[i].Code, answers[i].Header(), answers[i].Body.Bytes()); err != nil {
				t.Errorf("%s %s: %v", r.Method, target, err)
			}
		}
		first, retry := answers[0], answers[1]
		// Only the Idempotency-Key header names a request for retries; an
		// actionId is the caller's metadata, so a change repeated with the
		// same actionId is decided again.
		if method == http.MethodPost && strings.TrimSpace(header) != "" &&
			(retry.Code != first.Code || retry.Body.String() != first.Body.String()) {
			t.Errorf("retry of a named change: got %d %s, want the first answer %d %s",
				retry.Code, retry.Body, first.Code, first.Body)
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

// checkAnswer checks one answer against docs/behaviour.md "Wire conventions". logs holds what the
// handler logged, which names the internal error behind a 5xx.
func checkAnswer(t *testing.T, method string, rec *httptest.ResponseRecorder, logs *bytes.Buffer) {
	t.Helper()
	status, body := rec.Code, rec.Body.Bytes()
	if status >= 500 {
		t.Fatalf("got %d %s, want no 5xx from a store that never fails; logged:\n%s", status, body, logs)
	}
	// A body is JSON and says so; an empty one, a change's 200, names no
	// type (a validating proxy refuses a JSON type on no body).
	if ct, want := rec.Header().Get("Content-Type"), map[bool]string{true: "application/json", false: ""}[len(body) > 0]; ct != want {
		t.Errorf("got Content-Type %q on %d %q, want %q", ct, status, body, want)
	}
	switch {
	case status < 200 || status > 299:
		checkErrorBody(t, status, body)
	case method == http.MethodGet || method == http.MethodHead:
		if !json.Valid(body) {
			t.Errorf("got %d with body %q, want JSON", status, body)
		}
	case len(body) != 0:
		t.Errorf("got %d with body %q, want an empty body for a change", status, body)
	}
}

// checkErrorBody checks that body is exactly {"code": status, "message": ...}
// with a message.
func checkErrorBody(t *testing.T, status int, body []byte) {
	t.Helper()
	var e web.ErrorBody
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil || d.More() {
		t.Fatalf("got %d with body %q, want a JSON error body (%v)", status, body, err)
	}
	if e.Code != status || e.Message == "" {
		t.Errorf("got error body %+v on %d, want code %d and a message", e, status, status)
	}
}

// fuzzPolicy is the access policy the mode byte names.
func fuzzPolicy(mode byte) access.Policy {
	if mode&3 == authOff {
		return access.Policy{Mode: access.ModeNone}
	}
	return access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admins"}, ReadGroups: []string{"readers"}}
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

// newFleet returns a store with a slave in every state; atLimit adds a
// second decommissioning slave, which fills the limit of fuzzLimits.
func newFleet(atLimit bool) *memstore.Store {
	store := memstore.New(0)
	states := map[string]machine.State{activeID: machine.Active, frozenID: machine.Frozen, startingID: machine.StartingDecommission,
		retiredID: machine.Decommissioned, deadID: machine.Dead, missingID: machine.MissingOnStartup}
	if atLimit {
		states[drainingID] = machine.Decommissioning
	}
	for id, state := range states {
		first := machine.Update{SlaveID: id, State: machine.Active, Timestamp: seededAt, Message: "New machine reported"}
		current := machine.Update{SlaveID: id, State: state, Timestamp: seededAt + 60_000, User: "ops@example.com", Message: "seeded"}
		store.Put(machine.Slave{ID: id, FirstSeenAt: seededAt, Current: current, Host: "node.example.com", RackID: "us-east-1a",
			Attributes: map[string]string{"instance_type": "m5.4xlarge"}, Resources: json.RawMessage(`{"cpus":16,"mem":63000}`)}, first, current)
	}
	store.PutExpiring(machine.Expiring{MachineID: frozenID, User: "ops@example.com", StartMillis: seededAt + 60_000,
		ActionID: "seeded-action", RevertTo: machine.Active,
		Request: machine.ChangeRequest{DurationMillis: new(int64(3_600_000)), RevertToState: new(machine.Active)}})
	return store
}
