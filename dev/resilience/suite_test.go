//go:build resilience

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// The suite runs against its own moto_server: DynamoDB with transactions
// and conditions, and S3. Nothing here is a fake but the faults.
var (
	local  *stack.Local
	tables = stack.Tables
	limits = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}
	quiet  = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// The figures of the summary line, summed over the suite's tests.
var figures struct {
	requests   atomic.Int64 // HTTP requests sent to the API, retries included, and machine reports
	faults     atomic.Int64 // backend calls failed on purpose
	violations atomic.Int64 // broken invariants (each is also a test failure)
	modelOps   atomic.Int64 // operations whose answer and resulting state were compared with the reference model
	linChecks  atomic.Int64 // concurrent histories checked for linearizability
}

// attemptTimeout replaces the production attempt timeouts (1 s, 2 s) so that
// a hung call costs the suite 300 ms; the mechanism is the same.
const attemptTimeout = 300 * time.Millisecond

func TestMain(m *testing.M) {
	os.Exit(stack.Main(func(l *stack.Local) int {
		local = l
		return runSuite(m)
	}))
}

func runSuite(m *testing.M) int {
	code := m.Run()
	// dev/resilience (the runner) reads this line.
	fmt.Printf("resilience-figures: requests=%d faults=%d violations=%d model_ops=%d lin_checks=%d\n",
		figures.requests.Load(), figures.faults.Load(), figures.violations.Load(), figures.modelOps.Load(), figures.linChecks.Load())
	return code
}

// violation records a broken invariant.
func violation(t *testing.T, format string, args ...any) {
	t.Helper()
	figures.violations.Add(1)
	t.Errorf(format, args...)
}

// cleanStore is the store over a client without faults, for setting up and
// for checking the tables afterwards.
func cleanStore() *dynamo.Store {
	return dynamo.New(local.DynamoDB, tables, 90*24*time.Hour)
}

// faultyStore is the store as the functions build it (sdkconfig's retry
// policy, attempts cut off by a timeout), over an HTTP client that fails rate
// of its requests.
func faultyStore(t *testing.T, rate float64, seed uint64) (*dynamo.Store, *faulty) {
	t.Helper()
	cfg, err := sdkconfig.Load(t.Context(), sdkconfig.DynamoDB, attemptTimeout)
	if err != nil {
		t.Fatal(err)
	}
	f := newFaulty(http.DefaultTransport.(*http.Transport).Clone(), rate, seed)
	cfg.HTTPClient = &http.Client{Transport: f, Timeout: attemptTimeout}
	return dynamo.New(dynamodb.NewFromConfig(cfg), tables, 90*24*time.Hour), f
}

// server serves the slave routes over store as SlavesFunction does, with
// the deadline a Lambda invocation would give; every answer must match
// openapi.yaml.
func server(t *testing.T, store slaves.Store, policy access.Policy, budget time.Duration) *httptest.Server {
	t.Helper()
	h := web.Wrap(slaves.New(store, policy, limits), web.Options{Logger: quiet})
	srv := httptest.NewServer(checked(t, deadline(h, budget)))
	t.Cleanup(srv.Close)
	return srv
}

// checked serves h with every answer checked against openapi.yaml, the
// 503s and 504s of failing backends included.
func checked(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	return apidoc.MustLoad(t).Recorder(t, h)
}

// release deletes the test's slaves when it ends: the suite's tests share
// the tables, and a slave left decommissioning would hold a place of the
// next test's limit.
func release(t *testing.T, ids ...string) {
	t.Cleanup(func() {
		for _, id := range ids {
			if _, err := cleanStore().Delete(context.Background(), id, nil); err != nil {
				t.Errorf("release %s: %v", id, err)
			}
		}
	})
}

// report sends a machine report through the inventory handler, as the
// scheduler's EventBridge events reach InventoryFunction.
func report(t *testing.T, store inventory.Store, machines ...string) {
	t.Helper()
	figures.requests.Add(1)
	detail := `{"complete":false,"machines":[` + strings.Join(machines, ",") + `]}`
	if _, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(detail)); err != nil {
		t.Fatalf("report: %v", err)
	}
}

func up(id string, runningTasks int) string {
	return fmt.Sprintf(`{"id":%q,"host":"%s.example.com","rackId":"us-east-1a","attributes":{},"resources":{"cpus":8},"runningTasks":%d}`, id, id, runningTasks)
}

// answer is one HTTP response, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// send makes one request to the API and checks the wire contract that holds
// for every answer: errors are JSON with their status, and a 5xx is only a
// 503 with Retry-After or a 504.
func send(t *testing.T, client *http.Client, method, url, body string, header http.Header) answer {
	t.Helper()
	figures.requests.Add(1)
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		violation(t, "%s %s: %v", method, url, err)
		return answer{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{resp.StatusCode, resp.Header, string(raw)}
	if a.status >= 300 {
		var e web.ErrorBody
		if err := json.Unmarshal(raw, &e); err != nil || e.Code != a.status || e.Message == "" {
			violation(t, "%s %s: got %d %q, want a JSON error body with that code", method, url, a.status, a.body)
		}
	}
	switch {
	case a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") == "":
		violation(t, "%s %s: got 503 without Retry-After", method, url)
	case a.status >= 500 && a.status != http.StatusServiceUnavailable && a.status != http.StatusGatewayTimeout:
		violation(t, "%s %s: got %d %s, want success, a 4xx, a 503 or a 504", method, url, a.status, a.body)
	}
	return a
}

// retrying sends a request until it gets an answer that is not a 503 or
// 504, as a client following Retry-After would (without the wait, to keep
// the suite short), at most tries times. The Idempotency-Key in header makes
// the retries safe.
func retrying(t *testing.T, client *http.Client, tries int, method, url, body string, header http.Header) answer {
	t.Helper()
	var a answer
	for range tries {
		a = send(t, client, method, url, body, header)
		if a.status != http.StatusServiceUnavailable && a.status != http.StatusGatewayTimeout {
			return a
		}
		time.Sleep(10 * time.Millisecond)
	}
	return a
}

// tableState is what the tables hold about one slave, read without faults.
type tableState struct {
	slave    *machine.Slave
	history  []machine.Update // newest first
	expiring *machine.Expiring
}

func readSlave(t *testing.T, store *dynamo.Store, id string) tableState {
	t.Helper()
	ctx := context.Background()
	var s tableState
	var err error
	if s.slave, err = store.Get(ctx, id); err != nil {
		t.Fatal(err)
	}
	if s.history, err = store.History(ctx, id, time.Now(), math.MaxInt); err != nil { // every entry
		t.Fatal(err)
	}
	records, err := store.ListExpiring(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range records {
		if e.MachineID == id {
			s.expiring = &e
		}
	}
	return s
}

// checkConsistent checks what must hold of every slave at rest: its current
// state is its newest history entry, and an expiring record never outlives
// the change that makes it pointless.
func checkConsistent(t *testing.T, id string, s tableState) {
	t.Helper()
	if s.slave == nil {
		if len(s.history) > 0 || s.expiring != nil {
			violation(t, "%s: gone, but %d history entries and expiring record %v remain", id, len(s.history), s.expiring != nil)
		}
		return
	}
	if len(s.history) == 0 {
		violation(t, "%s: in %s with no history", id, s.slave.Current.State)
		return
	}
	if newest := s.history[0]; newest != s.slave.Current {
		violation(t, "%s: current state %+v, newest history entry %+v", id, s.slave.Current, newest)
	}
	for _, u := range s.history {
		if u.Timestamp < s.slave.FirstSeenAt {
			violation(t, "%s: history entry %+v older than the slave (first seen %d)", id, u, s.slave.FirstSeenAt)
		}
	}
	if e := s.expiring; e != nil && machine.ClearsExpiring(e.RevertTo, s.slave.Current.State) {
		violation(t, "%s: expiring record reverting to %s kept in %s", id, e.RevertTo, s.slave.Current.State)
	}
}

// decommissioningSet reads the set the decommission limit is kept on.
func decommissioningSet(t *testing.T) map[string]bool {
	t.Helper()
	out, err := local.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(tables.Slaves), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "#decommissioning"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	if ss, ok := out.Item["members"].(*types.AttributeValueMemberSS); ok {
		for _, id := range ss.Value {
			set[id] = true
		}
	}
	return set
}

// checkLimitSet checks that the decommissioning set holds exactly the
// slaves in a counted state, among ids.
func checkLimitSet(t *testing.T, states map[string]tableState) {
	t.Helper()
	set := decommissioningSet(t)
	for id, s := range states {
		counted := s.slave != nil && s.slave.Current.State.CountsTowardLimit()
		if set[id] != counted {
			violation(t, "%s: in the decommissioning set %v, in a counted state %v", id, set[id], counted)
		}
	}
}
