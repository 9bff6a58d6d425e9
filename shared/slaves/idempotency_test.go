package slaves_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// keyed sends a change as caller with an Idempotency-Key, through the route
// table behind the authorizer.
func keyed(t *testing.T, f *memstore.Store, caller access.Identity, path, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	h := web.Wrap(slaves.New(f, fuzzPolicy(authAdmin), fuzzLimits), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r := httptest.NewRequestWithContext(access.WithIdentity(context.Background(), caller), http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// TestAnIdempotencyKeyNamesOneRequestOfOneCaller checks the scope of a key
// (docs/behaviour.md "User changes"): a caller's key names one change
// request whatever slave or action it is for, and another caller's same key
// is another request.
func TestAnIdempotencyKeyNamesOneRequestOfOneCaller(t *testing.T) {
	ops := access.Identity{ID: "ops", Email: "ops@example.com", Groups: []string{"admins"}}
	dev := access.Identity{ID: "dev", Email: "dev@example.com", Groups: []string{"admins"}}
	const reused = `{"code":409,"message":"Idempotency key k1 was already used for a different request"}` + "\n"
	freeze := func(id string) string { return "/api/slaves/slave/" + id + "/freeze" }

	t.Run("the same key for another slave is a 409 and changes nothing", func(t *testing.T) {
		f := newFleet(false)
		if rec := keyed(t, f, ops, freeze(activeID), "k1", ""); rec.Code != 200 {
			t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
		}
		before := entries(t, f, startingID)
		if rec := keyed(t, f, ops, "/api/slaves/slave/"+startingID+"/activate", "k1", ""); rec.Code != 409 || rec.Body.String() != reused {
			t.Errorf("got %d %s, want 409 %s", rec.Code, rec.Body, reused)
		}
		if after := entries(t, f, startingID); len(after) != len(before) || after[0] != before[0] {
			t.Errorf("got history %+v, want %+v", after, before)
		}
	})
	t.Run("a retry of the same request is answered as the first was", func(t *testing.T) {
		f := newFleet(false)
		for range 2 {
			if rec := keyed(t, f, ops, freeze(activeID), "k1", `{"message":"patch"}`); rec.Code != 200 {
				t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
			}
		}
		if got := len(entries(t, f, activeID)); got != 3 {
			t.Errorf("got %d history entries, want 3: the retry applies nothing", got)
		}
	})
	t.Run("another caller's same key is its own request", func(t *testing.T) {
		f := newFleet(false)
		if rec := keyed(t, f, ops, freeze(activeID), "k1", ""); rec.Code != 200 {
			t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
		}
		if rec := keyed(t, f, dev, "/api/slaves/slave/"+startingID+"/activate", "k1", ""); rec.Code != 200 {
			t.Errorf("got %d %s, want 200: another caller's key is independent", rec.Code, rec.Body)
		}
	})
	t.Run("another caller's same key never replays the first caller's answer", func(t *testing.T) {
		f := newFleet(false)
		if rec := keyed(t, f, ops, freeze(activeID), "k1", ""); rec.Code != 200 {
			t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
		}
		// The same request under the same key, from another caller, is
		// decided for that caller: the slave is FROZEN already.
		rec := keyed(t, f, dev, freeze(activeID), "k1", "")
		if want := `{"code":409,"message":"FAILURE_ALREADY_AT_STATE - Slave ` + activeID + ` is in FROZEN state"}` + "\n"; rec.Code != 409 || rec.Body.String() != want {
			t.Errorf("got %d %s, want 409 %s, never the first caller's answer", rec.Code, rec.Body, want)
		}
	})
}
