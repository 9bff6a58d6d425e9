//go:build integration

package slaves_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// State changes over DynamoDB: transitions, the decommission limit, expiring
// changes, deletes, retries under an Idempotency-Key, and changes racing
// reports and each other.

func TestTransitions(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "trans", 1)[0]

	steps := []struct {
		name, action, body string
		status             int
		message, state     string
	}{
		{"freeze an active slave", "freeze", `{"message":"disk check"}`, 200, "", "FROZEN"},
		{"freeze a frozen slave", "freeze", "", 409, "FAILURE_ALREADY_AT_STATE - Slave " + id + " is in FROZEN state", "FROZEN"},
		{"decommission a frozen slave", "decommission", "{}", 200, "", "STARTING_DECOMMISSION"},
		{"decommission again", "decommission", "null", 409, "FAILURE_ALREADY_AT_STATE - Slave " + id + " is in STARTING_DECOMMISSION state", "STARTING_DECOMMISSION"},
		{"freeze while decommissioning", "freeze", "", 409, "FAILURE_ILLEGAL_TRANSITION - Slave " + id + " is in FROZEN state", "STARTING_DECOMMISSION"},
		{"activate cancels decommissioning", "activate", `{"message":"back","unknownField":[1,2]}`, 200, "", "ACTIVE"},
		{"activate an active slave", "activate", "", 409, "FAILURE_ALREADY_AT_STATE - Slave " + id + " is in ACTIVE state", "ACTIVE"},
		{"a body that is not JSON", "freeze", "{not json", 400, "*", "ACTIVE"},
		{"a wrongly typed field", "freeze", `{"message":5}`, 400, "*", "ACTIVE"},
	}
	before := len(history(t, h, id))
	changes := 0
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := call(t, h, "POST", "/api/slaves/slave/"+id+"/"+s.action, s.body)
			switch {
			case s.status == 200:
				r.want(t, 200, "")
				changes++
			case s.message == "*":
				r.want(t, s.status, "*")
			default:
				r.wantError(t, s.status, s.message)
			}
			if got := state(t, h, id); got != s.state {
				t.Errorf("got state %s, want %s", got, s.state)
			}
		})
	}
	t.Run("history holds one entry per change, newest first", func(t *testing.T) {
		hist := history(t, h, id)
		if len(hist) != before+changes {
			t.Fatalf("got %d entries, want %d", len(hist), before+changes)
		}
		if hist[0].State != "ACTIVE" || *hist[0].Message != "back" || hist[0].User != nil || hist[0].ObjectID != id {
			t.Errorf("got newest %+v", hist[0])
		}
		if hist[2].State != "FROZEN" || *hist[2].Message != "disk check" {
			t.Errorf("got %+v, want the freeze", hist[2])
		}
		for i := 1; i < len(hist); i++ {
			if hist[i-1].Timestamp < hist[i].Timestamp {
				t.Errorf("got entry %d older than entry %d", i-1, i)
			}
		}
	})
	t.Run("a change to an unknown slave is 404", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/ghost/freeze", "").wantError(t, 404, "Couldn't find an active Slave with id ghost (result: FAILURE_NOT_FOUND)")
	})
	t.Run("a body over 64 KiB is 413 and changes nothing", func(t *testing.T) {
		big := `{"message":"` + strings.Repeat("x", 70000) + `"}`
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", big).want(t, 413, "*")
		if got := state(t, h, id); got != "ACTIVE" {
			t.Errorf("got %s, want ACTIVE", got)
		}
	})
	t.Run("history of an unknown slave is an empty list", func(t *testing.T) {
		call(t, h, "GET", "/api/slaves/slave/ghost", "").want(t, 200, "[]")
	})
}

func TestDecommissionLimit(t *testing.T) {
	h := api(t, access.Policy{})
	ids := seed(t, "limit", 4)
	call(t, h, "POST", "/api/slaves/slave/"+ids[0]+"/decommission", "").want(t, 200, "")
	call(t, h, "POST", "/api/slaves/slave/"+ids[1]+"/decommission", "").want(t, 200, "")
	call(t, h, "POST", "/api/slaves/slave/"+ids[2]+"/decommission", "").wantError(t, 400,
		"2 slaves are already decommissioning state (2 allowed at once). Allow these slaves to finish before decommissioning another")

	t.Run("a finished decommission frees its place", func(t *testing.T) {
		report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","runningTasks":0}]}`, ids[0]))
		if got := state(t, h, ids[0]); got != "DECOMMISSIONED" {
			t.Fatalf("got %s, want DECOMMISSIONED", got)
		}
		call(t, h, "POST", "/api/slaves/slave/"+ids[2]+"/decommission", "").want(t, 200, "")
	})
	t.Run("activating and deleting free places too", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+ids[1]+"/activate", "").want(t, 200, "")
		call(t, h, "DELETE", "/api/slaves/slave/"+ids[2], "").want(t, 200, "")
		call(t, h, "POST", "/api/slaves/slave/"+ids[3]+"/decommission", "").want(t, 200, "")
		call(t, h, "POST", "/api/slaves/slave/"+ids[1]+"/decommission", "").want(t, 200, "")
		call(t, h, "POST", "/api/slaves/slave/"+ids[1]+"/activate", "").want(t, 200, "")
		call(t, h, "POST", "/api/slaves/slave/"+ids[3]+"/activate", "").want(t, 200, "")
	})
}

func TestExpiring(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "exp", 1)[0]

	t.Run("an expiring freeze stores its record with the change", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"durationMillis":7200000,"revertToState":"ACTIVE","actionId":"a-1","message":"2h"}`).want(t, 200, "")
		recs := listExpiring(t, h, id)
		if len(recs) != 1 {
			t.Fatalf("got %d records, want 1", len(recs))
		}
		e := recs[0]
		if e.ActionID != "a-1" || e.RevertToState != "ACTIVE" || e.KillTasks == nil || *e.KillTasks || e.User != nil || e.StartMillis == 0 {
			t.Errorf("got %+v", e)
		}
		if e.Request["durationMillis"] != 7200000.0 || e.Request["revertToState"] != "ACTIVE" || e.Request["message"] != "2h" {
			t.Errorf("got request %v", e.Request)
		}
	})
	cases := []struct {
		name, action, body string
		status             int
		message            string
	}{
		{"a second expiring change conflicts", "decommission", `{"durationMillis":1000,"revertToState":"ACTIVE"}`, 409, "A current expiring object already exists, delete it first"},
		{"a duration without a revert state", "decommission", `{"durationMillis":1000}`, 400, "Must include a machine state to revert to for an expiring machine state change"},
		{"a revert state that is no state", "decommission", `{"durationMillis":1000,"revertToState":"active"}`, 400, "revertToState must be one of [MISSING_ON_STARTUP, ACTIVE, STARTING_DECOMMISSION, DECOMMISSIONING, DECOMMISSIONED, DEAD, FROZEN]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			call(t, h, "POST", "/api/slaves/slave/"+id+"/"+c.action, c.body).wantError(t, c.status, c.message)
			if got := state(t, h, id); got != "FROZEN" {
				t.Errorf("got %s, want FROZEN", got)
			}
		})
	}
	t.Run("reaching the revert state removes the record", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+id+"/activate", "").want(t, 200, "")
		if recs := listExpiring(t, h, id); len(recs) != 0 {
			t.Errorf("got %+v, want no record", recs)
		}
	})
	t.Run("deleting an expiring record is idempotent and writes no history", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"durationMillis":60000,"revertToState":"ACTIVE"}`).want(t, 200, "")
		n := len(history(t, h, id))
		call(t, h, "DELETE", "/api/slaves/slave/"+id+"/expiring", "").want(t, 200, "")
		call(t, h, "DELETE", "/api/slaves/slave/"+id+"/expiring", "").want(t, 200, "")
		if recs := listExpiring(t, h, id); len(recs) != 0 {
			t.Errorf("got %+v, want no record", recs)
		}
		if got := len(history(t, h, id)); got != n {
			t.Errorf("got %d history entries, want %d", got, n)
		}
	})
	t.Run("a generated action id is a UUID", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+id+"/activate", `{"durationMillis":60000,"revertToState":"FROZEN"}`).want(t, 200, "")
		recs := listExpiring(t, h, id)
		if len(recs) != 1 || len(recs[0].ActionID) != 36 {
			t.Fatalf("got %+v, want one record with a UUID", recs)
		}
	})
	t.Run("deleting the slave deletes its record", func(t *testing.T) {
		call(t, h, "DELETE", "/api/slaves/slave/"+id, "").want(t, 200, "")
		if recs := listExpiring(t, h, id); len(recs) != 0 {
			t.Errorf("got %+v, want no record", recs)
		}
	})
}

func TestDelete(t *testing.T) {
	h := api(t, access.Policy{})
	ids := seed(t, "del", 3)

	t.Run("a slave with a history longer than one transaction is deleted whole", func(t *testing.T) {
		for range 60 {
			call(t, h, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", "").want(t, 200, "")
			call(t, h, "POST", "/api/slaves/slave/"+ids[0]+"/activate", "").want(t, 200, "")
		}
		call(t, h, "DELETE", "/api/slaves/slave/"+ids[0], `{"id":"ops","name":"Ops"}`).want(t, 200, "")
		call(t, h, "GET", "/api/slaves/slave/"+ids[0], "").want(t, 200, "[]")
		call(t, h, "GET", "/api/slaves/slave/"+ids[0]+"/details", "").want(t, 404, "*")
	})
	t.Run("deleting an unknown slave is 404", func(t *testing.T) {
		call(t, h, "DELETE", "/api/slaves/slave/"+ids[0], "").wantError(t, 404, "Couldn't find dead Slave with id "+ids[0])
	})
	t.Run("a report brings a deleted slave back with a fresh history", func(t *testing.T) {
		seed(t, "del", 1)
		if hist := history(t, h, ids[0]); len(hist) != 1 || hist[0].State != "ACTIVE" {
			t.Errorf("got %+v, want one ACTIVE entry", hist)
		}
	})
	t.Run("delete dead removes only dead slaves", func(t *testing.T) {
		report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","lost":true}]}`, ids[1]))
		if got := state(t, h, ids[1]); got != "DEAD" {
			t.Fatalf("got %s, want DEAD", got)
		}
		call(t, h, "DELETE", "/api/slaves/dead", "").want(t, 200, "")
		call(t, h, "GET", "/api/slaves/slave/"+ids[1]+"/details", "").want(t, 404, "*")
		if got := state(t, h, ids[2]); got != "ACTIVE" {
			t.Errorf("got %s, want ACTIVE", got)
		}
	})
}

// MAX_DECOMMISSIONING_SLAVES=0 means no limit (the template's
// MaxDecommissioningSlaves accepts 0): every decommission is let through,
// however many slaves already decommission.
func TestNoDecommissionLimit(t *testing.T) {
	unlimited := machine.Limits{MaxDecommissioning: 0, MaxExpiring: 30 * 24 * time.Hour}
	h := apidoc.MustLoad(t).Recorder(t, web.Wrap(slaves.New(store, access.Policy{}, unlimited), web.Options{Logger: quiet}))
	ids := seed(t, "nolimit", 5)
	for _, id := range ids {
		call(t, h, "POST", "/api/slaves/slave/"+id+"/decommission", "").want(t, 200, "")
	}
	for _, id := range ids {
		if got := state(t, h, id); got != "STARTING_DECOMMISSION" {
			t.Errorf("%s: got %s, want STARTING_DECOMMISSION", id, got)
		}
		call(t, h, "POST", "/api/slaves/slave/"+id+"/activate", "").want(t, 200, "")
	}
}

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
	t.Run("one key on two slaves is a reused key: the second is refused and changes nothing", func(t *testing.T) {
		ids := seed(t, "idem-two", 2)
		withKey(t, h, "/api/slaves/slave/"+ids[0]+"/freeze", "batch-7", "").want(t, 200, "")
		withKey(t, h, "/api/slaves/slave/"+ids[1]+"/freeze", "batch-7", "").
			wantError(t, 409, "Idempotency key batch-7 was already used for a different request")
		if got := state(t, h, ids[1]); got != "ACTIVE" {
			t.Errorf("%s: got %s, want ACTIVE", ids[1], got)
		}
		if got := len(history(t, h, ids[1])); got != 1 {
			t.Errorf("%s: got %d history entries, want the report's only", ids[1], got)
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

func TestAUserChangeNeverWritesBackTheDescriptionItRead(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "race-describe", 1)[0]
	now := time.Now().UnixMilli()
	refresh := machine.Observation{ID: id, Host: "refreshed.example.com", RackID: "us-east-1b", Attributes: map[string]string{"generation": "2"}, At: now}
	freeze := machine.UserChange(machine.Change{SlaveID: id, Target: machine.Frozen, Now: func() int64 { return now }}, limits)
	refreshed := false
	err := store.Apply(context.Background(), id, func(snap machine.Snapshot) (*machine.Plan, error) {
		if !refreshed {
			refreshed = true
			if err := store.Apply(context.Background(), id, machine.Observe(refresh, now)); err != nil {
				return nil, err
			}
		}
		return freeze(snap)
	})
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, h, "GET", "/api/slaves/slave/"+id+"/details", "")
	r.want(t, 200, "*")
	got := decode[slave](t, r.body)
	if got.CurrentState.State != "FROZEN" || got.Host != refresh.Host || got.RackID != refresh.RackID || got.Attributes["generation"] != "2" {
		t.Errorf("got %s on %s in %s with %v, want FROZEN with the refreshed description", got.CurrentState.State, got.Host, got.RackID, got.Attributes)
	}
}

func TestAChangeThatLostARaceIsStampedWhenItIsDecidedAgainAndNeverBeforeTheEntryItFollows(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "race-time", 1)[0]
	start := time.Now().UnixMilli()
	// This instance's clock reads start, then, on the retry, 100 ms later;
	// the change that wins the race, a loss the scheduler saw, is 200 ms
	// ahead of it.
	readings := []int64{start, start + 100}
	clock := func() int64 {
		v := readings[0]
		if len(readings) > 1 {
			readings = readings[1:]
		}
		return v
	}
	freeze := machine.UserChange(machine.Change{SlaveID: id, Target: machine.Frozen, Now: clock}, limits)
	lost := machine.Observe(machine.Observation{ID: id, Lost: true, At: start + 200}, start+200)
	won := false
	err := store.Apply(context.Background(), id, func(snap machine.Snapshot) (*machine.Plan, error) {
		if !won {
			won = true
			if err := store.Apply(context.Background(), id, lost); err != nil {
				return nil, err
			}
		}
		return freeze(snap)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := history(t, h, id)
	if len(got) != 3 || got[0].State != "FROZEN" || got[1].State != "DEAD" {
		t.Fatalf("got history %+v, want FROZEN after DEAD after the report", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Timestamp < got[i].Timestamp {
			t.Errorf("entry %d (%s) at %d is older than the entry before it (%s at %d)", i-1, got[i-1].State, got[i-1].Timestamp, got[i].State, got[i].Timestamp)
		}
	}
	if got[0].Timestamp < start+200 {
		t.Errorf("got the freeze stamped %d, want no earlier than the loss it follows (%d)", got[0].Timestamp, start+200)
	}
}

func TestADecommissionOrderingTimeFromTheFutureDoesNotPushOtherSlavesForward(t *testing.T) {
	h := api(t, access.Policy{})
	ids := seed(t, "race-future", 2)
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = store.Delete(context.Background(), id, nil)
		}
	})
	unlimited := machine.Limits{MaxExpiring: limits.MaxExpiring}
	decommission := func(id string, at int64) {
		t.Helper()
		c := machine.Change{SlaveID: id, Target: machine.StartingDecommission, Now: func() int64 { return at }}
		if err := store.Apply(context.Background(), id, machine.UserChange(c, unlimited)); err != nil {
			t.Fatal(err)
		}
	}
	// A change stamped by a clock a day ahead (as a report from a skewed
	// scheduler was, before report times were clamped) left the
	// decommissioning set's ordering time in the future.
	ahead := time.Now().Add(24 * time.Hour).UnixMilli()
	decommission(ids[0], ahead)
	now := time.Now().UnixMilli()
	decommission(ids[1], now)
	if got := history(t, h, ids[1])[0]; got.Timestamp != now {
		t.Errorf("got the other slave's decommission stamped %d, want the time it was made, %d", got.Timestamp, now)
	}
}
