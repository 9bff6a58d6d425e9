//go:build resilience

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
)

// sent is one change request with the interval its commit must lie in: it
// cannot have taken effect before it was sent nor after it was answered.
type sent struct {
	change
	from, to time.Time
}

// TestResilienceConcurrentChanges sends rounds of freeze, decommission,
// activate and delete requests on the same 5 slaves, 50 at a time. After
// each round every slave's current state is its newest history entry, its
// history grew by exactly its 200 answers, and no answer is a 5xx; across
// rounds the decommission limit never held more than MaxDecommissioning
// slaves, checked from the history timeline and by a monitor listing the
// slaves in STARTING_DECOMMISSION all along.
func TestResilienceConcurrentChanges(t *testing.T) {
	const (
		slaveCount = 5
		workers    = 50 // requests in flight at once
		perWorker  = 4  // requests each worker sends in turn, per round
		rounds     = 4
	)
	clean := cleanStore()
	srv := server(t, clean, access.Policy{}, 20*time.Second)
	client := srv.Client()
	ids := make([]string, slaveCount)
	for i := range ids {
		ids[i] = fmt.Sprintf("conc-%d", i)
	}
	release(t, ids...)

	fullest := 0
	for round := range rounds {
		var missing []string
		for _, id := range ids {
			if s := readSlave(t, clean, id); s.slave == nil {
				missing = append(missing, up(id, 0))
			}
		}
		if len(missing) > 0 {
			report(t, clean, missing...)
		}
		before := map[string]int{}
		for _, id := range ids {
			before[id] = len(readSlave(t, clean, id).history)
		}

		stop := make(chan struct{})
		var monitor sync.WaitGroup
		monitor.Go(func() { watchLimit(t, client, srv.URL, stop) })

		var mu sync.Mutex
		var batch []sent
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wrnd := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			wg.Go(func() {
				<-start
				for i := range perWorker {
					id := ids[wrnd.IntN(len(ids))]
					action := []string{"freeze", "decommission", "activate"}[wrnd.IntN(3)]
					if wrnd.IntN(100) == 0 {
						action = "delete"
					}
					message := fmt.Sprintf("round%d-w%d-%d", round, w, i)
					method, url, body := "POST", srv.URL+"/api/slaves/slave/"+id+"/"+action, fmt.Sprintf(`{"message":%q}`, message)
					if action == "delete" {
						method, url, body = "DELETE", srv.URL+"/api/slaves/slave/"+id, ""
					}
					from := time.Now()
					a := send(t, client, method, url, body, nil)
					s := sent{change{id, action, message, a.status}, from, time.Now()}
					if a.status >= 500 {
						violation(t, "%s %s: got %d %s, want no 5xx", action, id, a.status, a.body)
					}
					mu.Lock()
					batch = append(batch, s)
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		close(stop)
		monitor.Wait()

		states := map[string]tableState{}
		for _, id := range ids {
			s := readSlave(t, clean, id)
			states[id] = s
			checkConsistent(t, id, s)
			deleted, answered := false, 0
			applied := map[string]int{}
			for _, u := range s.history {
				applied[u.Message]++
			}
			for _, r := range batch {
				if r.slave != id {
					continue
				}
				switch {
				case r.action == "delete" && r.status == 200:
					deleted = true
				case r.status == 200:
					answered++
				}
			}
			if deleted {
				if s.slave != nil {
					violation(t, "%s: deleted in round %d, but it is back in %s", id, round, s.slave.Current.State)
				}
				continue
			}
			if got := len(s.history) - before[id]; got != answered {
				violation(t, "%s: round %d added %d history entries for %d changes answered 200", id, round, got, answered)
			}
			for _, r := range batch {
				if r.slave != id || r.action == "delete" {
					continue
				}
				if want := btoi(r.status == 200); applied[r.message] != want {
					violation(t, "%s: %s %q answered %d, applied %d times", id, r.action, r.message, r.status, applied[r.message])
				}
			}
		}
		checkLimitSet(t, states)
		fullest = max(fullest, checkTimeline(t, clean, ids))
	}
	if fullest < limits.MaxDecommissioning {
		t.Errorf("got at most %d slaves decommissioning at once, want the rounds to fill the limit of %d", fullest, limits.MaxDecommissioning)
	}
}

// watchLimit lists the slaves in STARTING_DECOMMISSION until stop closes.
// Each listing is one Query, atomic in the emulator, so any answer over the
// limit is a moment the limit did not hold. (No machine reports run in the
// test, so no slave is in DECOMMISSIONING.)
func watchLimit(t *testing.T, client *http.Client, base string, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		a := send(t, client, "GET", base+"/api/slaves?state=STARTING_DECOMMISSION", "", nil)
		var list []json.RawMessage
		if a.status == 200 && json.Unmarshal([]byte(a.body), &list) == nil && len(list) > limits.MaxDecommissioning {
			violation(t, "the monitor saw %d slaves in STARTING_DECOMMISSION, over the limit of %d", len(list), limits.MaxDecommissioning)
		}
	}
}

// checkTimeline replays, in timestamp order, every entry into and out of
// the decommissioning states found in the slaves' histories. The store
// orders these changes through the decommissioning set (each one's
// timestamp is later than the one before it took effect), so the replay
// counts exactly how many slaves were decommissioning after each of them.
// A slave deleted (and reported again) has lost its history before the
// deletion; those earlier changes are not replayed, which is why the test
// replays the timeline after every round.
func checkTimeline(t *testing.T, store *dynamo.Store, ids []string) (most int) {
	t.Helper()
	type move struct {
		at    int64
		delta int
		id    string
	}
	var moves []move
	for _, id := range ids {
		history := readSlave(t, store, id).history
		slices.Reverse(history) // oldest first
		was := false
		for _, u := range history {
			switch now := u.State.CountsTowardLimit(); {
			case now && !was:
				moves = append(moves, move{u.Timestamp, +1, id})
			case was && !now:
				moves = append(moves, move{u.Timestamp, -1, id})
			}
			was = u.State.CountsTowardLimit()
		}
	}
	slices.SortFunc(moves, func(a, b move) int { return cmp.Compare(a.at, b.at) })
	held := 0
	for i, m := range moves {
		if i > 0 && moves[i-1].at == m.at {
			violation(t, "%s and %s entered or left decommissioning at the same instant %d: the timeline has no order", moves[i-1].id, m.id, m.at)
		}
		held += m.delta
		if held > limits.MaxDecommissioning {
			violation(t, "at %d, %d slaves were decommissioning, over the limit of %d", m.at, held, limits.MaxDecommissioning)
		}
		most = max(most, held)
	}
	t.Logf("timeline: %d moves into or out of decommissioning, at most %d slaves at once (limit %d)", len(moves), most, limits.MaxDecommissioning)
	return most
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestResilienceReportsAgainstChanges floods machine reports while users
// activate, freeze and delete the reported slaves. A report decided on a
// state a user has since changed must be decided again, so: a decommission
// the user cancelled (activate answered 200) stays cancelled although
// reports keep saying the machine's tasks are draining; a freeze stays; and
// a deleted slave that reports bring back starts a new history, never
// carrying entries from before its deletion.
func TestResilienceReportsAgainstChanges(t *testing.T) {
	const (
		rounds    = 3
		reporters = 4
		reports   = 15
	)
	clean := cleanStore()
	srv := server(t, clean, access.Policy{}, 20*time.Second)
	client := srv.Client()
	for round := range rounds {
		draining := []string{fmt.Sprintf("rep%d-dec-0", round), fmt.Sprintf("rep%d-dec-1", round)}
		active := []string{fmt.Sprintf("rep%d-act-0", round), fmt.Sprintf("rep%d-act-1", round)}
		doomed := fmt.Sprintf("rep%d-del", round)
		all := slices.Concat(draining, active, []string{doomed})
		var machines []string
		for _, id := range all {
			machines = append(machines, up(id, 3))
		}
		report(t, clean, machines...)
		release(t, all...)
		for _, id := range draining {
			if a := send(t, client, "POST", srv.URL+"/api/slaves/slave/"+id+"/decommission", "", nil); a.status != 200 {
				t.Fatalf("decommission %s: got %d %s", id, a.status, a.body)
			}
		}

		var wg sync.WaitGroup
		start := make(chan struct{})
		for r := range reporters {
			wg.Go(func() {
				<-start
				for i := range reports {
					var machines []string
					for _, id := range all {
						machines = append(machines, up(id, (r+i)%2*3)) // tasks drained, then running again
					}
					report(t, clean, machines...)
				}
			})
		}
		var deletedAt time.Time
		answers := map[string]int{}
		var mu sync.Mutex
		act := func(method, id, path string) {
			time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
			if method == "DELETE" {
				mu.Lock()
				deletedAt = time.Now()
				mu.Unlock()
			}
			a := send(t, client, method, srv.URL+"/api/slaves/slave/"+id+path, "", nil)
			mu.Lock()
			answers[id] = a.status
			mu.Unlock()
		}
		for _, id := range draining {
			wg.Go(func() { <-start; act("POST", id, "/activate") })
		}
		for _, id := range active {
			wg.Go(func() { <-start; act("POST", id, "/freeze") })
		}
		wg.Go(func() { <-start; act("DELETE", doomed, "") })
		close(start)
		wg.Wait()

		states := map[string]tableState{}
		for _, id := range all {
			s := readSlave(t, clean, id)
			states[id] = s
			checkConsistent(t, id, s)
		}
		for id, want := range map[string]string{draining[0]: "ACTIVE", draining[1]: "ACTIVE", active[0]: "FROZEN", active[1]: "FROZEN"} {
			if answers[id] != 200 {
				violation(t, "%s: the user's change was answered %d, want 200", id, answers[id])
				continue
			}
			if s := states[id]; s.slave == nil || string(s.slave.Current.State) != want {
				violation(t, "%s: a report overwrote the user's change: got %+v, want %s", id, s.slave, want)
			}
		}
		if answers[doomed] != 200 {
			violation(t, "%s: delete answered %d, want 200", doomed, answers[doomed])
		} else if s := states[doomed]; s.slave != nil {
			// Reported again after its deletion: a new slave, a new history.
			if s.slave.FirstSeenAt < deletedAt.UnixMilli() {
				violation(t, "%s: back with firstSeenAt %d, before its deletion at %d", doomed, s.slave.FirstSeenAt, deletedAt.UnixMilli())
			}
			if s.history[len(s.history)-1].State != "ACTIVE" {
				violation(t, "%s: back with a history that starts in %s, want a new slave's first entry", doomed, s.history[len(s.history)-1].State)
			}
		}
		checkLimitSet(t, states)
		for _, id := range draining {
			// Free the decommission slots for the next round.
			send(t, client, "DELETE", srv.URL+"/api/slaves/slave/"+id, "", nil)
		}
	}
}
