//go:build resilience

package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
)

// change is one change request the suite made, with its final answer.
type change struct {
	slave, action, message string
	status                 int
}

// TestResilienceSlavesUnderBackendFaults drives the slave routes while 20%
// of DynamoDB calls fail (throttled, 500, hung, dropped before or after the
// server applied them). Every answer must be a success, a 4xx, a JSON 503
// with Retry-After or a 504; a client retrying with its Idempotency-Key must
// end with each change applied exactly as often as it was answered 200; and
// the tables must hold no half-applied change.
func TestResilienceSlavesUnderBackendFaults(t *testing.T) {
	const (
		slaveCount = 8
		workers    = 16
		perWorker  = 25
	)
	clean := cleanStore()
	ids := make([]string, slaveCount)
	var machines []string
	for i := range ids {
		ids[i] = fmt.Sprintf("fault-%d", i)
		machines = append(machines, up(ids[i], 2))
	}
	report(t, clean, machines...)
	release(t, ids...)
	before := map[string]int{}
	for _, id := range ids {
		before[id] = len(readSlave(t, clean, id).history)
	}

	store, faults := faultyStore(t, 0.2, 1)
	srv := server(t, store, access.Policy{}, 5*time.Second)
	client := srv.Client()

	var mu sync.Mutex
	var changes []change
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for op := range perWorker {
				id := ids[rnd.IntN(len(ids))]
				base := srv.URL + "/api/slaves/slave/" + id
				switch n := rnd.IntN(10); {
				case n < 6:
					action := []string{"freeze", "decommission", "activate"}[n%3]
					message := fmt.Sprintf("w%d-op%d", w, op)
					body := fmt.Sprintf(`{"message":%q}`, message)
					if n == 3 {
						body = fmt.Sprintf(`{"message":%q,"durationMillis":3600000,"revertToState":"ACTIVE"}`, message)
					}
					header := http.Header{"Idempotency-Key": {message}}
					a := retrying(t, client, 30, "POST", base+"/"+action, body, header)
					mu.Lock()
					changes = append(changes, change{id, action, message, a.status})
					mu.Unlock()
				case n == 6:
					send(t, client, "GET", base+"/details", "", nil)
				case n == 7:
					send(t, client, "GET", base, "", nil)
				case n == 8:
					send(t, client, "GET", srv.URL+"/api/slaves?state=FROZEN", "", nil)
				default:
					retrying(t, client, 30, "DELETE", base+"/expiring", "", nil)
				}
			}
		})
	}
	wg.Wait()
	figures.faults.Add(faults.injected())
	t.Logf("faults injected: %d of %d backend calls (%s)", faults.injected(), faults.calls.Load(), faults.summary())

	answered := map[int]int{}
	for _, c := range changes {
		answered[c.status]++
	}
	t.Logf("change requests, by final answer: %v", answered)
	if answered[200] == 0 {
		t.Errorf("got no change answered 200, want most of them to get through the faults")
	}

	states := map[string]tableState{}
	for _, id := range ids {
		s := readSlave(t, clean, id)
		states[id] = s
		checkConsistent(t, id, s)
		applied := map[string]int{}
		for _, u := range s.history {
			applied[u.Message]++
		}
		want := 0
		for _, c := range changes {
			if c.slave != id {
				continue
			}
			got := applied[c.message]
			switch {
			case c.status == 200 && got != 1:
				violation(t, "%s: %s %q answered 200, applied %d times", id, c.action, c.message, got)
			case c.status == http.StatusGatewayTimeout && got > 1:
				// A timeout does not say whether the change was applied
				// (its write may commit after the answer), only that it
				// was applied at most once.
				violation(t, "%s: %s %q answered 504, applied %d times", id, c.action, c.message, got)
			case c.status != 200 && c.status != http.StatusGatewayTimeout && got != 0:
				violation(t, "%s: %s %q answered %d, applied %d times", id, c.action, c.message, c.status, got)
			}
			if c.status == 200 || c.status == http.StatusGatewayTimeout {
				want += got
			}
		}
		if got := len(s.history) - before[id]; got != want {
			violation(t, "%s: %d new history entries, %d changes answered 200", id, got, want)
		}
	}
	checkLimitSet(t, states)
}

// TestResilienceAnswersWhenDynamoDBIsDown checks the two ends of the
// spectrum: every call failing gives 503s and 504s, never a 500 or a hang
// past the deadline.
func TestResilienceAnswersWhenDynamoDBIsDown(t *testing.T) {
	report(t, cleanStore(), up("down-1", 0))
	release(t, "down-1")
	store, faults := faultyStore(t, 1, 2)
	srv := server(t, store, access.Policy{}, 3*time.Second)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/slaves"},
		{"GET", "/api/slaves/slave/down-1/details"},
		{"GET", "/api/slaves/slave/down-1"},
		{"POST", "/api/slaves/slave/down-1/freeze"},
		{"DELETE", "/api/slaves/slave/down-1/expiring"},
		{"GET", "/api/slaves/expiring"},
	} {
		for range 3 {
			start := time.Now()
			a := send(t, srv.Client(), r.method, srv.URL+r.path, "", nil)
			if a.status != 503 && a.status != 504 {
				violation(t, "%s %s: got %d, want 503 or 504 with DynamoDB down", r.method, r.path, a.status)
			}
			if took := time.Since(start); took > 4*time.Second {
				violation(t, "%s %s: answered after %v, past the 3 s deadline", r.method, r.path, took)
			}
		}
	}
	figures.faults.Add(faults.injected())
	if s := readSlave(t, cleanStore(), "down-1"); s.slave == nil || s.slave.Current.State != "ACTIVE" || len(s.history) != 1 {
		violation(t, "down-1 changed while DynamoDB was down: %+v", s)
	}
}
