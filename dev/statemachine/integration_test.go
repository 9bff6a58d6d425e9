//go:build integration

package statemachine_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/reportstore"
)

var (
	local *stack.Local
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// partSize is small, so that a report of a few dozen machines is applied in
// parts, as one of 100,000 is with the template's REPORT_PART_SIZE.
const partSize = 10

func TestMain(m *testing.M) {
	os.Exit(stack.Main(func(l *stack.Local) int {
		local = l
		return m.Run()
	}))
}

// harness is the template's ReportStateMachine run by the local driver
// over InventoryFunction's handler, on tables of its own.
type harness struct {
	store   *dynamo.Store
	objects *reportstore.Store
	machine *statemachine.Machine
	// steps counts the invocations of each step, retries included.
	mu       sync.Mutex
	steps    map[string]int
	attempts map[string]int
	planned  map[string]any // the last plan step's result
	// before, when set, runs before each invocation and may replace its
	// context (to cut a part short) or act in between steps.
	before func(ctx context.Context, step, key string, attempt int) context.Context
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	if err := local.Template.RecreateTables(t.Context(), local.DynamoDB, stack.LocalName); err != nil {
		t.Fatal(err)
	}
	def, err := statemachine.Load(local.Template, "ReportStateMachine")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{store: dynamo.New(local.DynamoDB, stack.Tables, 0), objects: reportstore.New(local.S3), steps: map[string]int{}, attempts: map[string]int{}}
	h.machine = &statemachine.Machine{Definition: def, Invoke: h.invoke, Read: h.read, Sleep: func(time.Duration) {}}
	return h
}

// handler is InventoryFunction's handler over store, wired as its main
// wires it.
func (h *harness) handler(store inventory.Store) *inventory.Handler {
	return inventory.New(store, machine.DefaultLossBrake, quiet, nil).
		ReadsFrom(local.ReportsBucket, h.objects).FansOut(h.store, h.objects, partSize)
}

func (h *harness) invoke(ctx context.Context, function string, payload json.RawMessage) (json.RawMessage, error) {
	if function != "InventoryFunction" {
		return nil, fmt.Errorf("no function %s", function)
	}
	var in struct {
		Step string `json:"step"`
		Key  string `json:"key"`
	}
	json.Unmarshal(payload, &in)
	h.mu.Lock()
	h.steps[in.Step]++
	attempt := h.attempts[in.Step+" "+in.Key]
	h.attempts[in.Step+" "+in.Key]++
	h.mu.Unlock()
	var store inventory.Store = h.store
	if h.before != nil {
		if cut := h.before(ctx, in.Step, in.Key, attempt); cut != ctx {
			ctx, store = cut, &slowStore{h.store}
		}
	}
	res, err := h.handler(store).Handle(ctx, payload)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(res)
	if in.Step == StepPlan {
		h.mu.Lock()
		json.Unmarshal(out, &h.planned)
		h.mu.Unlock()
	}
	return out, err
}

// slowStore applies at the pace of a busy DynamoDB, so that a part can be
// cut short half way.
type slowStore struct{ *dynamo.Store }

func (s *slowStore) Apply(ctx context.Context, id string, decide machine.Decide) error {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Apply(ctx, id, decide)
}

// ApplyAbsent creates one machine at a time, at the same pace: cut short,
// a part has created some of its new machines, which its retry finds
// stored although the part says they are new.
func (s *slowStore) ApplyAbsent(ctx context.Context, ids []string, decide func(string) machine.Decide) []error {
	errs := make([]error, len(ids))
	for i, id := range ids {
		time.Sleep(20 * time.Millisecond)
		errs[i] = s.Store.ApplyAbsent(ctx, []string{id}, decide)[0]
	}
	return errs
}

func (h *harness) read(ctx context.Context, bucket, key string) ([]byte, error) {
	body, err := h.objects.Open(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// send writes a complete report of machines to the reports bucket and runs
// the state machine on S3's event for it, made at at. It returns the
// execution's output and the plan step's.
func (h *harness) send(t *testing.T, at time.Time, machines []string) (map[string]any, map[string]any) {
	t.Helper()
	key := fmt.Sprintf("reports/%d.json", at.UnixNano())
	body := `{"complete":true,"machines":[` + strings.Join(machines, ",") + `]}`
	if _, err := local.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(local.ReportsBucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	event := fmt.Sprintf(`{"version":"0","detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":%q},"object":{"key":%q}}}`,
		at.UTC().Format(time.RFC3339), local.ReportsBucket, key)
	out, err := h.machine.Run(t.Context(), json.RawMessage(event))
	if err != nil {
		t.Fatalf("execution: %v", err)
	}
	var res map[string]any
	json.Unmarshal(out, &res)
	h.mu.Lock()
	defer h.mu.Unlock()
	return res, h.planned
}

func (h *harness) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{StepPlan: h.steps["plan"], StepApplyPart: h.steps["applyPart"], StepFinish: h.steps["finish"]}
	h.steps, h.attempts = map[string]int{}, map[string]int{}
	return out
}

const (
	StepPlan      = inventory.StepPlan
	StepApplyPart = inventory.StepApplyPart
	StepFinish    = inventory.StepFinish
)

func up(id string, cpus int) string {
	return fmt.Sprintf(`{"id":%q,"host":"%s.example.com","rackId":"r1","resources":{"cpus":%d},"runningTasks":1}`, id, id, cpus)
}

func fleet(n, cpus int) []string {
	var out []string
	for i := range n {
		out = append(out, up(fmt.Sprintf("P%03d", i), cpus))
	}
	return out
}

// states reads every slave's state and the length of its history.
func (h *harness) states(t *testing.T) (map[string]machine.State, map[string][]machine.Update) {
	t.Helper()
	states, history := map[string]machine.State{}, map[string][]machine.Update{}
	err := h.store.List(t.Context(), func(s machine.Slave) error {
		states[s.ID] = s.Current.State
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range states {
		if history[id], err = h.store.History(t.Context(), id, time.Now(), 1000); err != nil {
			t.Fatal(err)
		}
	}
	return states, history
}

func TestAReportInPartsSurvivesAPartCutShortAndDecidesAbsenceOnce(t *testing.T) {
	h := newHarness(t)
	now := time.Now().Add(-time.Minute)
	// Part 3 of each report is cut short on its first attempt, half way.
	h.before = func(ctx context.Context, step, key string, attempt int) context.Context {
		if step != StepApplyPart || !strings.HasSuffix(key, "part-0003.json") || attempt > 0 {
			return ctx
		}
		cut, cancel := context.WithCancel(ctx)
		time.AfterFunc(5*20*time.Millisecond, cancel)
		return cut
	}

	_, plan := h.send(t, now, fleet(60, 4))
	if steps := h.take(); steps[StepPlan] != 1 || steps[StepApplyPart] != 7 || steps[StepFinish] != 1 || plan["parts"] != 6.0 {
		t.Fatalf("got steps %v and plan %v, want one plan, 6 parts and one retry of the part cut short, one finish", steps, plan)
	}
	states, history := h.states(t)
	for i := range 60 {
		id := fmt.Sprintf("P%03d", i)
		if states[id] != machine.Active || len(history[id]) != 1 {
			t.Errorf("%s: got %s with %d history entries, want ACTIVE with one", id, states[id], len(history[id]))
		}
	}

	// Ten machines leave, ten are redescribed: 20 changes, in two parts.
	next := append(fleet(40, 4), fleet(50, 8)[40:]...)
	res, _ := h.send(t, now.Add(10*time.Second), next)
	if steps := h.take(); steps[StepFinish] != 1 || res["absent"] != 10.0 || res["superseded"] != nil {
		t.Errorf("got steps %v and %v, want the 10 absences decided by one finish", steps, res)
	}
	states, history = h.states(t)
	for i := range 60 {
		id := fmt.Sprintf("P%03d", i)
		want, entries := machine.Active, 1
		if i >= 50 {
			want, entries = machine.Dead, 2
		}
		if states[id] != want || len(history[id]) != entries {
			t.Errorf("%s: got %s with %d history entries, want %s with %d", id, states[id], len(history[id]), want, entries)
		}
	}

	// The same report again, in parts again (its part 3 cut short too):
	// nothing changes and no history is written.
	h.send(t, now.Add(20*time.Second), next)
	again, againHistory := h.states(t)
	for id, s := range states {
		if again[id] != s || len(againHistory[id]) != len(history[id]) {
			t.Errorf("%s: got %s with %d entries after the same report again, want %s with %d", id, again[id], len(againHistory[id]), s, len(history[id]))
		}
	}
}

func TestTheBrakeJudgesTheWholeReportNotOnePart(t *testing.T) {
	h := newHarness(t)
	now := time.Now().Add(-time.Minute)
	h.send(t, now, fleet(100, 4))
	h.take()
	// A quarter of the fleet missing, the rest redescribed: 75 changes in
	// eight parts, 25 losses that no part alone would brake.
	_, plan := h.send(t, now.Add(10*time.Second), fleet(75, 8))
	if plan["held"] != 25.0 || plan["parts"] != 8.0 {
		t.Errorf("got plan %v, want the 25 losses held and 8 parts", plan)
	}
	states, _ := h.states(t)
	dead := 0
	for _, s := range states {
		if s == machine.Dead {
			dead++
		}
	}
	if dead != 0 {
		t.Errorf("got %d DEAD, want none: 25%% of the fleet is more than the brake lets through", dead)
	}
}

func TestAReportSupersededWhileItIsAppliedMarksNoneDead(t *testing.T) {
	h := newHarness(t)
	now := time.Now().Add(-time.Minute)
	h.send(t, now, fleet(40, 4))
	h.take()
	var newer atomic.Bool
	h.before = func(ctx context.Context, step, key string, attempt int) context.Context {
		if step == StepFinish && newer.CompareAndSwap(false, true) {
			// A newer report arrives while this one is applied.
			event := fmt.Sprintf(`{"detail-type":"Machine Report","time":%q,"detail":{"machines":[%s]}}`,
				now.Add(20*time.Second).UTC().Format(time.RFC3339), up("P000", 4))
			if _, err := h.handler(h.store).Handle(ctx, json.RawMessage(event)); err != nil {
				t.Errorf("newer report: %v", err)
			}
		}
		return ctx
	}
	// Five machines missing and fifteen redescribed: two parts.
	res, _ := h.send(t, now.Add(10*time.Second), append(fleet(20, 4), fleet(35, 8)[20:]...))
	if res["superseded"] != true {
		t.Errorf("got %v, want the report's absences superseded", res)
	}
	states, _ := h.states(t)
	for i := 35; i < 40; i++ {
		if id := fmt.Sprintf("P%03d", i); states[id] != machine.Active {
			t.Errorf("%s: got %s, want ACTIVE: a newer report had started", id, states[id])
		}
	}
}

// TestAReportObjectOverItsBoundFailsTheExecutionWithItsReason runs
// ReportStateMachine on a gzip object of one valid line repeated to a
// gigabyte: the plan step refuses it once, without a retry, and the
// execution fails with the reason, not a timeout.
func TestAReportObjectOverItsBoundFailsTheExecutionWithItsReason(t *testing.T) {
	h := newHarness(t)
	line := []byte(up("P000", 4) + "\n")
	chunk := bytes.Repeat(line, (16<<20)/len(line))
	var member bytes.Buffer
	z, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	z.Write(chunk)
	z.Close()
	var object bytes.Buffer
	object.Write(gzipped([]byte("{\"complete\":true}\n")))
	for n := 0; n < 1<<30; n += len(chunk) {
		object.Write(member.Bytes())
	}
	key := "reports/bomb.jsonl.gz"
	if _, err := local.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(local.ReportsBucket), Key: aws.String(key), Body: bytes.NewReader(object.Bytes())}); err != nil {
		t.Fatal(err)
	}
	event := fmt.Sprintf(`{"detail-type":"Object Created","source":"aws.s3","time":%q,"detail":{"bucket":{"name":%q},"object":{"key":%q}}}`,
		time.Now().UTC().Format(time.RFC3339), local.ReportsBucket, key)
	_, err := h.machine.Run(t.Context(), json.RawMessage(event))
	var tooLarge *inventory.TooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "more than 128000 machine entries") {
		t.Errorf("got %v, want the execution failed because the report holds too many entries", err)
	}
	if steps := h.take(); steps[StepPlan] != 1 || steps[StepApplyPart] != 0 || steps[StepFinish] != 0 {
		t.Errorf("got steps %v, want one plan and nothing after it", steps)
	}
	if states, _ := h.states(t); len(states) != 0 {
		t.Errorf("got %v, want nothing stored", states)
	}
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write(b)
	z.Close()
	return buf.Bytes()
}
