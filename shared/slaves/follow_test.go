package slaves_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// line is one change or bookmark of the feed, as a follower reads it.
type line struct {
	SlaveID         string          `json:"slaveId"`
	Type            string          `json:"type"`
	Sequence        int64           `json:"sequence"`
	Cursor          string          `json:"cursor"`
	InitialStateEnd bool            `json:"initialStateEnd"`
	StreamEnd       bool            `json:"streamEnd"`
	Slave           json.RawMessage `json:"slave"`
	Expiring        json.RawMessage `json:"expiring"`
}

// fleetOf reports n slaves, host-0 to host-(n-1), into a new store, and
// serves it.
func fleetOf(t *testing.T, n int) (*memstore.Store, http.Handler) {
	t.Helper()
	store := memstore.New(0)
	now := time.Now().UnixMilli()
	for i := range n {
		id := fmt.Sprintf("S%d", i)
		if err := store.Apply(t.Context(), id, machine.Observe(machine.Observation{ID: id, Host: fmt.Sprintf("host-%d", i), At: now}, now)); err != nil {
			t.Fatal(err)
		}
	}
	return store, web.Wrap(slaves.New(store, access.Policy{}, machine.Limits{MaxExpiring: 24 * time.Hour}), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func changeSlave(t *testing.T, store *memstore.Store, id string, target machine.State, req machine.ChangeRequest) {
	t.Helper()
	c := machine.Change{SlaveID: id, Target: target, Request: req, Now: func() int64 { return time.Now().UnixMilli() }}
	if err := store.Apply(t.Context(), id, machine.UserChange(c, machine.Limits{MaxExpiring: 24 * time.Hour})); err != nil {
		t.Fatal(err)
	}
}

// followPage reads one answer of the long poll.
func followPage(t *testing.T, h http.Handler, query string) (changes []line, cursor string) {
	t.Helper()
	rec := get(h, "/api/slaves/changes?"+query)
	var p struct {
		Changes []line `json:"changes"`
		Cursor  string `json:"cursor"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); rec.Code != 200 || err != nil || p.Cursor == "" {
		t.Fatalf("GET ?%s: got %d %s, want 200 with a cursor", query, rec.Code, rec.Body)
	}
	return p.Changes, p.Cursor
}

// A follower whose selector matches nothing still moves with the feed:
// every answer carries a new cursor (a bookmark), so after days without a
// match it resumes without a 410, as long as it kept following.
func TestAQuietFilterKeepsACursorThatNeverExpires(t *testing.T) {
	store, h := fleetOf(t, 2)
	var offset time.Duration
	store.SetClock(func() time.Time { return time.Now().Add(offset) })
	_, cursor := followPage(t, h, "state=DECOMMISSIONED")
	for day := range 3 {
		changeSlave(t, store, "S0", machine.Frozen, machine.ChangeRequest{})
		changeSlave(t, store, "S0", machine.Active, machine.ChangeRequest{})
		offset += 20 * time.Hour
		changes, next := followPage(t, h, "state=DECOMMISSIONED&since="+url.QueryEscape(cursor))
		if len(changes) != 0 {
			t.Fatalf("day %d: got %+v, want no change for a selector nothing matches", day, changes)
		}
		cursor = next
	}
	offset += 20 * time.Hour
	if rec := get(h, "/api/slaves/changes?state=DECOMMISSIONED&since="+url.QueryEscape(cursor)); rec.Code != 200 {
		t.Errorf("after 80 hours of following: got %d %s, want 200", rec.Code, rec.Body)
	}
	// The bookmark is past the changes the selector passed over, not only
	// younger: none of them is still ahead of it.
	if ahead, _ := followPage(t, h, "since="+url.QueryEscape(cursor)); len(ahead) != 0 {
		t.Errorf("got %d changes ahead of the last bookmark, want none", len(ahead))
	}
}

// The initial state in the feed is the list: the same slaves, each as an
// "added" change with its sequence, then a bookmark whose cursor is the
// answer's; following from it then sees the changes after, as from the
// list's cursor.
func TestInitialStateThenFollowEqualsListThenFollow(t *testing.T) {
	store, h := fleetOf(t, 5)
	changeSlave(t, store, "S1", machine.Frozen, machine.ChangeRequest{})
	changeSlave(t, store, "S3", machine.Frozen, machine.ChangeRequest{})
	const query = "state=FROZEN&host=host-*"
	list := get(h, "/api/slaves/?"+query)
	var listed []json.RawMessage
	if err := json.Unmarshal(list.Body.Bytes(), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("list: %v, got %s", err, list.Body)
	}
	changes, cursor := followPage(t, h, "initial=true&"+query)
	if len(changes) != 3 || changes[2].Type != "bookmark" || !changes[2].InitialStateEnd || changes[2].Cursor != cursor {
		t.Fatalf("got %+v, want two added slaves and the bookmark of the answer's cursor", changes)
	}
	for i, c := range changes[:2] {
		if c.Type != "added" || string(c.Slave) != string(listed[i]) {
			t.Errorf("initial state %d: got %s %s, want added %s", i, c.Type, c.Slave, listed[i])
		}
	}
	changeSlave(t, store, "S1", machine.Active, machine.ChangeRequest{})
	fromInitial, _ := followPage(t, h, query+"&since="+url.QueryEscape(cursor))
	fromList, _ := followPage(t, h, query+"&since="+url.QueryEscape(list.Header().Get(slaves.CursorHeader)))
	if len(fromInitial) != 1 || fromInitial[0].SlaveID != "S1" || !reflect.DeepEqual(fromInitial, fromList) {
		t.Errorf("followed from the initial state: %+v; from the list: %+v; want S1 leaving the selector, the same", fromInitial, fromList)
	}
	if rec := get(h, "/api/slaves/changes?initial=true&since="+url.QueryEscape(cursor)); rec.Code != 400 {
		t.Errorf("initial with since: got %d %s, want 400", rec.Code, rec.Body)
	}
}

// Expiring changes are changes of the feed: set with the change that made
// it, deleted by a user, applied by the expiry.
func TestExpiringChangesAreInTheFeed(t *testing.T) {
	store, h := fleetOf(t, 1)
	_, cursor := followPage(t, h, "")
	hour, active := int64(3_600_000), machine.Active
	changeSlave(t, store, "S0", machine.Frozen, machine.ChangeRequest{DurationMillis: &hour, RevertToState: &active})
	if err := store.DeleteExpiring(t.Context(), "S0"); err != nil {
		t.Fatal(err)
	}
	changeSlave(t, store, "S0", machine.Active, machine.ChangeRequest{})
	changeSlave(t, store, "S0", machine.Frozen, machine.ChangeRequest{DurationMillis: &hour, RevertToState: &active})
	var outcome machine.Outcome
	later := func() int64 { return time.Now().Add(2 * time.Hour).UnixMilli() }
	if err := store.Apply(t.Context(), "S0", machine.Expire("S0", later, machine.Limits{}, &outcome)); err != nil || outcome != machine.Applied {
		t.Fatalf("expiry: %v, %s", err, outcome)
	}
	changes, _ := followPage(t, h, "since="+url.QueryEscape(cursor))
	var got []string
	for _, c := range changes {
		got = append(got, c.Type)
		if strings.HasPrefix(c.Type, "expiring") && (len(c.Expiring) == 0 || len(c.Slave) == 0) {
			t.Errorf("%s without its record or slave: %+v", c.Type, c)
		}
	}
	want := []string{"stateChanged", "expiringSet", "expiringDeleted", "stateChanged", "stateChanged", "expiringSet", "stateChanged", "expiringReverted"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if s, _ := store.Get(t.Context(), "S0"); s.Sequence != changes[len(changes)-1].Sequence {
		t.Errorf("the slave is at sequence %d, want its last change's %d", s.Sequence, changes[len(changes)-1].Sequence)
	}
}

// readStream reads a stream=true answer held for hold, with during run
// meanwhile. The request's deadline stands for the function's, which the
// stream ends a second before.
func readStream(t *testing.T, h http.Handler, query string, hold time.Duration, during func()) []line {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hold)
	defer cancel()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/slaves/changes?stream=true&"+query, nil))
	}()
	during()
	<-done
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("got %d %s, want 200 application/x-ndjson", rec.Code, rec.Header().Get("Content-Type"))
	}
	var lines []line
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// A stream holds the request open and sends each change as it happens: the
// initial state, its bookmark, the changes the selector picks, bookmarks
// while nothing changes, and a last bookmark to resume from; across
// thousands of changes, what it sends is what the long poll answers from
// the same cursor, page after page.
func TestAStreamSendsWhatTheLongPollAnswers(t *testing.T) {
	store, h := fleetOf(t, 40)
	const query = "host=host-[12]*" // host-1, host-2, host-10 to host-29: 22 of 40
	changes := 0
	during := func() {
		time.Sleep(200 * time.Millisecond) // the initial state is read
		for round := range 60 {
			target := machine.Frozen
			if round%2 == 1 {
				target = machine.Active
			}
			for i := range 40 {
				changeSlave(t, store, fmt.Sprintf("S%d", i), target, machine.ChangeRequest{})
				changes++
			}
		}
	}
	lines := readStream(t, h, "initial=true&"+query, 6*time.Second, during)
	if len(lines) < 24 || lines[0].Type != "added" || !lines[22].InitialStateEnd {
		t.Fatalf("got %d lines, the first %+v: want 22 added slaves, then the initial state's bookmark", len(lines), lines[:min(len(lines), 3)])
	}
	last := lines[len(lines)-1]
	if !last.StreamEnd || last.Cursor == "" {
		t.Fatalf("last line %+v, want the bookmark that ends the stream", last)
	}
	var streamed []line
	for _, l := range lines[23:] {
		if l.Type != "bookmark" {
			streamed = append(streamed, l)
		}
	}
	// However many changes the stream's hold covered, it and a long poll
	// from its last cursor are the long poll from its first.
	poll := func(cursor string) []line {
		var out []line
		for {
			page, next := followPage(t, h, query+"&since="+url.QueryEscape(cursor))
			if len(page) == 0 {
				return out
			}
			out, cursor = append(out, page...), next
		}
	}
	all, rest := poll(lines[22].Cursor), poll(last.Cursor)
	if len(all) != 22*60 || len(streamed) == 0 || !reflect.DeepEqual(append(streamed, rest...), all) {
		t.Errorf("streamed %d changes and %d after its last cursor, polled %d from its first, of %d made: want the 1,320 of the selected slaves, the same",
			len(streamed), len(rest), len(all), changes)
	}
}

// In Lambda every request but a stream keeps the deadline the function's
// timeout gave it before streams; a stream's is the function's.
func TestEveryRequestButAStreamHasTheRouteDeadline(t *testing.T) {
	for _, tt := range []struct {
		target   string
		deadline bool
	}{
		{"/api/slaves/", true},
		{"/api/slaves/changes?wait=20", true},
		{"/api/slaves/changes?stream=false", true},
		{"/api/slaves/changes?stream=true", false},
	} {
		var left time.Duration
		var has bool
		slaves.Deadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var d time.Time
			d, has = r.Context().Deadline()
			left = time.Until(d)
		})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tt.target, nil))
		if has != tt.deadline || has && (left > slaves.RouteDeadline || left < slaves.RouteDeadline-time.Second) {
			t.Errorf("%s: deadline %v in %v, want %v within %v", tt.target, has, left, tt.deadline, slaves.RouteDeadline)
		}
	}
}

// noScan is a store whose fleet cannot be read whole: what is asked of it
// by name reads those slaves alone.
type noScan struct{ *memstore.Store }

func (noScan) List(context.Context, func(machine.Slave) error) error {
	return errors.New("the fleet was read whole")
}

// A list or an initial state that names a few slaves reads each of them,
// not the fleet, and answers what the fleet's read answers.
func TestAFewSlavesNamedAreReadOneByOne(t *testing.T) {
	store, whole := fleetOf(t, 40)
	changeSlave(t, store, "S7", machine.Frozen, machine.ChangeRequest{})
	named := web.Wrap(slaves.New(noScan{store}, access.Policy{}, machine.Limits{MaxExpiring: 24 * time.Hour}), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, query := range []string{"id=S7&id=S3&id=S7&id=nope", "id=S7&id=S3&state=FROZEN", "id=S1&host=host-2"} {
		want, got := get(whole, "/api/slaves/?"+query), get(named, "/api/slaves/?"+query)
		if got.Code != 200 || got.Body.String() != want.Body.String() {
			t.Errorf("list ?%s: got %d %s, want %s", query, got.Code, got.Body, want.Body)
		}
		initial, _ := followPage(t, named, "initial=true&"+query)
		fromWhole, _ := followPage(t, whole, "initial=true&"+query)
		if len(initial) != len(fromWhole) || len(initial) == 0 || !reflect.DeepEqual(initial[:len(initial)-1], fromWhole[:len(fromWhole)-1]) {
			t.Errorf("initial ?%s: got %+v, want %+v", query, initial, fromWhole)
		}
	}
	if rec := get(named, "/api/slaves/?host=host-2"); rec.Code != 500 {
		t.Errorf("a list that names no slave: got %d, want the fleet read (refused here)", rec.Code)
	}
}
