//go:build resilience

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// TestResilienceLinearizable runs rounds of concurrent clients on one slave
// each: users freeze, decommission and activate it, the scheduler reports
// it (a new host name in every report, so that a read tells which report it
// sees; sometimes lost, sometimes up again) and readers read its details and
// its history. Each round's history of calls and answers, with their real
// start and end times, must be linearizable: explained by some order of the
// operations, each taking effect at one instant between its call and its
// answer, on the sequential specification linModel. A change that silently
// undoes a concurrent report's refresh, or a read that sees a state that
// never existed, has no such order. After each round the stored history must
// have timestamps that never go back and hold every change answered 200
// exactly once.
func TestResilienceLinearizable(t *testing.T) {
	const (
		clients   = 6
		perClient = 8
	)
	store := cleanStore()
	// No decommission limit: it is global, and this test is about one slave.
	sh := slaves.New(store, access.Policy{}, machine.Limits{MaxExpiring: limits.MaxExpiring})
	srv := httptest.NewServer(checked(t, web.Wrap(sh, web.Options{Logger: quiet})))
	defer srv.Close()
	lc := &linClient{base: srv.URL, client: srv.Client(), store: store}

	for round := range *linRounds {
		id := fmt.Sprintf("lin-%02d", round)
		lc.run(t, id, round, clients, perClient)
	}
	t.Logf("linearizability checks: %d", figures.linChecks.Load())
}

var linRounds = flag.Int("resilience.lin-rounds", 30, "linearizability: rounds of concurrent clients, one slave each")

// linInput is one operation of a client.
type linInput struct {
	op     string // freeze, decommission, activate, report, details, history
	host   string // report: the host it reports
	lost   bool   // report: the machine is lost
	at     int64  // report: its time (epoch ms)
	slow   bool   // report: took long enough that a change may have made it stale
	target string // change: the state it asks for
}

// linOutput is what the operation answered.
type linOutput struct {
	status int    // HTTP status; for a report 200 when applied, 500 when it failed
	state  string // details: state; history: newest entry's state
	host   string // details
	length int    // history: number of entries
}

// linState is the specification's state of the slave: everything a read
// can show, and the time of the report that described it.
type linState struct {
	state       string
	host        string
	describedAt int64
	history     int
}

// linModel is the sequential specification of one slave. A change moves it
// when the transition is legal (200) and leaves it when not (409); a report
// refreshes the host unless a report made later already did, and marks the
// machine DEAD when lost or ACTIVE when up again; reads show the state.
// Answers that do not say what happened (503, 504, a failed report) allow
// both outcomes.
var linModel = porcupine.NondeterministicModel{
	Init: func() []any { return nil }, // set per round: the slave exists before the clients start
	Step: func(state, input, output any) []any {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		switch in.op {
		case "details":
			if out.status == 200 && out.state == s.state && out.host == s.host {
				return []any{s}
			}
			return nil
		case "history":
			if out.status == 200 && out.length == s.history && out.state == s.state {
				return []any{s}
			}
			return nil
		case "report":
			next := reportStep(s, in)
			if out.status != 200 || in.slow {
				return []any{s, next}
			}
			return []any{next}
		}
		allowed := legal("", s.state, in.target) == ""
		next := s
		next.state, next.history = in.target, s.history+1
		switch {
		case out.status == 200 && allowed:
			return []any{next}
		case out.status == 409 && !allowed:
			return []any{s}
		case out.status == 503, out.status == 504:
			if allowed {
				return []any{s, next}
			}
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case "details":
			return fmt.Sprintf("details → %d %s %s", out.status, out.state, out.host)
		case "history":
			return fmt.Sprintf("history → %d: %d entries, newest %s", out.status, out.length, out.state)
		case "report":
			return fmt.Sprintf("report %s lost=%v at %d → %d", in.host, in.lost, in.at, out.status)
		}
		return fmt.Sprintf("%s → %d", in.op, out.status)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("%s %s (described at %d), %d entries", s.state, s.host, s.describedAt, s.history)
	},
}

// reportStep is a report's effect: the description is replaced unless a
// newer report wrote it; a lost machine goes DEAD, a DEAD one reported up
// comes back ACTIVE.
func reportStep(s linState, in linInput) linState {
	if in.at >= s.describedAt {
		s.host, s.describedAt = in.host, in.at
	}
	switch {
	case in.lost && s.state != mDead:
		s.state, s.history = mDead, s.history+1
	case !in.lost && s.state == mDead:
		s.state, s.history = mActive, s.history+1
	}
	return s
}

// linClient drives the rounds.
type linClient struct {
	base   string
	client *http.Client
	store  *dynamo.Store
}

// linOp is one operation as recorded, with its message when it is a change.
type linOp struct {
	porcupine.Operation
	message string
}

// run plays one round on slave id: it reports the slave, lets the clients
// loose, and checks what they saw and what the history holds.
func (lc *linClient) run(t *testing.T, id string, round, clients, perClient int) {
	t.Helper()
	host := id + "-h0.example.com"
	at := time.Now()
	lc.report(t, id, host, false, at)
	defer func() {
		if _, err := lc.store.Delete(context.Background(), id, nil); err != nil {
			t.Errorf("delete %s: %v", id, err)
		}
	}()
	init := linState{state: mActive, host: host, describedAt: at.UnixMilli(), history: 1}

	start := time.Now()
	var mu sync.Mutex
	var ops []linOp
	var wg sync.WaitGroup
	for c := range clients {
		rnd := rand.New(rand.NewPCG(uint64(round), uint64(c)))
		wg.Go(func() {
			for i := range perClient {
				op := lc.one(t, rnd, id, fmt.Sprintf("%s-c%d-%d", id, c, i), start)
				op.ClientId = c
				mu.Lock()
				ops = append(ops, op)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	lc.checkLinearizable(t, id, init, ops)
	lc.checkHistory(t, id, ops)
}

// one performs one random operation and records it.
func (lc *linClient) one(t *testing.T, rnd *rand.Rand, id, tag string, start time.Time) linOp {
	var in linInput
	var out linOutput
	var message string
	call := time.Since(start).Nanoseconds()
	switch n := rnd.IntN(20); {
	case n < 7:
		action := []string{"freeze", "decommission", "activate"}[n%3]
		in = linInput{op: action, target: actionTargets[action]}
		message = tag
		a := send(t, lc.client, "POST", lc.base+"/api/slaves/slave/"+id+"/"+action, fmt.Sprintf(`{"message":%q}`, message), nil)
		out.status = a.status
	case n < 12:
		at := time.Now()
		in = linInput{op: "report", host: tag + ".example.com", lost: n == 11, at: at.UnixMilli()}
		out.status = lc.report(t, id, in.host, in.lost, at)
		in.slow = time.Since(at) > 900*time.Millisecond
	case n < 16:
		in.op = "details"
		a := send(t, lc.client, "GET", lc.base+"/api/slaves/slave/"+id+"/details", "", nil)
		var s slaveWire
		_ = json.Unmarshal([]byte(a.body), &s)
		out = linOutput{status: a.status, state: s.CurrentState.State, host: s.Host}
	default:
		in.op = "history"
		a := send(t, lc.client, "GET", lc.base+"/api/slaves/slave/"+id, "", nil)
		var h []updateWire
		_ = json.Unmarshal([]byte(a.body), &h)
		out = linOutput{status: a.status, length: len(h)}
		if len(h) > 0 {
			out.state = h[0].State
		}
	}
	return linOp{porcupine.Operation{Input: in, Call: call, Output: out, Return: time.Since(start).Nanoseconds()}, message}
}

// report sends a machine report received at at, the time the model is
// told, and returns 200 when it was applied and 500 when it failed.
func (lc *linClient) report(t *testing.T, id, host string, lost bool, at time.Time) int {
	figures.requests.Add(1)
	h := inventory.New(lc.store, machine.NoLossBrake, quiet, nil)
	h.Now = func() time.Time { return at }
	detail := fmt.Sprintf(`{"machines":[{"id":%q,"host":%q,"rackId":"r1","lost":%v}]}`, id, host, lost)
	if _, err := h.Handle(context.Background(), json.RawMessage(detail)); err != nil {
		t.Logf("report %s: %v", id, err)
		return 500
	}
	return 200
}

// checkLinearizable checks the round's operations against linModel and,
// when they are not linearizable, writes porcupine's visualization.
func (lc *linClient) checkLinearizable(t *testing.T, id string, init linState, recorded []linOp) {
	t.Helper()
	ops := make([]porcupine.Operation, len(recorded))
	for i, op := range recorded {
		ops[i] = op.Operation
	}
	model := linModel
	model.Init = func() []any { return []any{init} }
	result, info := porcupine.CheckOperationsVerbose(model.ToModel(), ops, 20*time.Second)
	switch result {
	case porcupine.Ok:
		figures.linChecks.Add(1)
	case porcupine.Unknown:
		t.Logf("%s: the linearizability check timed out", id)
	case porcupine.Illegal:
		figures.linChecks.Add(1)
		path := filepath.Join(local.Root, "bin", "resilience", "linearizability-"+id+".html")
		err := os.MkdirAll(filepath.Dir(path), 0o755)
		if err == nil {
			err = porcupine.VisualizePath(model.ToModel(), info, path)
		}
		if err != nil {
			path = "not written: " + err.Error()
		}
		violation(t, "%s: %d operations of %d clients are not linearizable; visualization: %s\n%s", id, len(ops), len(slices.Compact(clientsOf(ops))), path, describeOps(ops))
	}
}

func clientsOf(ops []porcupine.Operation) []int {
	var ids []int
	for _, op := range ops {
		ids = append(ids, op.ClientId)
	}
	slices.Sort(ids)
	return ids
}

// describeOps lists the operations in call order, for the failure message.
func describeOps(ops []porcupine.Operation) string {
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	var b strings.Builder
	for _, op := range sorted {
		fmt.Fprintf(&b, "  client %d [%6.1f ms, %6.1f ms] %s\n", op.ClientId, float64(op.Call)/1e6, float64(op.Return)/1e6,
			linModel.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// checkHistory checks the stored history after a round: oldest to newest,
// timestamps never go back, and every change answered 200 is in it exactly
// once (its message is unique), every other change not at all.
func (lc *linClient) checkHistory(t *testing.T, id string, ops []linOp) {
	t.Helper()
	history, err := lc.store.History(context.Background(), id, time.Now(), math.MaxInt)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(history)
	count := map[string]int{}
	for i, u := range history {
		count[u.Message]++
		if i > 0 && u.Timestamp < history[i-1].Timestamp {
			violation(t, "%s: history goes back in time: %s at %d after %s at %d", id, u.State, u.Timestamp, history[i-1].State, history[i-1].Timestamp)
		}
	}
	for _, op := range ops {
		if op.message == "" {
			continue
		}
		want := 0
		if op.Output.(linOutput).status == 200 {
			want = 1
		}
		if got := count[op.message]; got != want {
			violation(t, "%s: %s %q answered %d, in the history %d times", id, op.Input.(linInput).op, op.message, op.Output.(linOutput).status, got)
		}
	}
}
