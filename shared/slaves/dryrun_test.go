package slaves_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// change sends a change through the route table behind the authorizer, as
// the caller mode names (authAdmin, authReader).
func change(f *memstore.Store, mode byte, path, query, key, body string) *httptest.ResponseRecorder {
	h := web.Wrap(slaves.New(f, fuzzPolicy(mode), fuzzLimits), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r := httptest.NewRequestWithContext(fuzzCaller(context.Background(), mode), http.MethodPost, path+query, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// fleetState is everything a change could write: every slave, its history
// and the expiring records.
func fleetState(t *testing.T, f *memstore.Store) string {
	t.Helper()
	var b strings.Builder
	for _, id := range []string{activeID, frozenID, startingID, retiredID, deadID, missingID, drainingID} {
		s, err := f.Get(t.Context(), id)
		if err != nil && !strings.Contains(err.Error(), "FAILURE_NOT_FOUND") {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%+v\n%+v\n", s, entries(t, f, id))
	}
	exp, err := f.ListExpiring(t.Context(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(exp) // the records' values, not their pointers' addresses
	if err != nil {
		t.Fatal(err)
	}
	b.Write(raw)
	return b.String()
}

// A dry run is decided by the change's own code: it answers what the change
// answers, refusals word for word, and writes nothing.
func TestADryRunAnswersAsTheChangeWouldAndWritesNothing(t *testing.T) {
	slave := func(id, action string) string { return "/api/slaves/slave/" + id + "/" + action }
	tests := []struct {
		name, path, body string
		mode             byte
		status           int
	}{
		{"a legal freeze would be applied", slave(activeID, "freeze"), "", authAdmin, 200},
		{"a legal expiring decommission would be applied", slave(activeID, "decommission"), `{"durationMillis":60000,"revertToState":"ACTIVE"}`, authAdmin, 200},
		{"a freeze of a frozen slave is refused as already there", slave(frozenID, "freeze"), "", authAdmin, 409},
		{"a freeze of a draining slave is refused as illegal", slave(startingID, "freeze"), "", authAdmin, 409},
		{"an unknown slave is not found", slave("20261121-051400-16777343-5050-1234-S99", "activate"), "", authAdmin, 404},
		{"an expiring change past the service's longest is refused", slave(activeID, "freeze"), `{"durationMillis":2592000001}`, authAdmin, 400},
		{"a body that is not JSON is refused", slave(activeID, "freeze"), `{"message":`, authAdmin, 400},
		{"a reader may not ask", slave(activeID, "freeze"), "", authReader, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dryFleet, realFleet := newFleet(false), newFleet(false)
			before := fleetState(t, dryFleet)
			dry := change(dryFleet, tt.mode, tt.path, "?dryRun=true", "", tt.body)
			if dry.Code != tt.status {
				t.Errorf("dry run: got %d %s, want %d", dry.Code, dry.Body, tt.status)
			}
			if after := fleetState(t, dryFleet); after != before {
				t.Errorf("the dry run wrote:\nbefore %s\nafter  %s", before, after)
			}
			real := change(realFleet, tt.mode, tt.path, "", "", tt.body)
			if real.Code != dry.Code || real.Body.String() != dry.Body.String() {
				t.Errorf("got the change's %d %q, the dry run's %d %q: want the same", real.Code, real.Body, dry.Code, dry.Body)
			}
		})
	}
}

func TestADryRunKeepsNoReceipt(t *testing.T) {
	f := newFleet(false)
	path := "/api/slaves/slave/" + frozenID + "/freeze"
	if rec := change(f, authAdmin, path, "?dryRun=true", "k1", ""); rec.Code != 409 {
		t.Fatalf("dry run: got %d %s, want 409", rec.Code, rec.Body)
	}
	// Had the dry run's refusal been remembered under k1, this other
	// request would be a 409 for a reused key.
	if rec := change(f, authAdmin, "/api/slaves/slave/"+activeID+"/freeze", "", "k1", ""); rec.Code != 200 {
		t.Errorf("the change after a dry run under the same key: got %d %s, want 200", rec.Code, rec.Body)
	}
}

func TestADryRunFlagOtherThanTrueOrFalseIsRefused(t *testing.T) {
	for _, q := range []string{"?dryRun=yes", "?dryRun=1", "?dryRun=", "?dryRun=TRUE"} {
		t.Run(q, func(t *testing.T) {
			f := newFleet(false)
			before := fleetState(t, f)
			rec := change(f, authAdmin, "/api/slaves/slave/"+activeID+"/freeze", q, "", "")
			want := 400
			if q == "?dryRun=" {
				want = 200 // empty is the flag's absence: the change itself
			}
			if rec.Code != want {
				t.Errorf("got %d %s, want %d", rec.Code, rec.Body, want)
			}
			if want == 400 && fleetState(t, f) != before {
				t.Error("a refused dry-run flag changed the fleet")
			}
		})
	}
}

// dryRun=false is the change itself; dryRun=true of a change that would be
// applied leaves the slave where it was.
func TestADryRunLeavesTheSlaveWhereItWas(t *testing.T) {
	f := newFleet(false)
	if rec := change(f, authAdmin, "/api/slaves/slave/"+activeID+"/freeze", "?dryRun=false", "", ""); rec.Code != 200 {
		t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
	}
	if s, _ := f.Get(t.Context(), activeID); s == nil || s.Current.State != "FROZEN" {
		t.Errorf("dryRun=false: got %+v, want the change applied", s)
	}
	if rec := change(f, authAdmin, "/api/slaves/slave/"+activeID+"/activate", "?dryRun=true", "", ""); rec.Code != 200 {
		t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
	}
	if s, _ := f.Get(t.Context(), activeID); s == nil || s.Current.State != "FROZEN" {
		t.Errorf("dryRun=true: got %+v, want the slave still FROZEN", s)
	}
}
