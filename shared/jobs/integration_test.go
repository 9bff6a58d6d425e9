//go:build integration

package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
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
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

var (
	local  *stack.Local
	tables = stack.Tables
	store  *dynamo.Store
	quiet  = slog.New(slog.NewTextHandler(io.Discard, nil))
	limits = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}
)

const (
	historyRetention = 90 * 24 * time.Hour
	deadRetention    = 7 * 24 * time.Hour
)

// TestMain starts a moto_server of its own and creates the tables from
// template.yaml, so the suite never depends on something already running.
func TestMain(m *testing.M) {
	os.Exit(stack.Main(func(l *stack.Local) int {
		local = l
		store = dynamo.New(local.DynamoDB, tables, historyRetention)
		api = web.Wrap(slaves.New(store, access.Policy{Mode: access.ModeAuthorizer}, limits), web.Options{Logger: quiet})
		return m.Run()
	}))
}

func runner(db dynamo.API) *jobs.Runner {
	return jobs.New(dynamo.New(db, tables, historyRetention), limits, deadRetention, quiet, nil)
}

func expire(t *testing.T, r *jobs.Runner) jobs.Result {
	t.Helper()
	res, err := r.Handle(context.Background(), json.RawMessage(`{"job":"expiry"}`))
	if err != nil {
		t.Fatalf("expiry run: %v", err)
	}
	return res
}

// api is the slave routes behind an authorizer; call signs in as op.
var api http.Handler

func asOperator(r *http.Request) *http.Request {
	return r.WithContext(access.WithIdentity(r.Context(), access.Identity{ID: "op", Email: "op@example.com"}))
}

func call(t *testing.T, method, path, body string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	apidoc.MustLoad(t).Recorder(t, api).ServeHTTP(rec, asOperator(httptest.NewRequest(method, path, strings.NewReader(body))))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s %s: got %d %s, want 200", method, path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// seed reports n machines up, as the scheduler would, and returns their ids.
func seed(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var ids, machines []string
	for i := range n {
		id := fmt.Sprintf("%s-S%d", prefix, i)
		ids = append(ids, id)
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"node-%d.example.com","rackId":"us-east-1a"}`, id, i))
	}
	res, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(`{"machines":[`+strings.Join(machines, ",")+`]}`))
	if err != nil || res.Failed > 0 {
		t.Fatalf("report: %+v, %v", res, err)
	}
	return ids
}

type update struct {
	State   string `json:"state"`
	User    string `json:"user"`
	Message string `json:"message"`
}

func history(t *testing.T, id string) []update {
	t.Helper()
	var h []update
	if err := json.Unmarshal([]byte(call(t, "GET", "/api/slaves/slave/"+id, "")), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

func pending(t *testing.T) map[string]bool {
	t.Helper()
	var recs []struct {
		MachineID string `json:"machineId"`
	}
	if err := json.Unmarshal([]byte(call(t, "GET", "/api/slaves/expiring", "")), &recs); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.MachineID] = true
	}
	return ids
}

// freezeFor freezes the slaves with a revert to ACTIVE after ms, 16 at a
// time, and waits until they are due.
func freezeFor(t *testing.T, ids []string, ms int) {
	t.Helper()
	body := fmt.Sprintf(`{"durationMillis":%d,"revertToState":"ACTIVE","message":"maintenance"}`, ms)
	parallel(len(ids), 16, func(i int) { call(t, "POST", "/api/slaves/slave/"+ids[i]+"/freeze", body) })
	time.Sleep(time.Duration(ms+5) * time.Millisecond)
}

func parallel(n, workers int, f func(i int)) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

func wantReverted(t *testing.T, id string) {
	t.Helper()
	h := history(t, id)
	reverts := 0
	for _, u := range h {
		if u.Message == machine.ExpiryMessage {
			reverts++
		}
	}
	if reverts != 1 || h[0].State != "ACTIVE" || h[0].Message != machine.ExpiryMessage {
		t.Errorf("%s: got history %+v, want exactly one revert to ACTIVE, newest", id, h)
	}
}

func TestAOneSecondFreezeRevertsOnTheNextRun(t *testing.T) {
	id := seed(t, "second", 1)[0]
	r := runner(local.DynamoDB)
	// The runs' clock is driven: the freeze is due once more than a second
	// has passed since it was handled, between before and after, however
	// long the calls took.
	before := time.Now()
	call(t, "POST", "/api/slaves/slave/"+id+"/freeze", `{"durationMillis":1000,"revertToState":"ACTIVE"}`)
	after := time.Now()
	if !pending(t)[id] {
		t.Fatalf("got no expiring record for %s, want one", id)
	}
	r.Now = func() time.Time { return before.Add(time.Second) }
	if res := expire(t, r); res.Applied != 0 {
		t.Errorf("run before the second passed: got %+v, want nothing applied", res)
	}
	r.Now = func() time.Time { return after.Add(time.Second + time.Millisecond) }
	res := expire(t, r)
	if res.Applied != 1 {
		t.Errorf("run after the second passed: got %+v, want 1 applied", res)
	}
	h := history(t, id)
	if h[0].State != "ACTIVE" || h[0].Message != machine.ExpiryMessage || h[0].User != "op@example.com" {
		t.Errorf("got newest entry %+v, want ACTIVE by op@example.com, %q", h[0], machine.ExpiryMessage)
	}
	if pending(t)[id] {
		t.Errorf("got the record still listed, want it gone")
	}
	if res := expire(t, r); res.Due != 0 {
		t.Errorf("run after the revert: got %+v, want nothing due", res)
	}
}

func TestConcurrentTriggersApplyEachRecordOnce(t *testing.T) {
	ids := seed(t, "concurrent", 60)
	freezeFor(t, ids, 1)
	results := make([]jobs.Result, 4)
	parallel(len(results), len(results), func(i int) { results[i] = expire(t, runner(local.DynamoDB)) })
	applied := 0
	for _, res := range results {
		applied += res.Applied
		if res.Failed != 0 {
			t.Errorf("got %+v, want no failure", res)
		}
	}
	if applied != len(ids) {
		t.Errorf("got %d applied over %+v, want %d", applied, results, len(ids))
	}
	for _, id := range ids {
		wantReverted(t, id)
	}
}

// crashAfterWrite is DynamoDB as seen by a trigger that dies right after
// its transaction commits: the write is made, the answer never arrives.
type crashAfterWrite struct{ dynamo.API }

func (c crashAfterWrite) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if _, err := c.API.TransactWriteItems(ctx, in, opts...); err != nil {
		return nil, err
	}
	return nil, errors.New("connection reset: the trigger died")
}

func TestATriggerThatDiesHalfwayIsNotAppliedTwice(t *testing.T) {
	t.Run("dying after the transaction commits", func(t *testing.T) {
		id := seed(t, "crash-commit", 1)[0]
		freezeFor(t, []string{id}, 1)
		if res := expire(t, runner(crashAfterWrite{local.DynamoDB})); res.Failed != 1 {
			t.Errorf("crashing run: got %+v, want 1 failed", res)
		}
		if res := expire(t, runner(local.DynamoDB)); res.Applied != 0 {
			t.Errorf("next run: got %+v, want nothing applied", res)
		}
		wantReverted(t, id)
	})
	t.Run("dying after the state write, before the record delete", func(t *testing.T) {
		// What a trigger that wrote the state and deleted the record in two
		// steps would leave: the revert is stored, the record too.
		id := seed(t, "crash-between", 1)[0]
		freezeFor(t, []string{id}, 1)
		err := store.Apply(context.Background(), id, func(snap machine.Snapshot) (*machine.Plan, error) {
			entry := machine.Update{SlaveID: id, State: machine.Active, Timestamp: time.Now().UnixMilli(), User: snap.Expiring.User, Message: machine.ExpiryMessage}
			slave := *snap.Slave
			slave.Current = entry
			return &machine.Plan{Kind: machine.Transitions, Slave: slave, Entry: &entry}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		res := expire(t, runner(local.DynamoDB))
		if res.Applied != 0 || res.Skipped != 1 {
			t.Errorf("next run: got %+v, want the record skipped", res)
		}
		wantReverted(t, id)
		if pending(t)[id] {
			t.Errorf("got the record still listed, want it deleted")
		}
	})
}

// userFirst is DynamoDB as seen by a trigger that reads a slave just before
// a user changes it: the user's change lands between the trigger's read and
// its write.
type userFirst struct {
	dynamo.API
	change func()
	once   sync.Once
}

func (u *userFirst) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	out, err := u.API.TransactGetItems(ctx, in, opts...)
	u.once.Do(u.change)
	return out, err
}

func TestAUserChangeBeforeTheRevertWins(t *testing.T) {
	t.Run("activating before expiry leaves the trigger nothing to do", func(t *testing.T) {
		id := seed(t, "user-before", 1)[0]
		freezeFor(t, []string{id}, 1)
		call(t, "POST", "/api/slaves/slave/"+id+"/activate", "")
		before := len(history(t, id))
		res := expire(t, runner(local.DynamoDB))
		if res.Applied != 0 {
			t.Errorf("got %+v, want nothing applied", res)
		}
		if got := len(history(t, id)); got != before {
			t.Errorf("got %d history entries, want %d", got, before)
		}
		if pending(t)[id] {
			t.Errorf("got the record still listed, want it gone")
		}
	})
	t.Run("activating while the trigger runs", func(t *testing.T) {
		id := seed(t, "user-during", 1)[0]
		freezeFor(t, []string{id}, 1)
		db := &userFirst{API: local.DynamoDB, change: func() { call(t, "POST", "/api/slaves/slave/"+id+"/activate", "") }}
		res := expire(t, runner(db))
		if res.Applied != 0 || res.Superseded != 1 {
			t.Errorf("got %+v, want the record superseded", res)
		}
		h := history(t, id)
		if len(h) != 3 || h[0].State != "ACTIVE" || h[0].Message == machine.ExpiryMessage {
			t.Errorf("got history %+v, want up, freeze, the user's activate", h)
		}
	})
	t.Run("a revert that became illegal deletes the record and changes nothing", func(t *testing.T) {
		id := seed(t, "user-illegal", 1)[0]
		// Its decommission holds one of the limit's two places: free it,
		// so that later tests find the places they count on.
		t.Cleanup(func() { _, _ = store.Delete(context.Background(), id, nil) })
		call(t, "POST", "/api/slaves/slave/"+id+"/decommission", "")
		before := len(history(t, id))
		// A decommission clears a pending revert to FROZEN (docs/behaviour.md "Expiring changes"); a
		// record that survived anyway, written raw, is skipped.
		putRecord(t, id, "FROZEN", time.Now().Add(-time.Minute).UnixMilli(), time.Now().Add(time.Hour))
		res := expire(t, runner(local.DynamoDB))
		if res.Skipped != 1 || res.Applied != 0 {
			t.Errorf("got %+v, want 1 skipped", res)
		}
		if got := len(history(t, id)); got != before {
			t.Errorf("got %d history entries, want %d", got, before)
		}
	})
}

// putRecord writes an expiring record straight to the table, as a record
// left behind by an older version or a partial restore would be.
func putRecord(t *testing.T, id, revert string, dueAt int64, ttl time.Time) {
	t.Helper()
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	_, err := local.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(tables.Expiring), Item: map[string]types.AttributeValue{
		"machineId": s(id), "actionId": s("raw-" + id), "revertToState": s(revert), "startMillis": n(dueAt - 1),
		"dueAt": n(dueAt), "dueShard": n(0), "expiresAt": n(ttl.Unix()),
		"request": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"durationMillis": n(1), "revertToState": s(revert)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRecordsOfGoneSlavesAreNeverListedAndAreDropped(t *testing.T) {
	putRecord(t, "gone-S0", "ACTIVE", time.Now().Add(-time.Minute).UnixMilli(), time.Now().Add(time.Hour))
	if pending(t)["gone-S0"] {
		t.Errorf("got a record of a gone slave listed, want it hidden")
	}
	res := expire(t, runner(local.DynamoDB))
	if res.Dropped != 1 {
		t.Errorf("got %+v, want 1 dropped", res)
	}
	if res := expire(t, runner(local.DynamoDB)); res.Due != 0 {
		t.Errorf("next run: got %+v, want nothing due", res)
	}
}

func TestRecordsPastTheirTTLAreNotListed(t *testing.T) {
	id := seed(t, "ttl", 1)[0]
	putRecord(t, id, "FROZEN", time.Now().Add(time.Hour).UnixMilli(), time.Now().Add(-time.Minute))
	if pending(t)[id] {
		t.Errorf("got a record past its TTL listed, want it hidden")
	}
}

func TestADeferredRevertStaysListedAndAppliesOnceASlotFrees(t *testing.T) {
	ids := seed(t, "deferred", 3)
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = store.Delete(context.Background(), id, nil)
		}
	})
	waiting, busy := ids[0], ids[1:]
	unlimited := machine.Limits{MaxExpiring: limits.MaxExpiring}
	for _, id := range busy {
		c := machine.Change{SlaveID: id, Target: machine.StartingDecommission, Now: func() int64 { return time.Now().UnixMilli() }}
		if err := store.Apply(context.Background(), id, machine.UserChange(c, unlimited)); err != nil {
			t.Fatal(err)
		}
	}
	// The other tests share the tables: the limit is the slots taken now.
	taken := 0
	for _, st := range []machine.State{machine.StartingDecommission, machine.Decommissioning} {
		err := store.ListByState(context.Background(), st, func(machine.Slave) error {
			taken++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	full := jobs.New(store, machine.Limits{MaxDecommissioning: taken, MaxExpiring: limits.MaxExpiring}, deadRetention, quiet, nil)
	// Due an hour ago, and within an hour of being collected by TTL, as a
	// record that has waited for a slot for most of a week would be.
	putRecord(t, waiting, "STARTING_DECOMMISSION", time.Now().Add(-time.Hour).UnixMilli(), time.Now().Add(time.Hour))
	if res := expire(t, full); res.Deferred != 1 {
		t.Fatalf("got %+v, want the revert deferred", res)
	}
	if !pending(t)[waiting] {
		t.Fatalf("got the deferred record unlisted, want it listed while it waits")
	}
	out, err := local.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(tables.Expiring),
		Key: map[string]types.AttributeValue{"machineId": &types.AttributeValueMemberS{Value: waiting}}})
	if err != nil {
		t.Fatal(err)
	}
	var ttl int64
	fmt.Sscan(out.Item["expiresAt"].(*types.AttributeValueMemberN).Value, &ttl)
	if min := time.Now().Add(6 * 24 * time.Hour).Unix(); ttl < min {
		t.Errorf("got TTL %d, want it moved at least six days ahead (%d) while the record waits", ttl, min)
	}
	call(t, "POST", "/api/slaves/slave/"+busy[0]+"/activate", "")
	if res := expire(t, full); res.Applied != 1 {
		t.Fatalf("got %+v, want the revert applied once a slot freed", res)
	}
	if h := history(t, waiting); h[0].State != "STARTING_DECOMMISSION" || h[0].Message != machine.ExpiryMessage || pending(t)[waiting] {
		t.Errorf("got history %+v, want the revert applied and the record gone", h)
	}
}

func TestHistoryExpiresOnlyOnceSuperseded(t *testing.T) {
	id := seed(t, "history", 1)[0]
	call(t, "POST", "/api/slaves/slave/"+id+"/freeze", "")
	out, err := local.DynamoDB.Query(context.Background(), &dynamodb.QueryInput{
		TableName:                 aws.String(tables.History),
		KeyConditionExpression:    aws.String("slaveId = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("got %d entries, want 2", len(out.Items))
	}
	// The superseded entry expires the retention after it was superseded:
	// after the current entry's time.
	first, current := out.Items[0], out.Items[1]
	ts := current["timestamp"].(*types.AttributeValueMemberN).Value
	var ms int64
	fmt.Sscan(ts, &ms)
	want := fmt.Sprint((ms + historyRetention.Milliseconds()) / 1000)
	if got, ok := first["expiresAt"].(*types.AttributeValueMemberN); !ok || got.Value != want {
		t.Errorf("superseded entry expiresAt: got %v, want %s", first["expiresAt"], want)
	}
	if _, ok := current["expiresAt"]; ok {
		t.Errorf("current entry: got expiresAt %v, want none", current["expiresAt"])
	}
}

func TestRetentionRemovesOnlyDeadSlavesPastIt(t *testing.T) {
	// Reports dated in the past: a slave's history follows the report times.
	reportAt := func(at time.Time, machines string) {
		event := fmt.Sprintf(`{"detail-type":"Machine Report","time":%q,"detail":{"machines":[%s]}}`, at.UTC().Format(time.RFC3339), machines)
		if res, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(event)); err != nil || res.Failed > 0 {
			t.Fatalf("report: %+v, %v", res, err)
		}
	}
	ids := []string{"retention-S0", "retention-S1", "retention-S2"}
	for _, id := range ids {
		reportAt(time.Now().Add(-30*24*time.Hour), fmt.Sprintf(`{"id":%q,"host":"h"}`, id))
	}
	reportAt(time.Now().Add(-deadRetention-time.Hour), `{"id":"retention-S0","lost":true}`) // DEAD for longer than the retention
	reportAt(time.Now().Add(-time.Minute), `{"id":"retention-S1","lost":true}`)             // DEAD recently
	res, err := runner(local.DynamoDB).Handle(context.Background(), json.RawMessage(`{"job":"retention"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 1 {
		t.Errorf("got %+v, want the old DEAD slave removed", res)
	}
	for i, want := range []int{404, 200, 200} {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, asOperator(httptest.NewRequest("GET", "/api/slaves/slave/"+ids[i]+"/details", nil)))
		if rec.Code != want {
			t.Errorf("%s: got %d, want %d", ids[i], rec.Code, want)
		}
	}
	if h := history(t, ids[0]); len(h) != 0 {
		t.Errorf("got history %+v of a removed slave, want none", h)
	}
}

// Four hundred records: every one of the run's 16 lanes applies about 25
// in order, which is what a large backlog asks of it. The throughput at
// scale is measured by make bench, not here.
func TestOneRunAppliesManyDueRecords(t *testing.T) {
	const n = 400
	ids := seed(t, "bulk", n)
	freezeFor(t, ids, 1)
	start := time.Now()
	res := expire(t, runner(local.DynamoDB))
	t.Logf("applied %d due records in %v (%d ms by the run's own clock)", res.Applied, time.Since(start), res.Millis)
	if res.Applied != n || res.Failed != 0 || res.Remaining != 0 {
		t.Errorf("got %+v, want %d applied", res, n)
	}
	if left := pending(t); len(left) != 0 {
		t.Errorf("got %d records still listed, want none", len(left))
	}
}
