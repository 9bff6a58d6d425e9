package slaves_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// conditionally sends a request as an admin with the If-Match header
// ifMatch ("" for none).
func conditionally(f *memstore.Store, method, path, ifMatch string) *httptest.ResponseRecorder {
	h := web.Wrap(slaves.New(f, fuzzPolicy(authAdmin), fuzzLimits), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r := httptest.NewRequestWithContext(fuzzCaller(context.Background(), authAdmin), method, path, nil)
	if ifMatch != "" {
		r.Header.Set("If-Match", ifMatch)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// seen is a slave's details as an operator reads them: the body's sequence
// and the ETag.
func seen(t *testing.T, f *memstore.Store, id string) (sequence int64, etag string) {
	t.Helper()
	rec := conditionally(f, http.MethodGet, "/api/slaves/slave/"+id+"/details", "")
	var body struct{ Sequence *int64 }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); rec.Code != 200 || err != nil || body.Sequence == nil {
		t.Fatalf("details: got %d %s, want 200 with a sequence", rec.Code, rec.Body)
	}
	if want := strconv.Quote(strconv.FormatInt(*body.Sequence, 10)); rec.Header().Get("ETag") != want {
		t.Fatalf("ETag %q, want %s", rec.Header().Get("ETag"), want)
	}
	return *body.Sequence, rec.Header().Get("ETag")
}

// A change that says what it saw (If-Match) is made only while the slave is
// still as it was seen; otherwise it is a 412 that says where the slave is
// now, and nothing changes.
func TestAConditionalChangeIsMadeOnlyOnTheSlaveItWasDecidedOn(t *testing.T) {
	slave := func(id, action string) string { return "/api/slaves/slave/" + id + "/" + action }
	routes := []struct{ name, method, path string }{
		{"freeze", http.MethodPost, slave(activeID, "freeze")},
		{"decommission", http.MethodPost, slave(activeID, "decommission")},
		{"activate", http.MethodPost, slave(frozenID, "activate")},
		{"delete", http.MethodDelete, "/api/slaves/slave/" + activeID},
		{"delete expiring", http.MethodDelete, slave(frozenID, "expiring")},
	}
	for _, rt := range routes {
		t.Run(rt.name+" with the sequence seen is made", func(t *testing.T) {
			f := newFleet(false)
			conditionally(f, http.MethodPost, slave(deadID, "freeze"), "") // sequences start past 0
			id := strings.Split(rt.path, "/")[4]
			_, etag := seen(t, f, id)
			if rec := conditionally(f, rt.method, rt.path, etag); rec.Code != 200 {
				t.Errorf("got %d %s, want 200", rec.Code, rec.Body)
			}
		})
		t.Run(rt.name+" after the slave moved is a 412 and changes nothing", func(t *testing.T) {
			f := newFleet(false)
			id := strings.Split(rt.path, "/")[4]
			before, _ := seen(t, f, id)
			// Another operator changes the slave meanwhile (a description
			// would do too: anything the feed shows moves the sequence).
			other := "freeze"
			if id == frozenID {
				other = "decommission"
			}
			if rec := conditionally(f, http.MethodPost, slave(id, other), ""); rec.Code != 200 {
				t.Fatalf("the other operator's %s: got %d %s", other, rec.Code, rec.Body)
			}
			now, _ := seen(t, f, id)
			state := fleetState(t, f)
			rec := conditionally(f, rt.method, rt.path, strconv.FormatInt(before, 10))
			var body web.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 412 || body.Code != 412 ||
				body.Sequence == nil || *body.Sequence != now || body.State == "" || !strings.Contains(body.Message, "moved since sequence") {
				t.Errorf("got %d %s, want 412 with sequence %d and the state", rec.Code, rec.Body, now)
			}
			if after := fleetState(t, f); after != state {
				t.Errorf("a refused change wrote:\n%s\nwant\n%s", after, state)
			}
		})
	}
	t.Run("a header that is not a sequence is a 400 and changes nothing", func(t *testing.T) {
		f := newFleet(false)
		state := fleetState(t, f)
		for _, v := range []string{"abc", `"-1"`, "1.5", `W/"x"`} {
			if rec := conditionally(f, http.MethodPost, slave(activeID, "freeze"), v); rec.Code != 400 || !strings.Contains(rec.Body.String(), "If-Match") {
				t.Errorf("If-Match %s: got %d %s, want 400 naming If-Match", v, rec.Code, rec.Body)
			}
		}
		if after := fleetState(t, f); after != state {
			t.Errorf("a refused change wrote:\n%s\nwant\n%s", after, state)
		}
	})
	t.Run("* matches any sequence", func(t *testing.T) {
		f := newFleet(false)
		if rec := conditionally(f, http.MethodPost, slave(activeID, "freeze"), "*"); rec.Code != 200 {
			t.Errorf("got %d %s, want 200", rec.Code, rec.Body)
		}
	})
}

// Two operators who saw the same slave change it at once, each only if it
// is still as they saw it: exactly one change is made, and the other is told
// where the slave went.
func TestOfTwoConditionalChangesRacingExactlyOneIsMade(t *testing.T) {
	for range 20 {
		f := newFleet(false)
		_, etag := seen(t, f, activeID)
		codes := make([]int, 2)
		var wg sync.WaitGroup
		for i, action := range []string{"freeze", "decommission"} {
			wg.Go(func() {
				codes[i] = conditionally(f, http.MethodPost, "/api/slaves/slave/"+activeID+"/"+action, etag).Code
			})
		}
		wg.Wait()
		if codes[0]+codes[1] != 200+412 {
			t.Fatalf("got %v, want one 200 and one 412", codes)
		}
		if n := len(entries(t, f, activeID)); n != 3 {
			t.Fatalf("got %d history entries, want 3: the seeded two and one change", n)
		}
	}
}
