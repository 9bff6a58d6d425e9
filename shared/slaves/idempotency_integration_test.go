//go:build integration

package slaves_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
)

// withKey sends a change with an Idempotency-Key header.
func withKey(t *testing.T, h http.Handler, path, key, body string) response {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{rec.Code, rec.Body.String(), rec.Header()}
}

func TestIdempotentRetries(t *testing.T) {
	h := api(t, access.Policy{})

	t.Run("a retry with the same Idempotency-Key is answered, not applied again", func(t *testing.T) {
		id := seed(t, "idem-key", 1)[0]
		for range 3 {
			withKey(t, h, "/api/slaves/slave/"+id+"/freeze", "key-1", `{"message":"maintenance"}`).want(t, 200, "")
		}
		if got := len(history(t, h, id)); got != 2 {
			t.Errorf("got %d history entries, want 2 (report, one freeze)", got)
		}
	})
	t.Run("an actionId is metadata: reused for a legal change, that change is made", func(t *testing.T) {
		id := seed(t, "idem-action", 1)[0]
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"actionId":"CHG-1001"}`).want(t, 200, "")
		call(t, h, "POST", "/api/slaves/slave/"+id+"/activate", `{"actionId":"CHG-1001"}`).want(t, 200, "")
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"actionId":"CHG-1001"}`).want(t, 200, "")
		if got := state(t, h, id); got != "FROZEN" {
			t.Errorf("got %s, want FROZEN (the third change made)", got)
		}
		if got := len(history(t, h, id)); got != 4 {
			t.Errorf("got %d history entries, want 4 (report and three changes)", got)
		}
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"actionId":"CHG-1001"}`).
			wantError(t, 409, "FAILURE_ALREADY_AT_STATE - Slave "+id+" is in FROZEN state")
	})
	t.Run("a refusal is remembered: the retry gets it even after the state allows the change", func(t *testing.T) {
		id := seed(t, "idem-refusal", 1)[0]
		first := withKey(t, h, "/api/slaves/slave/"+id+"/activate", "key-2", "")
		first.wantError(t, 409, "FAILURE_ALREADY_AT_STATE - Slave "+id+" is in ACTIVE state")
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "").want(t, 200, "")
		withKey(t, h, "/api/slaves/slave/"+id+"/activate", "key-2", "").want(t, 409, first.body)
		if got := state(t, h, id); got != "FROZEN" {
			t.Errorf("got %s, want FROZEN", got)
		}
	})
	t.Run("a key reused for a different request is refused and changes nothing", func(t *testing.T) {
		id := seed(t, "idem-reuse", 1)[0]
		withKey(t, h, "/api/slaves/slave/"+id+"/freeze", "key-3", "").want(t, 200, "")
		withKey(t, h, "/api/slaves/slave/"+id+"/activate", "key-3", "").
			wantError(t, 409, "Idempotency key key-3 was already used for a different request")
		withKey(t, h, "/api/slaves/slave/"+id+"/freeze", "key-3", `{"message":"other"}`).want(t, 409, "*")
		if got := state(t, h, id); got != "FROZEN" {
			t.Errorf("got %s, want FROZEN", got)
		}
	})
	t.Run("one key on two slaves names two requests", func(t *testing.T) {
		ids := seed(t, "idem-two", 2)
		for _, id := range ids {
			withKey(t, h, "/api/slaves/slave/"+id+"/freeze", "batch-7", "").want(t, 200, "")
			if got := state(t, h, id); got != "FROZEN" {
				t.Errorf("%s: got %s, want FROZEN", id, got)
			}
		}
	})
	t.Run("concurrent duplicates apply once and all succeed", func(t *testing.T) {
		id := seed(t, "idem-race", 1)[0]
		var wg sync.WaitGroup
		statuses := make([]int, 10)
		for i := range statuses {
			wg.Go(func() {
				statuses[i] = withKey(t, h, "/api/slaves/slave/"+id+"/decommission", "key-4", "").status
			})
		}
		wg.Wait()
		for i, s := range statuses {
			if s != 200 {
				t.Errorf("request %d: got %d, want 200", i, s)
			}
		}
		if got := len(history(t, h, id)); got != 2 {
			t.Errorf("got %d history entries, want 2", got)
		}
		// Free the decommission slot for the other tests of the suite.
		call(t, h, "DELETE", "/api/slaves/slave/"+id, "").want(t, 200, "")
	})
	t.Run("an overlong Idempotency-Key is a 400", func(t *testing.T) {
		id := seed(t, "idem-long", 1)[0]
		withKey(t, h, "/api/slaves/slave/"+id+"/freeze", strings.Repeat("k", 256), "").
			wantError(t, 400, "Idempotency-Key must be at most 255 characters")
		if got := state(t, h, id); got != "ACTIVE" {
			t.Errorf("got %s, want ACTIVE", got)
		}
	})
}

func TestReceiptsLastTheWindow(t *testing.T) {
	ctx := context.Background()
	h := api(t, access.Policy{})
	id := seed(t, "idem-window", 1)[0]
	t0 := time.Now().UnixMilli()
	freeze := func(at int64) error {
		c := machine.Change{SlaveID: id, Target: machine.Frozen, Now: func() int64 { return at }}
		return store.ApplyOnce(ctx, id, machine.Idempotency{Key: "k", Fingerprint: "f", At: at}, machine.UserChange(c, limits))
	}
	activate := func(at int64) error {
		c := machine.Change{SlaveID: id, Target: machine.Active, Now: func() int64 { return at }}
		return store.Apply(ctx, id, machine.UserChange(c, limits))
	}
	if err := freeze(t0); err != nil {
		t.Fatal(err)
	}
	if err := activate(t0 + 1); err != nil {
		t.Fatal(err)
	}
	if err := freeze(t0 + machine.IdempotencyWindow.Milliseconds() - 1); err != nil {
		t.Fatalf("retry inside the window: %v", err)
	}
	if got := state(t, h, id); got != "ACTIVE" {
		t.Fatalf("inside the window: got %s, want ACTIVE (the retry was answered)", got)
	}
	if err := freeze(t0 + machine.IdempotencyWindow.Milliseconds()); err != nil {
		t.Fatalf("request after the window: %v", err)
	}
	if got := state(t, h, id); got != "FROZEN" {
		t.Errorf("after the window: got %s, want FROZEN (the key names a new request)", got)
	}
}
