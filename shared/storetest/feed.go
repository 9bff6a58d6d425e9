package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"sync"
	"time"

	"pgregory.net/rapid"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// FeedModel checks the change feed (docs/behaviour.md "The change feed")
// on s with one random sequence: a fleet reported, followers that list the
// slaves (all, or one state) and then follow the feed from the list's
// cursor, and steps of user changes with and without expiring reverts,
// reports that describe, drain and lose machines, expiry runs, deletions
// and DELETE /api/slaves/dead, some run by concurrent writers and some
// while a follower lists. A follower checks every change as it applies it
// (a slave's sequence only grows; an added slave was not listed; a state
// change leaves the state the follower holds), may be restarted from its
// cursor, and must end equal to a list made at the end: no change missed,
// none repeated. Other followers ask the service to filter (a state, a host
// glob, both; docs/behaviour.md "Selectors"), listing with the selector or
// starting from the initial state (initial=true): each must end equal to a
// list with its selector made at the end, and receives only changes of
// slaves the selector picked before or after them. ids prefixes the slaves'
// ids, so that sequences can share a store; a follower only looks at slaves
// with that prefix.
func FeedModel(t *rapid.T, s Store, ids string) {
	m := &feedModel{t: t, ctx: context.Background(), s: s, prefix: ids, hooked: &hookedStore{Store: s}}
	m.h = web.Wrap(slaves.New(m.hooked, access.Policy{}, limits), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for i := range rapid.IntRange(1, 6).Draw(t, "fleet") {
		m.report(fmt.Sprintf("%sS%d", ids, i), "host-a", false, nil)
	}
	m.followers = append(m.followers, m.list(""))
	t.Repeat(map[string]func(*rapid.T){
		"start a filtered follower": func(t *rapid.T) { m.followers = append(m.followers, m.filtered(t)) },
		"change":                    func(t *rapid.T) { m.step(t) },
		"concurrent writers":        func(t *rapid.T) { m.concurrently(t) },
		"list while changing":       func(t *rapid.T) { m.listWhileChanging(t) },
		"follow": func(t *rapid.T) {
			m.follow(m.followers[rapid.IntRange(0, len(m.followers)-1).Draw(t, "follower")])
		},
		"restart a follower from its cursor": func(t *rapid.T) { m.restart(t) },
		"": func(t *rapid.T) {
			for _, f := range m.followers {
				m.follow(f)
			}
			m.check()
		},
	})
	for _, f := range m.followers {
		m.follow(f)
	}
	m.check()
}

type feedModel struct {
	t         *rapid.T
	ctx       context.Context
	mu        sync.Mutex
	failed    error // the first write that failed, from any writer
	s         Store
	prefix    string
	h         http.Handler
	hooked    *hookedStore
	followers []*follower
}

// follower holds what a client of the feed holds: the slaves it listed,
// changed by every change it followed since, and its cursor.
type follower struct {
	state  string // the list's state filter, "" for all
	cursor string
	slaves map[string]map[string]any
	seqs   map[string]int64 // the last sequence seen of each slave
	// query is the selector the service filters the feed with, "" for
	// none; then state is ""; sel is the same, to check what it sends.
	query string
	sel   machine.Selector
}

// holds reports whether the follower holds a slave as a change left it.
func (f *follower) holds(slave map[string]any) bool {
	if f.query != "" {
		return f.sel.Matches(fromJSON(slave))
	}
	return f.state == "" || slave["currentState"].(map[string]any)["state"] == f.state
}

// fromJSON reads back what a selector reads of a slave's JSON.
func fromJSON(slave map[string]any) machine.Slave {
	s := machine.Slave{ID: slave["id"].(string), Host: slave["host"].(string), RackID: slave["rackId"].(string), Attributes: map[string]string{}}
	s.Current.State = machine.State(slave["currentState"].(map[string]any)["state"].(string))
	for k, v := range slave["attributes"].(map[string]any) {
		s.Attributes[k] = v.(string)
	}
	return s
}

// filtered starts a follower that the service filters for: by a state, a
// host glob or both, from a list with that selector or from the initial
// state in the feed.
func (m *feedModel) filtered(t *rapid.T) *follower {
	f := &follower{slaves: map[string]map[string]any{}, seqs: map[string]int64{}}
	q := url.Values{}
	if rapid.Bool().Draw(t, "by state") {
		st := rapid.SampledFrom(states).Draw(t, "state")
		q.Set("state", string(st))
		f.sel.States = []machine.State{st}
	}
	if len(q) == 0 || rapid.Bool().Draw(t, "by host") {
		q.Set("host", "host-b*")
		f.sel.Host = "host-b*"
	}
	f.query = q.Encode()
	var path string
	var items []map[string]any
	if rapid.Bool().Draw(t, "from the initial state") {
		path = "/api/slaves/changes?initial=true&" + f.query
		code, body, _ := m.get(path)
		var p changePage
		if err := json.Unmarshal(body, &p); code != http.StatusOK || err != nil || len(p.Changes) == 0 {
			m.t.Fatalf("GET %s: got %d %s (%v), want 200 and the initial state", path, code, body, err)
		}
		end := p.Changes[len(p.Changes)-1]
		if end.Type != "bookmark" || !end.InitialStateEnd || end.Cursor != p.Cursor {
			m.t.Fatalf("GET %s: the initial state ends with %+v, want the bookmark of the answer's cursor", path, end)
		}
		for _, c := range p.Changes[:len(p.Changes)-1] {
			if c.Type != "added" || c.Slave == nil {
				m.t.Fatalf("GET %s: the initial state holds %+v, want only added slaves", path, c)
			}
			items = append(items, c.Slave)
		}
		f.cursor = p.Cursor
	} else {
		path = "/api/slaves/?" + f.query
		code, body, header := m.get(path)
		if err := json.Unmarshal(body, &items); code != http.StatusOK || err != nil {
			m.t.Fatalf("GET %s: got %d %s (%v)", path, code, body, err)
		}
		f.cursor = header.Get(slaves.CursorHeader)
	}
	for _, sl := range items {
		if id := sl["id"].(string); m.mine(id) {
			if !f.holds(sl) {
				m.t.Fatalf("GET %s answered %v, which its selector does not pick", path, sl)
			}
			f.slaves[id] = sl
		}
	}
	return f
}

func (f *follower) clone() *follower {
	c := *f
	c.slaves, c.seqs = maps.Clone(f.slaves), maps.Clone(f.seqs)
	return &c
}

// hookedStore runs during, when set, before and after its list reads: a
// change that commits while a list is read.
type hookedStore struct {
	Store
	mu     sync.Mutex
	during func()
}

func (h *hookedStore) hook() {
	h.mu.Lock()
	f := h.during
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

func (h *hookedStore) List(ctx context.Context, each func(machine.Slave) error) error {
	h.hook()
	defer h.hook()
	return h.Store.List(ctx, each)
}

func (h *hookedStore) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	h.hook()
	defer h.hook()
	return h.Store.ListByState(ctx, state, each)
}

func (m *feedModel) get(path string) (int, []byte, http.Header) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes(), rec.Header()
}

// listQuery lists the slaves the selector query picks.
func (m *feedModel) listQuery(query string) map[string]map[string]any {
	path := "/api/slaves/?" + query
	code, body, _ := m.get(path)
	var list []map[string]any
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
		m.t.Fatalf("GET %s: got %d %s (%v)", path, code, body, err)
	}
	out := map[string]map[string]any{}
	for _, sl := range list {
		if id := sl["id"].(string); m.mine(id) {
			out[id] = sl
		}
	}
	return out
}

// list lists the slaves, in state when it is not "", as a new follower.
func (m *feedModel) list(state string) *follower {
	path := "/api/slaves/"
	if state != "" {
		path += "?state=" + state
	}
	code, body, header := m.get(path)
	if code != http.StatusOK {
		m.t.Fatalf("GET %s: got %d %s, want 200", path, code, body)
	}
	var list []map[string]any
	if err := json.Unmarshal(body, &list); err != nil {
		m.t.Fatalf("GET %s: %v", path, err)
	}
	f := &follower{state: state, cursor: header.Get(slaves.CursorHeader), slaves: map[string]map[string]any{}, seqs: map[string]int64{}}
	if f.cursor == "" {
		m.t.Fatalf("GET %s: no %s header", path, slaves.CursorHeader)
	}
	for _, sl := range list {
		if id := sl["id"].(string); m.mine(id) {
			f.slaves[id] = sl
		}
	}
	return f
}

func (m *feedModel) mine(id string) bool {
	return len(id) >= len(m.prefix) && id[:len(m.prefix)] == m.prefix
}

type changePage struct {
	Changes []struct {
		SlaveID         string         `json:"slaveId"`
		Type            string         `json:"type"`
		Sequence        int64          `json:"sequence"`
		PreviousState   string         `json:"previousState"`
		Update          map[string]any `json:"update"`
		Slave           map[string]any `json:"slave"`
		Expiring        map[string]any `json:"expiring"`
		Cursor          string         `json:"cursor"`
		InitialStateEnd bool           `json:"initialStateEnd"`
	} `json:"changes"`
	Cursor string `json:"cursor"`
}

// page reads the feed after f's cursor, with its selector.
func (m *feedModel) page(f *follower) (changePage, []byte) {
	path := "/api/slaves/changes?since=" + url.QueryEscape(f.cursor)
	if f.query != "" {
		path += "&" + f.query
	}
	code, body, _ := m.get(path)
	if code != http.StatusOK {
		m.t.Fatalf("GET %s: got %d %s, want 200", path, code, body)
	}
	var p changePage
	if err := json.Unmarshal(body, &p); err != nil {
		m.t.Fatalf("GET %s: %v", path, err)
	}
	return p, body
}

// follow reads the feed from f's cursor until it holds no more changes,
// applying and checking each.
func (m *feedModel) follow(f *follower) {
	for {
		p, _ := m.page(f)
		for _, c := range p.Changes {
			if !m.mine(c.SlaveID) {
				continue
			}
			_, had := f.slaves[c.SlaveID]
			if f.query != "" && !had && (c.Slave == nil || !f.holds(c.Slave)) {
				m.t.Fatalf("follower of %q: %s %s of %s, which its selector picked neither before nor after", f.query, c.Type, c.SlaveID, c.Slave)
			}
			if last, ok := f.seqs[c.SlaveID]; ok && c.Sequence <= last {
				m.t.Fatalf("follower of %q: change %s of %s has sequence %d after %d: repeated or reordered", f.state, c.Type, c.SlaveID, c.Sequence, last)
			}
			f.seqs[c.SlaveID] = c.Sequence
			held, ok := f.slaves[c.SlaveID]
			switch c.Type {
			case "added":
				if ok {
					m.t.Fatalf("follower of %q: %s added, but it holds it already: %v", f.state, c.SlaveID, held)
				}
			case "stateChanged":
				if ok && held["currentState"].(map[string]any)["state"] != c.PreviousState {
					m.t.Fatalf("follower of %q: %s changed from %s, but it holds it in %v", f.state, c.SlaveID, c.PreviousState, held["currentState"])
				}
				if c.Slave == nil || !reflect.DeepEqual(c.Slave["currentState"], c.Update) {
					m.t.Fatalf("follower of %q: state change of %s: the slave %v is not at its entry %v", f.state, c.SlaveID, c.Slave, c.Update)
				}
			case "descriptionChanged", "deleted":
			case "expiringSet", "expiringDeleted", "expiringReverted":
				if c.Slave == nil || c.Expiring == nil || c.Expiring["machineId"] != c.SlaveID {
					m.t.Fatalf("follower of %q: %s of %s without its slave or record: %v %v", f.state, c.Type, c.SlaveID, c.Slave, c.Expiring)
				}
			default:
				m.t.Fatalf("unknown change type %q", c.Type)
			}
			delete(f.slaves, c.SlaveID)
			if c.Slave != nil && f.holds(c.Slave) {
				f.slaves[c.SlaveID] = c.Slave
			}
		}
		f.cursor = p.Cursor
		if len(p.Changes) == 0 {
			return
		}
	}
}

// check compares every follower, after following, with a list made now.
func (m *feedModel) check() {
	for _, f := range m.followers {
		var want map[string]map[string]any
		if f.query != "" {
			want = m.listQuery(f.query)
		} else {
			want = m.list(f.state).slaves
		}
		if !reflect.DeepEqual(f.slaves, want) {
			for _, id := range slices.Sorted(maps.Keys(maps.Collect(func(yield func(string, bool) bool) {
				for id := range f.slaves {
					yield(id, true)
				}
				for id := range want {
					yield(id, true)
				}
			}))) {
				if !reflect.DeepEqual(f.slaves[id], want[id]) {
					m.t.Errorf("follower of %q: %s: got %v, want %v", f.state, id, f.slaves[id], want[id])
				}
			}
			m.t.Fatalf("a follower that listed and followed the feed differs from the list")
		}
	}
}

// restart replaces a follower by one started from what it kept, its slaves
// and its cursor; reading from the cursor twice answers the same changes.
func (m *feedModel) restart(t *rapid.T) {
	i := rapid.IntRange(0, len(m.followers)-1).Draw(t, "follower")
	kept := m.followers[i].clone()
	first, _ := m.page(kept)
	again, _ := m.page(kept)
	if !reflect.DeepEqual(first.Changes, again.Changes) {
		m.t.Fatalf("the same cursor answered %v, then %v", first.Changes, again.Changes)
	}
	m.follow(kept)
	m.followers[i] = kept
}

var states = []machine.State{machine.Active, machine.Frozen, machine.StartingDecommission, machine.Dead}

// listWhileChanging makes a new follower whose list is read while changes
// commit, before and after the read.
func (m *feedModel) listWhileChanging(t *rapid.T) {
	var steps []func()
	for range rapid.IntRange(1, 3).Draw(t, "changes during the list") {
		steps = append(steps, m.drawStep(t))
	}
	state := ""
	if rapid.Bool().Draw(t, "list one state") {
		state = string(rapid.SampledFrom(states).Draw(t, "state"))
	}
	m.hooked.mu.Lock()
	m.hooked.during = func() {
		m.hooked.mu.Lock()
		next := steps
		if len(steps) > 0 {
			next, steps = steps[:1], steps[1:]
		}
		m.hooked.mu.Unlock()
		for _, f := range next {
			f()
		}
	}
	m.hooked.mu.Unlock()
	f := m.list(state)
	m.hooked.mu.Lock()
	m.hooked.during = nil
	m.hooked.mu.Unlock()
	for _, rest := range steps {
		rest()
	}
	m.written()
	m.followers = append(m.followers, f)
}

// concurrently runs a few steps at once.
func (m *feedModel) concurrently(t *rapid.T) {
	var steps []func()
	for range rapid.IntRange(2, 5).Draw(t, "writers") {
		steps = append(steps, m.drawStep(t))
	}
	var wg sync.WaitGroup
	for _, f := range steps {
		wg.Go(f)
	}
	wg.Wait()
	m.written()
}

func (m *feedModel) step(t *rapid.T) {
	m.drawStep(t)()
	m.written()
}

// drawStep draws one change of the fleet, to run later.
func (m *feedModel) drawStep(t *rapid.T) func() {
	id := fmt.Sprintf("%sS%d", m.prefix, rapid.IntRange(0, 7).Draw(t, "slave"))
	switch rapid.IntRange(0, 6).Draw(t, "step") {
	case 0, 1:
		target := rapid.SampledFrom([]machine.State{machine.Frozen, machine.StartingDecommission, machine.Active}).Draw(t, "target")
		var req machine.ChangeRequest
		if rapid.Bool().Draw(t, "expiring") {
			revert := rapid.SampledFrom([]machine.State{machine.Active, machine.Frozen}).Draw(t, "revert")
			req = machine.ChangeRequest{DurationMillis: new(int64(1)), RevertToState: &revert, ActionID: machine.NewActionID()}
		}
		return func() {
			now := time.Now().UnixMilli()
			c := machine.Change{SlaveID: id, Target: target, Request: req, User: "ops@example.com", Now: func() int64 { return now }}
			m.write(m.s.Apply(m.ctx, id, machine.UserChange(c, limits)))
		}
	case 2:
		host := rapid.SampledFrom([]string{"host-a", "host-b"}).Draw(t, "host")
		lost := rapid.IntRange(0, 3).Draw(t, "lost") == 0
		var tasks *int
		if rapid.Bool().Draw(t, "says its tasks") {
			tasks = new(rapid.IntRange(0, 2).Draw(t, "tasks"))
		}
		return func() { m.report(id, host, lost, tasks) }
	case 3:
		return func() {
			var outcome machine.Outcome
			clock := func() int64 { return time.Now().Add(time.Hour).UnixMilli() }
			m.write(m.s.Apply(m.ctx, id, machine.Expire(id, clock, limits, &outcome)))
		}
	case 4:
		return func() {
			_, err := m.s.Delete(m.ctx, id, nil)
			m.write(err)
		}
	case 5:
		return func() {
			_, err := m.s.DeleteDead(m.ctx, time.Now().Add(time.Hour).UnixMilli())
			m.write(err)
		}
	default:
		return func() {
			c := machine.Change{SlaveID: id, Target: machine.Frozen, User: "ops@example.com", Now: func() int64 { return time.Now().UnixMilli() }}
			m.write(m.s.Apply(m.ctx, id, machine.UserChange(c, limits)))
		}
	}
}

// report has the scheduler report id.
func (m *feedModel) report(id, host string, lost bool, tasks *int) {
	now := time.Now().UnixMilli()
	o := machine.Observation{ID: id, Host: host, RackID: "r1", Lost: lost, RunningTasks: tasks, At: now}
	m.write(m.s.Apply(m.ctx, id, machine.Observe(o, now)))
}

// write fails the sequence on an error that is not a refusal: a refusal
// (not found, an illegal transition, the limit, a race lost too often)
// changes nothing, which the followers must see too.
func (m *feedModel) write(err error) {
	if err == nil || fault.KindOf(err) != fault.KindInternal {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = err
	}
}

// written fails the sequence when a write failed.
func (m *feedModel) written() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		m.t.Fatalf("write: %v", m.failed)
	}
}
