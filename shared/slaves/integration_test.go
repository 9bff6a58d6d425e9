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
	os.Exit(stack.Main(func(local *stack.Local) int {
		store = dynamo.New(local.DynamoDB, stack.Tables, 90*24*time.Hour)
		emulator = local.Moto.Endpoint
		code := m.Run()
		if code == 0 {
			code = apidoc.Exercised("/api/slaves")
		}
		return code
	}))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// emulator is the DynamoDB endpoint of the tests' emulator.
var emulator string

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
	// A body is JSON and says so; a change's empty 200 names no type.
	want := "application/json"
	if r.body == "" {
		want = ""
	}
	if ct := r.header.Get("Content-Type"); ct != want {
		t.Fatalf("got Content-Type %q on %d %q, want %q", ct, r.status, r.body, want)
	}
}

func (r response) wantError(t *testing.T, status int, message string) {
	t.Helper()
	want, _ := json.Marshal(web.ErrorBody{Code: status, Message: message})
	r.want(t, status, string(want)+"\n") // an error body is one line, ended
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
	RunningTasks *int              `json:"runningTasks"`
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
		report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","runningTasks":2},{"id":%q,"host":"h","runningTasks":5}]}`, ids[0], ids[1]))
		wantTasks := func(id string, want string) {
			t.Helper()
			r := call(t, h, "GET", "/api/slaves/slave/"+id+"/details", "")
			r.want(t, 200, "*")
			got := "absent"
			if n := decode[slave](t, r.body).RunningTasks; n != nil {
				got = fmt.Sprint(*n)
			}
			listed := call(t, h, "GET", "/api/slaves", "")
			if got != want || !strings.Contains(listed.body, r.body) {
				t.Errorf("%s runningTasks: got %s (details %s), want %s, and the list to say the same", id, got, r.body, want)
			}
		}
		wantTasks(ids[0], "2")
		wantTasks(ids[1], "absent") // ACTIVE: its count is not stored
		report(t, fmt.Sprintf(`{"machines":[{"id":%q,"host":"h","runningTasks":0}]}`, ids[0]))
		wantTasks(ids[0], "absent")
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
