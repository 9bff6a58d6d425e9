//go:build integration

package slaves_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

var store *dynamo.Store

// TestMain starts a moto_server of its own and creates the tables from
// template.yaml, so the suite never depends on something already running.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	local, err := stack.Up(context.Background(), "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer local.Close()
	store = dynamo.New(local.DynamoDB, dynamo.Tables{Slaves: "SlavesTable", History: "HistoryTable", Expiring: "ExpiringTable", Requests: "RequestsTable"}, 90*24*time.Hour)
	code := m.Run()
	if code == 0 {
		code = apidoc.Exercised("/api/slaves")
	}
	return code
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var limits = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}

// api is the slave routes as Lambda and the local server serve them; every
// answer must match openapi.yaml.
func api(t testing.TB, policy access.Policy) http.Handler {
	return apidoc.MustLoad(t).Recorder(t, web.Wrap(slaves.New(store, policy, limits), web.Options{Logger: quiet}))
}

type response struct {
	status int
	body   string
	header http.Header
}

func call(t *testing.T, h http.Handler, method, path, body string, ctxs ...func(context.Context) context.Context) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for _, f := range ctxs {
		req = req.WithContext(f(req.Context()))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{rec.Code, rec.Body.String(), rec.Header()}
}

func (r response) want(t *testing.T, status int, body string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got status %d (%s), want %d", r.status, r.body, status)
	}
	if body != "*" && r.body != body {
		t.Fatalf("got body %s, want %s", r.body, body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("got Content-Type %q, want application/json", ct)
	}
}

func (r response) wantError(t *testing.T, status int, message string) {
	t.Helper()
	want, _ := json.Marshal(web.ErrorBody{Code: status, Message: message})
	r.want(t, status, string(want))
}

// seed reports machines up through the inventory handler, as the scheduler
// would, and returns their ids.
func seed(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var ids []string
	var machines []string
	for i := range n {
		id := fmt.Sprintf("%s-S%d", prefix, i)
		ids = append(ids, id)
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"node-%d.example.com","rackId":"us-east-1a","attributes":{"instance_type":"m5.4xlarge"},"resources":{"cpus":16,"mem":63000},"runningTasks":2}`, id, i))
	}
	report(t, `{"complete":false,"machines":[`+strings.Join(machines, ",")+`]}`)
	return ids
}

func report(t *testing.T, detail string) inventory.Result {
	t.Helper()
	res, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(detail))
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	return res
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

type update struct {
	ObjectID  string  `json:"objectId"`
	State     string  `json:"state"`
	Timestamp int64   `json:"timestamp"`
	User      *string `json:"user"`
	Message   *string `json:"message"`
}

type slave struct {
	ID           string            `json:"id"`
	FirstSeenAt  int64             `json:"firstSeenAt"`
	CurrentState update            `json:"currentState"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    map[string]any    `json:"resources"`
}

func history(t *testing.T, h http.Handler, id string) []update {
	t.Helper()
	r := call(t, h, "GET", "/api/slaves/slave/"+id, "")
	r.want(t, 200, "*")
	return decode[[]update](t, r.body)
}

func state(t *testing.T, h http.Handler, id string) string {
	t.Helper()
	r := call(t, h, "GET", "/api/slaves/slave/"+id+"/details", "")
	r.want(t, 200, "*")
	return decode[slave](t, r.body).CurrentState.State
}

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

type expiring struct {
	MachineID     string            `json:"machineId"`
	User          *string           `json:"user"`
	StartMillis   int64             `json:"startMillis"`
	ActionID      string            `json:"actionId"`
	RevertToState string            `json:"revertToState"`
	KillTasks     *bool             `json:"killTasksOnDecommissionTimeout"`
	Request       map[string]any    `json:"expiringAPIRequestObject"`
	Extra         map[string]string `json:"-"`
}

func listExpiring(t *testing.T, h http.Handler, id string) []expiring {
	t.Helper()
	r := call(t, h, "GET", "/api/slaves/expiring", "")
	r.want(t, 200, "*")
	var mine []expiring
	for _, e := range decode[[]expiring](t, r.body) {
		if e.MachineID == id {
			mine = append(mine, e)
		}
	}
	return mine
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

func TestReports(t *testing.T) {
	h := api(t, access.Policy{})
	ids := seed(t, "rep", 2)

	t.Run("the same report twice writes no second history entry", func(t *testing.T) {
		before := len(history(t, h, ids[0]))
		seed(t, "rep", 2)
		if got := len(history(t, h, ids[0])); got != before {
			t.Errorf("got %d entries, want %d", got, before)
		}
	})
	t.Run("decommissioning advances with running tasks and keeps the operator's message", func(t *testing.T) {
		call(t, h, "POST", "/api/slaves/slave/"+ids[0]+"/decommission", `{"message":"retire"}`).want(t, 200, "")
		report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","runningTasks":4}]}`, ids[0]))
		if got := state(t, h, ids[0]); got != "DECOMMISSIONING" {
			t.Fatalf("got %s, want DECOMMISSIONING", got)
		}
		report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","runningTasks":0}]}`, ids[0]))
		hist := history(t, h, ids[0])
		if hist[0].State != "DECOMMISSIONED" || hist[0].Message == nil || *hist[0].Message != "retire" {
			t.Errorf("got %+v, want DECOMMISSIONED with the operator's message", hist[0])
		}
	})
	t.Run("an EventBridge envelope is accepted", func(t *testing.T) {
		res := report(t, fmt.Sprintf(`{"version":"0","id":"e1","detail-type":"Machine Report","source":"fleet.scheduler","time":"%s","detail":{"machines":[{"slaveId":"rep-env","host":"h"}]}}`, time.Now().UTC().Format(time.RFC3339)))
		if res.Machines != 1 || state(t, h, "rep-env") != "ACTIVE" {
			t.Errorf("got %+v", res)
		}
	})
}

func TestAuthorizer(t *testing.T) {
	h := api(t, access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admin"}, ReadGroups: []string{"ops"}})
	id := seed(t, "auth", 1)[0]
	as := func(i access.Identity) func(context.Context) context.Context {
		return func(ctx context.Context) context.Context { return access.WithIdentity(ctx, i) }
	}
	admin := as(access.Identity{ID: "alice", Email: "alice@example.com", Groups: []string{"admin"}})
	reader := as(access.Identity{ID: "bob", Groups: []string{"ops"}})
	stranger := as(access.Identity{ID: "eve"})

	call(t, h, "GET", "/api/slaves", "").wantError(t, 401, "authentication required")
	call(t, h, "GET", "/api/slaves", "", stranger).wantError(t, 403, "eve must be part of one or more read groups: ops")
	call(t, h, "GET", "/api/slaves", "", reader).want(t, 200, "*")
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "").wantError(t, 401, "authentication required")
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "", reader).wantError(t, 403, "bob must be part of one or more admin groups: admin")
	call(t, h, "DELETE", "/api/slaves/slave/"+id, `{"id":"root","groups":["admin"]}`, reader).wantError(t, 403, "bob must be part of one or more admin groups: admin")
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "{bad", reader).wantError(t, 403, "bob must be part of one or more admin groups: admin")
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", `{"message":"m"}`, admin).want(t, 200, "")
	if hist := history(t, api(t, access.Policy{}), id); hist[0].User == nil || *hist[0].User != "alice@example.com" {
		t.Errorf("got %+v, want alice's email on the entry", hist[0])
	}
}

func TestConcurrency(t *testing.T) {
	h := api(t, access.Policy{})

	t.Run("parallel freezes of one slave: one wins, one history entry", func(t *testing.T) {
		id := seed(t, "race", 1)[0]
		before := len(history(t, h, id))
		statuses := parallel(20, func(int) int {
			return call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "").status
		})
		if statuses[200] != 1 || statuses[409] != 19 {
			t.Errorf("got %v, want one 200 and nineteen 409", statuses)
		}
		if got := len(history(t, h, id)); got != before+1 {
			t.Errorf("got %d history entries, want %d", got, before+1)
		}
	})
	t.Run("parallel decommissions never exceed the limit", func(t *testing.T) {
		ids := seed(t, "racedec", 10)
		statuses := parallel(10, func(i int) int {
			return call(t, h, "POST", "/api/slaves/slave/"+ids[i]+"/decommission", "").status
		})
		if statuses[200] != 2 || statuses[400] != 8 {
			t.Errorf("got %v, want two 200 and eight 400", statuses)
		}
		r := call(t, h, "GET", "/api/slaves?state=STARTING_DECOMMISSION", "")
		var n int
		for _, s := range decode[[]slave](t, r.body) {
			if strings.HasPrefix(s.ID, "racedec-") {
				n++
			}
		}
		if n != 2 {
			t.Errorf("got %d decommissioning, want 2", n)
		}
		for _, id := range ids {
			call(t, h, "DELETE", "/api/slaves/slave/"+id, "")
		}
	})
}

func parallel(n int, f func(i int) int) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			s := f(i)
			mu.Lock()
			counts[s]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}
