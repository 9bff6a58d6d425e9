package slaves_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// jsonLines parses every line of buf as a JSON object.
func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
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

func TestEveryRouteLogsItsSlaveAndUserAndChangesAreCountedByActionAndResult(t *testing.T) {
	var logs, emf bytes.Buffer
	m, err := metrics.New(&emf, "Fleet", "fleet-SlavesFunction-1")
	if err != nil {
		t.Fatal(err)
	}
	h := web.Wrap(slaves.New(newFleet(false), fuzzPolicy(authAdmin), fuzzLimits),
		web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: m})
	steps := []struct {
		method, path string
		caller       byte
		status       int
		slave        string // slave_id on the log line; "" for none
		user         string
		change       string // Action/Result of the StateChanges document; "" for none
	}{
		{"GET", "/api/slaves/slave/" + activeID + "/details", authReader, 200, activeID, "viewer", ""},
		{"GET", "/api/slaves", authReader, 200, "", "viewer", ""},
		{"POST", "/api/slaves/slave/" + activeID + "/freeze", authAdmin, 200, activeID, "ops", "freeze/ok"},
		{"POST", "/api/slaves/slave/" + activeID + "/freeze", authAdmin, 409, activeID, "ops", "freeze/refused"},
		{"POST", "/api/slaves/slave/" + activeID + "/decommission", authReader, 403, activeID, "viewer", "decommission/refused"},
		{"POST", "/api/slaves/slave/" + activeID + "/activate", authNobody, 401, activeID, "", "activate/refused"},
		{"POST", "/api/slaves/slave/" + activeID + "/activate", authAdmin, 200, activeID, "ops", "activate/ok"},
		{"DELETE", "/api/slaves/slave/" + frozenID + "/expiring", authAdmin, 200, frozenID, "ops", "delete-expiring/ok"},
		{"DELETE", "/api/slaves/slave/" + missingID + "-gone", authAdmin, 404, missingID + "-gone", "ops", "delete/refused"},
		{"DELETE", "/api/slaves/slave/" + deadID, authAdmin, 200, deadID, "ops", "delete/ok"},
		{"DELETE", "/api/slaves/dead", authAdmin, 200, "", "ops", "delete-dead/ok"},
	}
	var wantChanges []string
	for _, s := range steps {
		r := httptest.NewRequest(s.method, s.path, nil)
		r = r.WithContext(fuzzCaller(r.Context(), s.caller))
		r.Header.Set("Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.secret-token")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != s.status {
			t.Fatalf("%s %s: got %d %s, want %d", s.method, s.path, rec.Code, rec.Body.String(), s.status)
		}
		if s.change != "" {
			wantChanges = append(wantChanges, s.change)
		}
	}

	var lines []map[string]any
	for _, l := range jsonLines(t, &logs) {
		if l["msg"] == "request" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(steps) {
		t.Fatalf("got %d request lines, want %d", len(lines), len(steps))
	}
	for i, s := range steps {
		l := lines[i]
		if got, _ := l["slave_id"].(string); got != s.slave {
			t.Errorf("%s %s: got slave_id %q, want %q", s.method, s.path, got, s.slave)
		}
		if got, _ := l["user"].(string); got != s.user {
			t.Errorf("%s %s: got user %q, want %q", s.method, s.path, got, s.user)
		}
		if l["backend_calls"] != 0.0 {
			t.Errorf("%s %s: got backend_calls %v, want 0 (the store is in memory)", s.method, s.path, l["backend_calls"])
		}
	}
	if strings.Contains(logs.String(), "secret-token") {
		t.Errorf("got the Authorization header in the log")
	}

	var gotChanges []string
	for _, d := range jsonLines(t, &emf) {
		if _, ok := d[metrics.StateChanges]; !ok {
			continue
		}
		if d[metrics.StateChanges] != 1.0 || d["Function"] != "fleet-SlavesFunction-1" {
			t.Errorf("got %v, want StateChanges 1 of fleet-SlavesFunction-1", d)
		}
		gotChanges = append(gotChanges, d["Action"].(string)+"/"+d["Result"].(string))
	}
	if !slices.Equal(gotChanges, wantChanges) {
		t.Errorf("got StateChanges %v, want %v", gotChanges, wantChanges)
	}
}
