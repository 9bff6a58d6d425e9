//go:build integration

package slaves_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// Reads over DynamoDB: the list, details and history, with their bounds
// and the history's retention.

func TestListAndDetails(t *testing.T) {
	h := api(t, access.Policy{})
	ids := seed(t, "list", 3)

	t.Run("details carry every field of SchedulerSlave and omit absent ones", func(t *testing.T) {
		r := call(t, h, "GET", "/api/slaves/slave/"+ids[0]+"/details", "")
		r.want(t, 200, "*")
		var raw map[string]json.RawMessage
		json.Unmarshal([]byte(r.body), &raw)
		for _, k := range []string{"id", "firstSeenAt", "currentState", "host", "rackId", "attributes", "resources"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("got no %q in %s", k, r.body)
			}
		}
		if strings.Contains(r.body, "null") || strings.Contains(r.body, "slaveId") {
			t.Errorf("got %s, want no null and no slaveId", r.body)
		}
		s := decode[slave](t, r.body)
		if s.CurrentState.State != "ACTIVE" || s.CurrentState.User != nil || s.RackID != "us-east-1a" || s.Resources["cpus"] != 16.0 {
			t.Errorf("got %+v", s)
		}
	})
	t.Run("unknown slave details are 404", func(t *testing.T) {
		r := call(t, h, "GET", "/api/slaves/slave/nope/details", "")
		r.wantError(t, 404, "Couldn't find an active Slave with id nope (result: FAILURE_NOT_FOUND)")
	})
	t.Run("the list is sorted by id and both spellings of the route agree", func(t *testing.T) {
		a := call(t, h, "GET", "/api/slaves", "")
		b := call(t, h, "GET", "/api/slaves/", "")
		a.want(t, 200, b.body)
		all := decode[[]slave](t, a.body)
		var mine []string
		for i, s := range all {
			if i > 0 && all[i-1].ID >= s.ID {
				t.Fatalf("got %s before %s, want sorted by id", all[i-1].ID, s.ID)
			}
			if strings.HasPrefix(s.ID, "list-") {
				mine = append(mine, s.ID)
			}
		}
		if strings.Join(mine, ",") != strings.Join(ids, ",") {
			t.Errorf("got %v, want %v", mine, ids)
		}
	})
	t.Run("the state filter is lenient and reads only that state", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", "").want(t, 200, "")
		for _, q := range []string{"FROZEN", "frozen", "%20Frozen%20"} {
			r := call(t, h, "GET", "/api/slaves?state="+q, "")
			r.want(t, 200, "*")
			for _, s := range decode[[]slave](t, r.body) {
				if s.CurrentState.State != "FROZEN" {
					t.Errorf("state=%s got %s in %s", q, s.ID, s.CurrentState.State)
				}
			}
			if !strings.Contains(r.body, ids[1]) {
				t.Errorf("state=%s got %s, want %s", q, r.body, ids[1])
			}
		}
		r := call(t, h, "GET", "/api/slaves?state=starting-decommission", "")
		r.want(t, 200, "*")
		if strings.Contains(r.body, ids[1]) {
			t.Errorf("got %s in starting-decommission list", ids[1])
		}
		if r := call(t, h, "GET", "/api/slaves?state=", ""); !strings.Contains(r.body, ids[0]) {
			t.Errorf("empty state got %s, want every slave", r.body)
		}
	})
	t.Run("an unknown state is 400 naming every state", func(t *testing.T) {
		call(t, h, "GET", "/api/slaves?state=sleeping", "").wantError(t, 400,
			"query param state must be one of [MISSING_ON_STARTUP, ACTIVE, STARTING_DECOMMISSION, DECOMMISSIONING, DECOMMISSIONED, DEAD, FROZEN]")
	})
	t.Run("unknown routes and empty segments are JSON 404s", func(t *testing.T) {
		for _, p := range []string{"/api/slaves/nothing", "/api/slaves/slave//details", "/api/slaves/slave/x/y/z"} {
			if r := call(t, h, "GET", p, ""); r.status != 404 || !strings.HasPrefix(r.body, `{"code":404`) {
				t.Errorf("%s: got %d %s, want JSON 404", p, r.status, r.body)
			}
		}
	})
}

func TestLongMessagesAndBoundedHistoryThroughDynamoDB(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "bounded", 1)[0]
	longest := strings.Repeat(`<"\`, slaves.MaxMessage/3) + "<"
	for i, action := range []string{"freeze", "activate", "freeze", "activate"} {
		body, _ := json.Marshal(map[string]string{"message": longest[:len(longest)-i]})
		call(t, h, "POST", "/api/slaves/slave/"+id+"/"+action, string(body)).want(t, 200, "")
	}
	tooLong, _ := json.Marshal(map[string]string{"message": longest + "x"})
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", string(tooLong)).wantError(t, 400, "message must be at most 4096 characters")

	all := history(t, h, id)
	if len(all) != 5 || *all[0].Message != longest[:len(longest)-3] || all[0].State != "ACTIVE" {
		t.Fatalf("got %d entries, the newest %s, want 5 with the last change's message first", len(all), all[0].State)
	}
	r := call(t, h, "GET", "/api/slaves/slave/"+id+"?limit=2", "")
	r.want(t, 200, "*")
	if got := decode[[]update](t, r.body); len(got) != 2 || *got[1].Message != *all[1].Message {
		t.Errorf("got %d entries, want the newest 2", len(got))
	}
	call(t, h, "GET", "/api/slaves/slave/"+id+"?limit=0", "").wantError(t, 400, "query param limit must be a whole number from 1 to 10000")
}

func TestHistoryRetentionCountsFromWhenAnEntryWasSuperseded(t *testing.T) {
	h := api(t, access.Policy{})
	id := "retention-S0"
	t.Cleanup(func() { _, _ = store.Delete(context.Background(), id, nil) })
	// A machine first reported 100 days ago, longer than the 90-day
	// retention, and unchanged since.
	long := time.Now().Add(-100 * 24 * time.Hour).UTC().Format(time.RFC3339)
	report(t, fmt.Sprintf(`{"detail-type":"Machine Report","time":%q,"detail":{"machines":[{"id":%q,"host":"h"}]}}`, long, id))
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "").want(t, 200, "")
	got := history(t, h, id)
	if len(got) != 2 || got[0].State != "FROZEN" || got[1].State != "ACTIVE" {
		t.Errorf("got history %+v, want FROZEN and the ACTIVE it left", got)
	}
}

// A client that gives up closes its connection and net/http cancels the
// request's context: the real store's DynamoDB call then fails with the
// SDK's "context canceled". The log says the client went away (499, INFO),
// never that the service failed.
func TestAReadWhoseClientWentAwayIsLoggedAsGoneNotAsAFailure(t *testing.T) {
	seed(t, "gone", 1)
	var logs bytes.Buffer
	h := web.Wrap(slaves.New(store, access.Policy{}, limits), web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for _, path := range []string{"/api/slaves", "/api/slaves/slave/gone-S0/details", "/api/slaves/slave/gone-S0", "/api/slaves/expiring"} {
		t.Run(path, func(t *testing.T) {
			logs.Reset()
			r := call(t, h, "GET", path, "", func(ctx context.Context) context.Context {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return ctx
			})
			if r.status != web.StatusClientClosedRequest {
				t.Errorf("got status %d (%s), want 499", r.status, r.body)
			}
			if got := logs.String(); strings.Contains(got, `"level":"ERROR"`) || !strings.Contains(got, `"msg":"client went away"`) || !strings.Contains(got, "context canceled") {
				t.Errorf("got log\n%s\nwant the client gone at INFO, with the store's context canceled, and no ERROR", got)
			}
		})
	}
}
