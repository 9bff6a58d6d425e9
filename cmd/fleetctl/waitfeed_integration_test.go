//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// gateway stands in front of the test API and counts the requests of each
// route. It can play a deployment older than the change feed (404 on
// /api/slaves/changes, no X-Changes-Cursor), answer the feed's 410 to a
// number of follows, and run a hook once the API answered a request and
// before fleetctl gets the answer.
type gateway struct {
	URL    string
	noFeed bool
	mu     sync.Mutex
	counts map[string]int
	gone   int               // follows still to answer 410
	hooked map[string]func() // run once, the first time a route is answered
}

// route names a request: "list", "details", "feed now" (no since),
// "follow" (a read of the feed from a cursor), "change" (freeze,
// decommission, activate), or its method and path.
func route(r *http.Request) string {
	switch p := r.URL.Path; {
	case p == "/api/slaves/changes" && r.URL.Query().Get("since") == "":
		return "feed now"
	case p == "/api/slaves/changes":
		return "follow"
	case r.Method == http.MethodGet && (p == "/api/slaves" || p == "/api/slaves/"):
		return "list"
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/details"):
		return "details"
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/api/slaves/slave/"):
		return "change"
	}
	return r.Method + " " + r.URL.Path
}

func newGateway(t *testing.T, noFeed bool) *gateway {
	t.Helper()
	g := &gateway{noFeed: noFeed, counts: map[string]int{}, hooked: map[string]func(){}}
	target, _ := url.Parse(servers[apitest.None].URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // fleetctl ending mid-read is no error here
	proxy.ModifyResponse = func(resp *http.Response) error {
		if g.noFeed {
			resp.Header.Del("X-Changes-Cursor")
		}
		g.mu.Lock()
		hook := g.hooked[route(resp.Request)]
		delete(g.hooked, route(resp.Request))
		g.mu.Unlock()
		if hook != nil {
			hook()
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := route(r)
		g.mu.Lock()
		g.counts[name]++
		gone := name == "follow" && g.gone > 0
		if gone {
			g.gone--
		}
		g.mu.Unlock()
		switch {
		case g.noFeed && r.URL.Path == "/api/slaves/changes":
			answer(w, http.StatusNotFound, `{"code":404,"message":"No route GET /api/slaves/changes"}`)
		case gone:
			answer(w, http.StatusGone, `{"code":410,"message":"cursor expired; list again"}`)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// once runs hook the first time the API answers a request of route,
// before fleetctl gets that answer.
func (g *gateway) once(route string, hook func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hooked[route] = hook
}

// count is the number of requests of route so far.
func (g *gateway) count(route string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts[route]
}

// total is the number of requests of any route so far.
func (g *gateway) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.counts {
		n += c
	}
	return n
}

// polled waits until fleetctl has sent n more requests, of any route: a
// command that polls has polled again, however slow the machine.
func (g *gateway) polled(t *testing.T, n int) {
	t.Helper()
	from := g.total()
	eventually(t, fmt.Sprintf("%d more requests", n), func() bool { return g.total() >= from+n })
}

func (g *gateway) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprint(g.counts)
}

// env points fleetctl at the gateway.
func (g *gateway) env() []string { return []string{"FLEETCTL_ENDPOINT=" + g.URL} }

// unique is a prefix of machine ids no other run of a test uses.
func unique(name string) string { return fmt.Sprintf("%s%d", name, time.Now().UnixNano()%1e9) }

func TestAWaitForManyMachinesListsOnceAndFollowsTheFeed(t *testing.T) {
	p := unique("wfm")
	var ids []string
	for i := range 50 {
		ids = append(ids, fmt.Sprintf("%s-%02d", p, i))
	}
	machines(t, ids...)
	g := newGateway(t, false)
	r := start(t, g.env(), append([]string{"wait", "--for", "state=frozen"}, ids...)...)
	eventually(t, "waiting", func() bool { return g.count("follow") > 0 })
	for _, id := range ids {
		change(t, id, client.Frozen, "")
	}
	res := r.result(t).want(t, 0)
	if n := strings.Count(res.stdout, ": FROZEN\n"); n != 50 {
		t.Errorf("got stdout\n%s\nwant 50 lines FROZEN", res.stdout)
	}
	// 50 changes in all: each read of the feed answers at least one, or
	// ends its 20 s wait.
	if g.count("list") != 1 || g.count("details") != 0 || g.count("follow") > 50+1 {
		t.Errorf("got requests %v, want one list, no details and at most one read of the feed per change", g)
	}
	t.Logf("wait for 50 machines, 50 changes: %v", g)
}

func TestAGuardedDrainOfFiftyMachinesReadsNoMachineDetails(t *testing.T) {
	settleDrains(t)
	p := unique("gdf")
	ids := poolMachines(t, p, 50)
	// The scheduler's side: a draining machine reports no task left. It
	// learns of each drain from the change feed (every change of state is
	// on it), not from a list of the whole fleet every few milliseconds:
	// the emulator serves one request at a time, and those lists were most
	// of its work during the drain's 25 rounds.
	c := api(t)
	from, err := c.FollowChanges(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	driving, stopDriver := context.WithCancel(context.Background())
	defer stopDriver()
	driven := make(chan struct{})
	go func() {
		defer close(driven)
		cursor := from.Cursor
		for driving.Err() == nil {
			page, err := c.FollowChanges(driving, cursor, 5*time.Second)
			if err != nil {
				if driving.Err() == nil {
					t.Errorf("driver: read the change feed: %v", err)
				}
				return
			}
			cursor = page.Cursor
			for _, ch := range page.Changes {
				if s := ch.Slave; s != nil && s.Attributes["pool"] == p && draining(s.CurrentState.State) {
					m := apitest.Machine{ID: s.ID, Host: s.Host, Rack: s.RackID, Attributes: s.Attributes}
					if err := local.Report(context.Background(), time.Time{}, m); err != nil {
						t.Errorf("driver: report %s: %v", s.ID, err)
					}
				}
			}
		}
	}()
	g := newGateway(t, false)
	began := time.Now()
	res := fleetctl(t, apitest.None, g.env(), "decommission", "-l", "pool="+p, "--wait", "--max-unavailable", "2", "--yes")
	took := time.Since(began)
	stopDriver()
	<-driven
	res.want(t, 0)
	if n := strings.Count(res.stdout, ": DECOMMISSIONED\n"); n != len(ids) {
		t.Errorf("got stdout\n%s\nwant %d machines DECOMMISSIONED", res.stdout, len(ids))
	}
	// 100 changes (a decommission and a drain's end each), read at most
	// one answer a second.
	most := int(took/followPace) + 1
	if g.count("list") != 1 || g.count("details") != 0 || g.count("feed now") != 0 || g.count("follow") > most || g.count("change") != len(ids) {
		t.Errorf("got requests %v, want the one list of the selection, no details, at most %d reads of the feed and one decommission per machine", g, most)
	}
	t.Logf("guarded drain of 50 machines in %s: %v", took.Round(time.Second), g)
}

// A wait for one machine takes the feed's cursor before it reads the
// machine: a change that lands just after the read is followed, never
// missed. So does a wait for several, from the list's own cursor.
func TestAChangeJustAfterTheReadIsNotMissed(t *testing.T) {
	for _, tc := range []struct {
		name, route string
		n           int
	}{
		{"one machine, read by its details", "details", 1},
		{"two machines, read by a list", "list", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := unique("wgap")
			var ids []string
			for i := range tc.n {
				ids = append(ids, fmt.Sprintf("%s-%d", p, i))
			}
			machines(t, ids...)
			g := newGateway(t, false)
			g.once(tc.route, func() {
				for _, id := range ids {
					change(t, id, client.Frozen, "just after the read")
				}
			})
			args := append([]string{"wait", "--for", "state=frozen", "--wait-timeout", "20s"}, ids...)
			res := fleetctl(t, apitest.None, g.env(), args...).want(t, 0)
			for _, id := range ids {
				if !strings.Contains(res.stdout, id+": FROZEN\n") {
					t.Errorf("got stdout %q, want %s FROZEN", res.stdout, id)
				}
			}
		})
	}
}

// The follower hands each change to the waits of its machine only: one
// machine's change ends no other wait.
func TestEachChangeReachesOnlyTheWaitOfItsMachine(t *testing.T) {
	p := unique("wdis")
	a, b := p+"-a", p+"-b"
	machines(t, a, b)
	g := newGateway(t, false)
	r := start(t, g.env(), "wait", a, b, "--for", "state=frozen")
	eventually(t, "waiting", func() bool { return g.count("follow") > 0 })
	change(t, a, client.Frozen, "")
	eventually(t, "a shown frozen", func() bool { return strings.Contains(r.stderr.String(), a+": FROZEN since ") })
	// The change was handed to the waits as the feed answered it: a wait
	// it reached by mistake would have ended by now.
	time.Sleep(500 * time.Millisecond)
	if r.cmd.ProcessState != nil || strings.Contains(r.stderr.String(), b+": FROZEN") {
		t.Fatalf("the wait ended or b was taken for frozen on a's change\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	change(t, b, client.Frozen, "")
	res := r.result(t).want(t, 0)
	if res.stdout != a+": FROZEN\n"+b+": FROZEN\n" {
		t.Errorf("got stdout %q, want both FROZEN, in order", res.stdout)
	}
}

// A service older than the feed answers it 404: fleetctl says so once and
// reads each machine every --poll, as it did before the feed.
func TestWithoutTheFeedWaitsPollAsBefore(t *testing.T) {
	settleDrains(t)
	p := unique("wold")
	machines(t, p+"-1", p+"-2")
	g := newGateway(t, true)
	notice := "fleetctl: the service has no change feed (404 on /api/slaves/changes); reading each machine every 50ms instead\n"

	r := start(t, g.env(), "wait", p+"-1", p+"-2", "--for", "state=frozen", "--poll", "50ms")
	eventually(t, "polling", func() bool { return g.count("details") > 2 })
	change(t, p+"-1", client.Frozen, "")
	change(t, p+"-2", client.Frozen, "")
	res := r.result(t).want(t, 0)
	if res.stdout != p+"-1: FROZEN\n"+p+"-2: FROZEN\n" || strings.Count(res.stderr, notice) != 1 {
		t.Errorf("got stdout %q, stderr %q: want both FROZEN and the notice once", res.stdout, res.stderr)
	}

	r = start(t, g.env(), "decommission", p+"-1", "--wait", "--poll", "50ms")
	eventually(t, "draining", func() bool { return strings.Contains(r.stderr.String(), "STARTING_DECOMMISSION since") })
	report(t, p+"-1", 0)
	res = r.result(t).want(t, 0)
	if res.stdout != p+"-1: DECOMMISSIONED\n" || strings.Count(res.stderr, notice) != 1 {
		t.Errorf("got stdout %q, stderr %q: want the drain done and the notice once", res.stdout, res.stderr)
	}
}

// A cursor the feed no longer holds (a laptop that slept a day) is said in
// one line; the state is read again and the wait goes on.
func TestAWaitWhoseCursorExpiredReadsTheStateAgain(t *testing.T) {
	p := unique("wexp")
	machines(t, p+"-1")
	g := newGateway(t, false)
	g.gone = 1
	r := start(t, g.env(), "wait", p+"-1", "--for", "state=frozen")
	eventually(t, "reading again", func() bool { return g.count("details") == 2 && g.count("follow") > 1 })
	change(t, p+"-1", client.Frozen, "")
	res := r.result(t).want(t, 0)
	lines := strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n")
	want := "fleetctl: failed (410): cursor expired; list again: the feed no longer holds its changes; reading the machines' state again and following from there"
	if len(lines) != 3 || lines[1] != want || res.stdout != p+"-1: FROZEN\n" {
		t.Errorf("got stdout %q, stderr\n%s\nwant the state, the 410 in one line, then FROZEN", res.stdout, res.stderr)
	}
}

// A change between the feed's cursor and the read of a machine's details
// comes again on the feed, older than the state read: it is passed over,
// never taken for where the machine went.
func TestAChangeBetweenTheCursorAndTheReadIsNotTakenAgain(t *testing.T) {
	settleDrains(t)
	id := unique("wrep")
	machines(t, id)
	g := newGateway(t, false)
	g.once("feed now", func() {
		change(t, id, client.Frozen, "on the way to the drain")
		if err := api(t).DecommissionSlave(context.Background(), id, client.ChangeRequest{}, client.ChangeOptions{}); err != nil {
			t.Error(err)
		}
	})
	r := start(t, g.env(), "wait", id, "--for", "state=decommissioned")
	eventually(t, "waiting", func() bool { return g.count("follow") > 0 })
	// The feed has answered the two changes by now: a wait that took the
	// FROZEN one for the machine's state has ended.
	eventually(t, "the changes read", func() bool { return g.count("follow") > 1 })
	report(t, id, 0)
	res := r.result(t).want(t, 0)
	if res.stdout != id+": DECOMMISSIONED\n" || strings.Contains(res.stderr, "FROZEN") {
		t.Errorf("got stdout %q, stderr %q: want the drain followed from STARTING_DECOMMISSION, FROZEN never shown", res.stdout, res.stderr)
	}
}
