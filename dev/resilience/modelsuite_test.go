//go:build resilience

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"pgregory.net/rapid"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// TestResilienceModel drives the real handlers (slave routes over HTTP,
// machine reports, the expiry and retention jobs) with random sequences of
// operations on a virtual clock, and compares every answer and, after every
// step, the stored state (details, history, expiring records) with the
// reference model of model_test.go. rapid shrinks a failing sequence to a
// short one, which the failure prints step by step.
//
// Each sequence works on slaves of its own (a prefix per sequence) and
// deletes them at the end, so sequences do not see each other in the shared
// tables; slaves left by other tests are loaded into the model.
func TestResilienceModel(t *testing.T) {
	defer countFailure(t)
	rapidDefaults(20, 40)
	modelConfig.identicalKeepsAge = !*strictDescriptions
	h := newModelHarness(t)
	rapid.Check(t, func(rt *rapid.T) {
		w := h.newWorld(rt)
		rt.Repeat(w.actions())
		w.checkAll(rt, "end of sequence")
	})
	t.Logf("model-checked operations: %d; outcomes reached: %v", figures.modelOps.Load(), h.seen)
}

// countFailure counts a failed property test once as a violation: rapid
// reruns a failing sequence many times while shrinking it.
func countFailure(t *testing.T) {
	if t.Failed() {
		figures.violations.Add(1)
	}
}

// rapidDefaults sets how many sequences rapid tries and how long they are,
// unless -rapid.checks, -rapid.steps or their environment variables say.
func rapidDefaults(checks, steps int) {
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["rapid.checks"] && os.Getenv("RAPID_CHECKS") == "" {
		_ = flag.Set("rapid.checks", strconv.Itoa(checks))
	}
	if !given["rapid.steps"] && os.Getenv("RAPID_STEPS") == "" {
		_ = flag.Set("rapid.steps", strconv.Itoa(steps))
	}
	// A failing sequence is reported with its seed; no fail file is
	// written into the source tree.
	if !given["rapid.failfile"] && !given["rapid.nofailfile"] && os.Getenv("RAPID_NOFAILFILE") == "" {
		_ = flag.Set("rapid.nofailfile", "true")
	}
	// Each try replays a sequence against the emulator, about a second:
	// give shrinking time for a short reproduction.
	if !given["rapid.shrinktime"] && os.Getenv("RAPID_SHRINKTIME") == "" {
		_ = flag.Set("rapid.shrinktime", "90s")
	}
}

// The configuration of the service under test, small enough that the
// clock's steps reach every retention.
var modelConfig = refConfig{
	maxDecommissioning: limits.MaxDecommissioning,
	maxExpiring:        limits.MaxExpiring.Milliseconds(),
	historyRetention:   (20 * time.Minute).Milliseconds(),
	deadRetention:      (30 * time.Minute).Milliseconds(),
	idempotencyWindow:  machine.IdempotencyWindow.Milliseconds(),
	lossFraction:       machine.DefaultLossBrake.MaxFraction,
	lossWindow:         machine.DefaultLossBrake.Window.Milliseconds(),
}

var strictDescriptions = flag.Bool("resilience.strict-descriptions", false,
	"model: a report that confirms a description unchanged makes it that report's, so an older report never replaces it")

// virtualClock is the one clock of every handler under test. Only the
// sequence moves it, so a run is the same every time it is replayed.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) ms() int64 { return c.Now().UnixMilli() }

// startOver moves the clock on by at least d, to offset past a whole
// minute.
func (c *virtualClock) startOver(d, offset time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d).Truncate(time.Minute).Add(offset)
	c.mu.Unlock()
}

func (c *virtualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// modelHarness is the service under test, built once per test: the slave
// routes behind HTTP, the report handler and the jobs, all on one clock.
type modelHarness struct {
	clock     *virtualClock
	store     *dynamo.Store
	url       string
	client    *http.Client
	inventory *inventory.Handler
	jobs      *jobs.Runner
	sequences atomic.Int64
	// seen counts the outcomes the sequences reached, to show in the log
	// that the generators reach the cases that matter.
	seen map[string]int
}

func (h *modelHarness) saw(outcome string) { h.seen[outcome]++ }

// testUsers are the callers: the API Gateway identities the requests carry.
var testUsers = map[string]access.Identity{
	"alice": {ID: "alice", Email: "alice@example.com"},
	"bob":   {ID: "bob", Email: "bob@example.com"},
	"robot": {ID: "robot"}, // a service identity without an email
}

func newModelHarness(t *testing.T) *modelHarness {
	// The virtual clock starts after anything the real clock of other tests
	// wrote, so the decommissioning set's order never pulls the model's
	// timestamps back to real time.
	clock := &virtualClock{now: time.Now().Add(24 * time.Hour).Truncate(time.Second)}
	store := dynamo.New(local.DynamoDB, tables, time.Duration(modelConfig.historyRetention)*time.Millisecond)
	sh := slaves.New(store, access.Policy{Mode: access.ModeAuthorizer}, limits)
	sh.Now = clock.Now
	srv := httptest.NewServer(checked(t, asUser(web.Wrap(sh, web.Options{Logger: quiet}))))
	t.Cleanup(srv.Close)
	inv := inventory.New(store, machine.DefaultLossBrake, quiet, nil)
	inv.Now = clock.Now
	jobs := jobs.New(store, limits, time.Duration(modelConfig.deadRetention)*time.Millisecond, quiet, nil)
	jobs.Now = clock.Now
	return &modelHarness{clock: clock, store: store, url: srv.URL, client: srv.Client(), inventory: inv, jobs: jobs, seen: map[string]int{}}
}

// asUser gives the request the identity its X-Test-User header names, as
// API Gateway's authorizer would.
func asUser(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := testUsers[r.Header.Get("X-Test-User")]; ok {
			r = r.WithContext(access.WithIdentity(r.Context(), id))
		}
		h.ServeHTTP(w, r)
	})
}

// world is one sequence: its slaves, the model, and what it sent.
type world struct {
	h       *modelHarness
	model   *refModel
	prefix  string
	main    []string // the slaves users change
	fillers []string // more machines, so that losses can trip the brake
	ghost   string   // an id never reported
	sent    []sentChange
	step    int
	t0      int64 // the clock when the sequence started
}

// sentChange is a change request as sent, for replaying it.
type sentChange struct {
	action, user string
	c            refChange
}

func (h *modelHarness) newWorld(t *rapid.T) *world {
	n := h.sequences.Add(1)
	// Nothing of the previous sequence is recent, and every sequence starts
	// at the same place in a second: event times are whole seconds, and a
	// replay must see them fall where the first run did. Not on the second:
	// a report's time is then most of a second before the changes made at
	// the same instant, which is when its entry could precede theirs.
	h.clock.startOver(time.Hour, 600*time.Millisecond)
	w := &world{h: h, model: newRefModel(modelConfig), prefix: fmt.Sprintf("mb%03d-", n), t0: h.clock.ms()}
	w.ghost = w.prefix + "ghost"
	for i := range rapid.IntRange(3, 6).Draw(t, "slaves") {
		w.main = append(w.main, fmt.Sprintf("%ss%d", w.prefix, i))
	}
	for i := range rapid.SampledFrom([]int{0, 0, 7, 9}).Draw(t, "fillers") {
		w.fillers = append(w.fillers, fmt.Sprintf("%sf%d", w.prefix, i))
	}
	t.Cleanup(func() { w.release(t) })
	w.loadForeign(t)

	// Every sequence starts with its machines reported up.
	rep := refReport{}
	for _, id := range slices.Concat(w.main, w.fillers) {
		rep.Machines = append(rep.Machines, refMachine{ID: id, Host: id + ".example.com"})
	}
	w.report(t, rep)
	// Some sequences start with the decommission limit full, so that
	// refusals and deferred reverts are common enough to be checked.
	if rapid.IntRange(0, 2).Draw(t, "start with the limit full") == 0 {
		for _, id := range w.main[:limits.MaxDecommissioning] {
			w.sendChange(t, "decommission", "alice", refChange{Slave: id, Message: "drain"})
		}
	}
	return w
}

// loadForeign puts the slaves other tests left, and the decommission
// places they hold, into the model: they count for the limit, the brake and
// complete reports.
func (w *world) loadForeign(t *rapid.T) {
	var all []machine.Slave
	err := w.h.store.List(context.Background(), func(s machine.Slave) error {
		all = append(all, s)
		return nil
	})
	if err != nil {
		t.Fatalf("list slaves: %v", err)
	}
	known := map[string]bool{}
	for _, s := range all {
		known[s.ID] = true
		cur := s.Current
		w.model.slaves[s.ID] = &refSlave{ID: s.ID, FirstSeenAt: s.FirstSeenAt, describedAt: s.DescribedAt,
			history: []refEntry{{State: string(cur.State), Timestamp: cur.Timestamp, User: cur.User, Message: cur.Message}}}
	}
	out, err := local.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(tables.Slaves), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "#decommissioning"}},
	})
	if err != nil {
		t.Fatalf("read the decommissioning set: %v", err)
	}
	var set struct {
		Members []string `dynamodbav:"members,stringset"`
		LastAt  int64    `dynamodbav:"lastAt"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &set); err != nil {
		t.Fatalf("decode the decommissioning set: %v", err)
	}
	w.model.limitAt = set.LastAt
	for _, id := range set.Members {
		if !known[id] {
			w.model.phantoms++
		}
	}
	if len(all) > 0 || w.model.phantoms > 0 {
		t.Logf("foreign slaves: %d, limit places held by no slave: %d", len(all), w.model.phantoms)
	}
}

// release deletes the sequence's slaves.
func (w *world) release(t *rapid.T) {
	for _, id := range w.ids() {
		if _, err := w.h.store.Delete(context.Background(), id, nil); err != nil {
			t.Errorf("release %s: %v", id, err)
		}
	}
}

// ids are every id the sequence uses.
func (w *world) ids() []string { return slices.Concat(w.main, w.fillers, []string{w.ghost}) }

// actions is the table of operations a sequence is made of, each with its
// weight: how often rapid picks it relative to the others.
func (w *world) actions() map[string]func(*rapid.T) {
	table := []struct {
		name   string
		weight int
		run    func(*rapid.T)
	}{
		{"change", 4, w.changeStep},
		{"replay", 1, w.replayStep},
		{"report", 3, w.reportStep},
		{"expiry", 3, w.expiryStep},
		{"retention", 1, w.retentionStep},
		{"delete", 1, w.deleteStep},
		{"delete-expiring", 1, w.deleteExpiringStep},
		{"delete-dead", 1, w.deleteDeadStep},
		{"advance", 3, w.advanceStep},
		{"check", 1, w.checkList},
	}
	// rapid picks among the names uniformly: a weight is that many names.
	actions := map[string]func(*rapid.T){}
	for _, a := range table {
		for i := range a.weight {
			actions[fmt.Sprintf("%s#%d", a.name, i)] = a.run
		}
	}
	return actions
}

// The generators' pools: small, so that values collide (same actionId, same
// key, same description) as often as the interesting cases need.
var (
	actionTargets = map[string]string{"freeze": mFrozen, "decommission": mStarting, "activate": mActive}
	durations     = []int64{1, 1000, 60_000, 5 * 60_000, 25 * 60_000, 1, 1, 1000, 1000, 60_000, 0, -1, 30*24*3600_000 + 1}
	// validReverts are the states each action may revert to, drawn most of
	// the time so that expiring changes get through and fall due.
	validReverts = map[string][]string{
		"freeze":       {mActive, mStarting},
		"activate":     {mFrozen, mStarting},
		"decommission": {mActive},
	}
	advances = []time.Duration{time.Millisecond, 250 * time.Millisecond, 999 * time.Millisecond, time.Second,
		1500 * time.Millisecond, 59 * time.Second, 61 * time.Second, 5 * time.Minute, 10 * time.Minute, 11 * time.Minute,
		21 * time.Minute, 31 * time.Minute}
)

func (w *world) changeStep(t *rapid.T) {
	ids := append(slices.Clone(w.main), w.ghost)
	c := refChange{
		Slave:    rapid.SampledFrom(ids).Draw(t, "slave"),
		Message:  rapid.SampledFrom([]string{"", "", "disk", "maint"}).Draw(t, "message"),
		ActionID: rapid.SampledFrom([]string{"", "", "T-1", "T-2"}).Draw(t, "actionId"),
		Key:      rapid.SampledFrom([]string{"", "", "", "k1", "k2"}).Draw(t, "key"),
	}
	// Decommissions often enough to fill the limit.
	action := rapid.SampledFrom([]string{"freeze", "decommission", "decommission", "activate"}).Draw(t, "action")
	user := rapid.SampledFrom([]string{"alice", "bob", "robot"}).Draw(t, "user")
	switch rapid.IntRange(0, 6).Draw(t, "expiring") {
	case 3, 4, 5:
		d := rapid.SampledFrom(durations).Draw(t, "durationMillis")
		pool := mStates
		if rapid.IntRange(0, 2).Draw(t, "valid revert") > 0 {
			pool = validReverts[action]
		}
		r := rapid.SampledFrom(pool).Draw(t, "revertToState")
		c.Duration, c.Revert = &d, &r
		c.Kill = rapid.Bool().Draw(t, "kill")
	case 6:
		d := rapid.SampledFrom(durations).Draw(t, "durationMillis")
		c.Duration = &d
	}
	w.sendChange(t, action, user, c)
}

// replayStep sends an earlier change request again, unchanged: with its
// Idempotency-Key it must get the first answer, without it it is a new
// request.
func (w *world) replayStep(t *rapid.T) {
	if len(w.sent) == 0 {
		t.Skip("nothing sent yet")
	}
	s := w.sent[rapid.IntRange(0, len(w.sent)-1).Draw(t, "request")]
	w.sendChange(t, s.action, s.user, s.c)
}

func (w *world) sendChange(t *rapid.T, action, user string, c refChange) {
	id := testUsers[user]
	c.Target, c.Caller, c.Email = actionTargets[action], id.ID, id.Email
	w.sent = append(w.sent, sentChange{action, user, c})
	body := changeBody(c)
	now := w.h.clock.ms()
	w.logStep(t, "%s %s by %s, body %s, key %q", action, c.Slave, user, body, c.Key)
	header := http.Header{"X-Test-User": {user}}
	if c.Key != "" {
		header.Set("Idempotency-Key", c.Key)
	}
	got := w.call(t, "POST", "/api/slaves/slave/"+c.Slave+"/"+action, body, header)
	want := w.model.Change(now, c)
	if want.status == 200 && c.Duration != nil {
		w.h.saw("expiring change accepted")
	}
	w.expectAnswer(t, got, want)
	w.checkSlaves(t, c.Slave)
}

// changeBody is the request body: only the fields the request has.
func changeBody(c refChange) string {
	m := map[string]any{}
	if c.Message != "" {
		m["message"] = c.Message
	}
	if c.Duration != nil {
		m["durationMillis"] = *c.Duration
	}
	if c.Revert != nil {
		m["revertToState"] = *c.Revert
	}
	if c.ActionID != "" {
		m["actionId"] = c.ActionID
	}
	if c.Kill {
		m["killTasksOnDecommissionTimeout"] = true
	}
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (w *world) deleteStep(t *rapid.T) {
	id := rapid.SampledFrom(append(slices.Clone(w.main), w.ghost)).Draw(t, "slave")
	w.logStep(t, "delete %s", id)
	got := w.call(t, "DELETE", "/api/slaves/slave/"+id, "", http.Header{"X-Test-User": {"alice"}})
	w.expectAnswer(t, got, w.model.Delete(id))
	w.checkSlaves(t, id)
}

func (w *world) deleteExpiringStep(t *rapid.T) {
	id := rapid.SampledFrom(append(slices.Clone(w.main), w.ghost)).Draw(t, "slave")
	w.logStep(t, "delete expiring of %s", id)
	got := w.call(t, "DELETE", "/api/slaves/slave/"+id+"/expiring", "", http.Header{"X-Test-User": {"bob"}})
	w.expectAnswer(t, got, w.model.DeleteExpiring(id))
	w.checkSlaves(t, id)
}

func (w *world) deleteDeadStep(t *rapid.T) {
	w.logStep(t, "delete dead")
	got := w.call(t, "DELETE", "/api/slaves/dead", "", http.Header{"X-Test-User": {"alice"}})
	w.model.DeleteDead(math.MaxInt64)
	w.expectAnswer(t, got, ok200)
	w.checkSlaves(t, w.main...)
}

func (w *world) advanceStep(t *rapid.T) {
	d := rapid.SampledFrom(advances).Draw(t, "by")
	w.h.clock.advance(d)
	w.logStep(t, "clock +%v", d)
}

func (w *world) retentionStep(t *rapid.T) {
	now := w.h.clock.ms()
	w.logStep(t, "retention job")
	figures.modelOps.Add(1)
	res, err := w.h.jobs.Handle(context.Background(), json.RawMessage(`{"job":"retention"}`))
	if err != nil {
		w.fail(t, "retention job: %v", err)
	}
	if want := w.model.DeleteDead(now - w.model.cfg.deadRetention); res.Removed != want {
		w.fail(t, "retention job removed %d slaves, want %d", res.Removed, want)
	}
	w.checkSlaves(t, w.main...)
}

// expiryStep runs the expiry trigger. It applies the due records in
// parallel, so when their order matters (the decommission limit, and the
// order of moves into and out of it) the model accepts any order and keeps
// the one the tables show.
func (w *world) expiryStep(t *rapid.T) {
	now := w.h.clock.ms()
	w.logStep(t, "expiry job")
	figures.modelOps.Add(1)
	res, err := w.h.jobs.Handle(context.Background(), json.RawMessage(`{"job":"expiry"}`))
	if err != nil {
		w.fail(t, "expiry job: %v", err)
	}
	due := w.model.Due(now)
	var plain, ordered []string
	for _, id := range due {
		s := w.model.slaves[id]
		if s != nil && (counted(w.model.expiring[id].Revert) || counted(s.current().State)) {
			ordered = append(ordered, id)
		} else {
			plain = append(plain, id)
		}
	}
	w.h.saw(fmt.Sprintf("expiry applied>0:%v deferred>0:%v skipped>0:%v", res.Applied > 0, res.Deferred > 0, res.Skipped > 0))
	got := fmt.Sprintf("due=%d applied=%d skipped=%d dropped=%d deferred=%d failed=%d", res.Due, res.Applied, res.Skipped, res.Dropped, res.Deferred, res.Failed)
	w.settle(t, permutations(ordered), func(m *refModel, order []string) string {
		var r refExpiryResult
		r.Due = len(due)
		for _, id := range slices.Concat(plain, order) {
			m.Expire(now, id, &r)
		}
		return fmt.Sprintf("due=%d applied=%d skipped=%d dropped=%d deferred=%d failed=0", r.Due, r.Applied, r.Skipped, r.Dropped, r.Deferred)
	}, got)
}

// settle applies, on a copy of the model, each order of a batch of
// operations that the service runs in parallel, and keeps the first whose
// outcome (got, the handler's counts) and tables match what the service
// shows. None matching fails with the differences of the first order.
func (w *world) settle(t *rapid.T, orders [][]string, apply func(*refModel, []string) string, got string) {
	obs := w.observe(t, false, w.main...)
	var firstDiff string
	for i, order := range orders {
		m := w.model.clone()
		want := apply(m, order)
		diff := ""
		if want != got {
			diff = fmt.Sprintf("got %s, want %s\n", got, want)
		}
		diff += obs.diff(m, w.h.clock.ms(), w.ids())
		if diff == "" {
			w.model = m
			return
		}
		if i == 0 {
			firstDiff = diff
		}
	}
	w.fail(t, "%s", firstDiff)
}

// permutations lists every order of ids (ids is short: the slaves of one
// sequence).
func permutations(ids []string) [][]string {
	if len(ids) <= 1 {
		return [][]string{ids}
	}
	var out [][]string
	for i := range ids {
		rest := slices.Concat(ids[:i], ids[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]string{ids[i]}, p...))
		}
	}
	return out
}

// The report generator's choices.
var (
	// Mostly the current second, as EventBridge stamps a fresh report.
	eventTimes = []string{"none", "envelope-without-time", "now", "now", "now", "-1s", "-3s", "-10m", "+5s", "+1h"}
	offsets    = map[string]time.Duration{"now": 0, "-1s": -time.Second, "-3s": -3 * time.Second, "-10m": -10 * time.Minute, "+5s": 5 * time.Second, "+1h": time.Hour}
)

func (w *world) reportStep(t *rapid.T) {
	rep := refReport{
		Complete:    rapid.IntRange(0, 4).Draw(t, "complete") == 0,
		ConfirmLoss: rapid.IntRange(0, 3).Draw(t, "confirmLoss") == 0,
	}
	when := rapid.SampledFrom(eventTimes).Draw(t, "time")
	if d, ok := offsets[when]; ok {
		// EventBridge times are whole seconds.
		at := floorDiv(w.h.clock.Now().Add(d).UnixMilli(), 1000) * 1000
		rep.EventTime = &at
	}
	for _, id := range append(slices.Clone(w.main), w.ghost) {
		if rapid.IntRange(0, 2).Draw(t, "include "+id) > 0 {
			rep.Machines = append(rep.Machines, w.drawMachine(t, id))
		}
	}
	if len(rep.Machines) > 0 && rapid.IntRange(0, 4).Draw(t, "duplicate") == 0 {
		x := rep.Machines[rapid.IntRange(0, len(rep.Machines)-1).Draw(t, "duplicated")]
		rep.Machines = append(rep.Machines, w.drawMachine(t, x.ID))
	}
	if len(w.fillers) > 0 {
		mode := rapid.SampledFrom([]string{"omit", "up", "lose1", "lose3", "lose4"}).Draw(t, "fillers")
		for i, id := range w.fillers {
			switch {
			case mode == "omit":
			case strings.HasPrefix(mode, "lose") && i < int(mode[4]-'0'):
				rep.Machines = append(rep.Machines, refMachine{ID: id, Host: id + ".example.com", Lost: true})
			default:
				rep.Machines = append(rep.Machines, refMachine{ID: id, Host: id + ".example.com"})
			}
		}
	}
	switch rapid.IntRange(0, 11).Draw(t, "malformed") {
	case 0:
		rep.NoMachines = true
	case 1:
		rep.Machines = append(rep.Machines, refMachine{Host: "no-id.example.com"})
	}
	rep.envelope = when != "none"
	w.report(t, rep)
}

// drawMachine draws what a report says of machine id: up or lost, its
// running tasks, and a description from small pools or, as most reports
// do, the one it has.
func (w *world) drawMachine(t *rapid.T, id string) refMachine {
	x := refMachine{
		ID:        id,
		Host:      id + rapid.SampledFrom([]string{".a", ".b"}).Draw(t, "host") + ".example.com",
		Rack:      rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, "rack"),
		Resources: rapid.SampledFrom([]string{"", `{"cpus":8}`, `{"cpus":16,"mem":1024}`}).Draw(t, "resources"),
		Lost:      rapid.IntRange(0, 2).Draw(t, "lost") == 0,
		Malformed: rapid.IntRange(0, 9).Draw(t, "malformed entry") == 0,
	}
	if rapid.Bool().Draw(t, "attributes") {
		x.Attributes = map[string]string{"zone": rapid.SampledFrom([]string{"1", "2"}).Draw(t, "zone")}
	}
	if n := rapid.SampledFrom([]int{-1, -1, 0, 2}).Draw(t, "runningTasks"); n >= 0 {
		x.RunningTasks = &n
	}
	if s := w.model.slaves[id]; s != nil && rapid.Bool().Draw(t, "unchanged description") {
		x.Host, x.Rack, x.Attributes, x.Resources = s.Host, s.Rack, maps.Clone(s.Attributes), s.Resources
	}
	return x
}

// report sends a report through the inventory handler and checks what it
// did. The handler applies the machines of a report in parallel; only the
// order of moves into and out of the decommission limit can tell, so the
// model tries each order of those.
func (w *world) report(t *rapid.T, rep refReport) {
	now := w.h.clock.ms()
	event := reportEvent(rep)
	w.logStep(t, "report %s", event)
	res, err := w.h.inventory.Handle(context.Background(), json.RawMessage(event))
	figures.requests.Add(1)
	figures.modelOps.Add(1)
	at, obs, want := w.model.Observations(now, rep)
	if want.Refused {
		if err == nil {
			w.fail(t, "report accepted, want it refused whole")
		}
		w.h.saw("report refused")
		w.checkSlaves(t, w.main...)
		return
	}
	if err != nil {
		w.fail(t, "report failed: %v", err)
	}
	var plain []refObservation
	byID := map[string]refObservation{}
	var ordered []string
	for _, o := range obs {
		if s := w.model.slaves[o.ID]; s != nil && counted(s.current().State) {
			ordered = append(ordered, o.ID)
			byID[o.ID] = o
		} else {
			plain = append(plain, o)
		}
	}
	got := fmt.Sprintf("absent=%d held=%d", res.Absent, res.Held)
	w.h.saw(fmt.Sprintf("report absent>0:%v held>0:%v", res.Absent > 0, res.Held > 0))
	w.settle(t, permutations(ordered), func(m *refModel, order []string) string {
		for _, o := range plain {
			m.Observe(now, at, o)
		}
		for _, id := range order {
			m.Observe(now, at, byID[id])
		}
		return fmt.Sprintf("absent=%d held=%d", want.Absent, want.Held)
	}, got)
}

// reportEvent is the event of a report: an EventBridge "Machine Report"
// event, or its bare detail.
func reportEvent(rep refReport) string {
	detail := map[string]any{}
	if rep.Complete {
		detail["complete"] = true
	}
	if rep.ConfirmLoss {
		detail["confirmLoss"] = true
	}
	if !rep.NoMachines {
		machines := []any{}
		for _, x := range rep.Machines {
			machines = append(machines, machineJSON(x))
		}
		detail["machines"] = machines
	}
	if !rep.envelope {
		b, _ := json.Marshal(detail)
		return string(b)
	}
	env := map[string]any{"detail-type": "Machine Report", "source": "scheduler", "detail": detail}
	if rep.EventTime != nil {
		env["time"] = time.UnixMilli(*rep.EventTime).UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(env)
	return string(b)
}

func machineJSON(x refMachine) map[string]any {
	m := map[string]any{"host": x.Host}
	if x.ID != "" {
		m["id"] = x.ID
	}
	if x.Rack != "" {
		m["rackId"] = x.Rack
	}
	if x.Attributes != nil {
		m["attributes"] = x.Attributes
	}
	if x.Resources != "" {
		m["resources"] = json.RawMessage(x.Resources)
	}
	if x.Lost {
		m["lost"] = true
	}
	if x.RunningTasks != nil {
		m["runningTasks"] = *x.RunningTasks
	}
	if x.Malformed {
		m["resources"] = 5 // not an object: the entry is skipped, the machine still counts as reported
	}
	return m
}

// logStep numbers and logs a step; a failing sequence prints them all.
func (w *world) logStep(t *rapid.T, format string, args ...any) {
	w.step++
	t.Logf("step %d at %s: %s", w.step, w.relative(fmt.Sprint(w.h.clock.ms())), w.relative(fmt.Sprintf(format, args...)))
}

// fail stops the sequence. rapid keeps a shorter sequence only when it
// fails with the same message, and every replay runs on new slaves at a
// later time: the message names slaves without their prefix and times
// relative to the sequence's start.
func (w *world) fail(t *rapid.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("step %d: %s", w.step, w.relative(fmt.Sprintf(format, args...)))
}

// epochMillis matches the times of the clock's era in a message.
var epochMillis = regexp.MustCompile(`\b1[7-9]\d{11}\b`)

// relative rewrites a message for reading and comparing: times as offsets
// from the sequence's start (t0+1500), slave ids without the sequence's
// prefix.
func (w *world) relative(msg string) string {
	msg = epochMillis.ReplaceAllStringFunc(msg, func(n string) string {
		v, _ := strconv.ParseInt(n, 10, 64)
		return fmt.Sprintf("t0%+d", v-w.t0)
	})
	return strings.ReplaceAll(msg, w.prefix, "")
}

// httpAnswer is an answer of the API.
type httpAnswer struct {
	status int
	body   []byte
}

func (w *world) call(t *rapid.T, method, path, body string, header http.Header) httpAnswer {
	t.Helper()
	figures.requests.Add(1)
	req, err := http.NewRequest(method, w.h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header = header
	resp, err := w.h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return httpAnswer{resp.StatusCode, raw}
}

// expectAnswer compares an answer with the model's: the status, and the
// message where the contract fixes it.
func (w *world) expectAnswer(t *rapid.T, got httpAnswer, want refAnswer) {
	t.Helper()
	figures.modelOps.Add(1)
	var e web.ErrorBody
	_ = json.Unmarshal(got.body, &e)
	w.h.saw(fmt.Sprintf("%d %s", got.status, strings.SplitN(e.Message, " ", 2)[0]))
	if got.status != want.status || (want.message != "" && e.Message != want.message) {
		w.fail(t, "got %d %s, want %d %q", got.status, got.body, want.status, want.message)
	}
}

// checkSlaves compares what the API shows of ids (details and history)
// and of the sequence's expiring records with the model.
func (w *world) checkSlaves(t *rapid.T, ids ...string) {
	t.Helper()
	w.compare(t, w.observe(t, false, ids...))
}

// checkAll compares everything the API shows of the sequence.
func (w *world) checkAll(t *rapid.T, why string) {
	t.Helper()
	w.logStep(t, "%s: read everything", why)
	w.compare(t, w.observe(t, true, w.ids()...))
}

// checkList compares the slave list (every slave's details in one
// request) and the history of the slaves users change with the model.
func (w *world) checkList(t *rapid.T) {
	t.Helper()
	w.logStep(t, "check: the list and the changed slaves' history")
	w.compare(t, w.observe(t, true, append(slices.Clone(w.main), w.ghost)...))
}

func (w *world) compare(t *rapid.T, o observation) {
	t.Helper()
	now := w.h.clock.ms()
	if diff := o.diff(w.model, now, w.ids()); diff != "" {
		w.fail(t, "%s", diff)
	}
	for id := range o.history {
		if s := w.model.slaves[id]; s != nil && len(o.history[id]) < len(s.history) {
			w.h.saw("history read with entries past retention")
		}
	}
}

// observation is what the API shows of a sequence's slaves: the details
// (nil for a 404) and history of the slaves read, and every expiring
// record of the sequence.
type observation struct {
	listed   map[string]viewSlave // nil when the list was not read
	details  map[string]*viewSlave
	history  map[string][]viewEntry
	expiring map[string]viewExpiring
}

// observe reads the details and history of ids, the expiring records and,
// with list set, the slave list.
func (w *world) observe(t *rapid.T, list bool, ids ...string) observation {
	t.Helper()
	user := http.Header{"X-Test-User": {"robot"}}
	o := observation{details: map[string]*viewSlave{}, history: map[string][]viewEntry{}, expiring: map[string]viewExpiring{}}
	for _, id := range ids {
		a := w.call(t, "GET", "/api/slaves/slave/"+id+"/details", "", user)
		switch a.status {
		case 200:
			var s slaveWire
			if err := json.Unmarshal(a.body, &s); err != nil {
				w.fail(t, "details of %s: %v in %s", id, err, a.body)
			}
			v := s.view()
			o.details[id] = &v
		case 404:
			o.details[id] = nil
		default:
			w.fail(t, "details of %s: got %d %s", id, a.status, a.body)
		}
		var hist []updateWire
		w.getJSON(t, "/api/slaves/slave/"+id, user, &hist)
		views := []viewEntry{}
		for _, u := range hist {
			if u.ObjectID != id {
				w.fail(t, "history of %s holds an entry of %s", id, u.ObjectID)
			}
			views = append(views, u.view())
		}
		o.history[id] = views
	}
	if list {
		var all []slaveWire
		w.getJSON(t, "/api/slaves", user, &all)
		o.listed = map[string]viewSlave{}
		for _, s := range all {
			if strings.HasPrefix(s.ID, w.prefix) {
				o.listed[s.ID] = s.view()
			}
		}
	}
	var records []expiringWire
	w.getJSON(t, "/api/slaves/expiring", user, &records)
	for _, r := range records {
		if strings.HasPrefix(r.MachineID, w.prefix) {
			o.expiring[r.MachineID] = r.view()
		}
	}
	return o
}

func (w *world) getJSON(t *rapid.T, path string, header http.Header, v any) {
	t.Helper()
	a := w.call(t, "GET", path, "", header)
	if a.status != 200 {
		w.fail(t, "GET %s: %d %s", path, a.status, a.body)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		w.fail(t, "GET %s: %v in %s", path, err, a.body)
	}
}

// diff lists the differences between the observation and the model at now:
// details and history of the slaves read, list entries (when read) and
// expiring records of ids.
func (o observation) diff(m *refModel, now int64, ids []string) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(o.details)) {
		want, wantHist, _ := m.View(now, id)
		switch got := o.details[id]; {
		case want == nil && got != nil:
			fmt.Fprintf(&b, "%s: details %+v, want no such slave\n", id, *got)
		case want != nil && got == nil:
			fmt.Fprintf(&b, "%s: not found, want %+v\n", id, *want)
		case want != nil && *got != *want:
			fmt.Fprintf(&b, "%s: details\n   got %+v\n  want %+v\n", id, *got, *want)
		}
		if got := o.history[id]; !slices.Equal(got, wantHist) {
			fmt.Fprintf(&b, "%s: history (newest first)\n   got %v\n  want %v\n", id, got, wantHist)
		}
	}
	for _, id := range ids {
		want, _, _ := m.View(now, id)
		got, listed := o.listed[id]
		switch {
		case o.listed == nil:
		case want == nil && listed:
			fmt.Fprintf(&b, "%s: listed as %+v, want no such slave\n", id, got)
		case want != nil && !listed:
			fmt.Fprintf(&b, "%s: not listed, want %+v\n", id, *want)
		case want != nil && got != *want:
			fmt.Fprintf(&b, "%s: listed as\n   got %+v\n  want %+v\n", id, got, *want)
		}
	}
	for _, id := range ids {
		_, _, want := m.View(now, id)
		got, has := o.expiring[id]
		switch {
		case want == nil && has:
			fmt.Fprintf(&b, "%s: expiring record %+v, want none\n", id, got)
		case want != nil && !has:
			fmt.Fprintf(&b, "%s: no expiring record, want %+v\n", id, *want)
		case want != nil && !sameExpiring(got, *want):
			fmt.Fprintf(&b, "%s: expiring record\n   got %+v\n  want %+v\n", id, got, *want)
		}
	}
	return b.String()
}

// sameExpiring compares records; "*" in the model's action id stands for
// the one the service made up.
func sameExpiring(got, want viewExpiring) bool {
	if want.ActionID == "*" && got.ActionID != "" {
		got.ActionID = "*"
	}
	return got == want
}

// The wire shapes the suite reads.

type updateWire struct {
	ObjectID  string `json:"objectId"`
	State     string `json:"state"`
	Timestamp int64  `json:"timestamp"`
	User      string `json:"user"`
	Message   string `json:"message"`
}

func (u updateWire) view() viewEntry { return viewEntry{u.State, u.Timestamp, u.User, u.Message} }

type slaveWire struct {
	ID           string            `json:"id"`
	FirstSeenAt  int64             `json:"firstSeenAt"`
	CurrentState updateWire        `json:"currentState"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    json.RawMessage   `json:"resources"`
	RunningTasks *int              `json:"runningTasks"`
}

func (s slaveWire) view() viewSlave {
	attrs, _ := json.Marshal(s.Attributes)
	return viewSlave{FirstSeenAt: s.FirstSeenAt, Current: s.CurrentState.view(), Host: s.Host, Rack: s.RackID,
		Attributes: string(attrs), Resources: compactJSON(s.Resources), RunningTasks: countText(s.RunningTasks)}
}

type expiringWire struct {
	MachineID   string `json:"machineId"`
	User        string `json:"user"`
	StartMillis int64  `json:"startMillis"`
	ActionID    string `json:"actionId"`
	Revert      string `json:"revertToState"`
	Kill        bool   `json:"killTasksOnDecommissionTimeout"`
	Request     struct {
		Message  string `json:"message"`
		Duration int64  `json:"durationMillis"`
		Revert   string `json:"revertToState"`
		ActionID string `json:"actionId"`
		Kill     bool   `json:"killTasksOnDecommissionTimeout"`
	} `json:"expiringAPIRequestObject"`
}

// view checks that the request object repeats the record (as the contract
// nests it) and returns the record.
func (r expiringWire) view() viewExpiring {
	v := viewExpiring{User: r.User, ActionID: r.ActionID, Revert: r.Revert, Start: r.StartMillis, Duration: r.Request.Duration,
		Kill: r.Kill, Message: r.Request.Message, RequestActionID: r.Request.ActionID}
	if r.Request.Revert != r.Revert || r.Request.Kill != r.Kill {
		v.Revert = fmt.Sprintf("record %s/%v, request %s/%v", r.Revert, r.Kill, r.Request.Revert, r.Request.Kill)
	}
	return v
}
