package slaves_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/payload"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// feedServer serves the slave routes over a memory store with one slave.
func feedServer(t *testing.T) (*memstore.Store, http.Handler) {
	t.Helper()
	store := memstore.New(0)
	now := time.Now().UnixMilli()
	if err := store.Apply(t.Context(), "S1", machine.Observe(machine.Observation{ID: "S1", Host: "h", At: now}, now)); err != nil {
		t.Fatal(err)
	}
	h := web.Wrap(slaves.New(store, access.Policy{}, machine.Limits{}), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return store, h
}

func get(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// listCursor lists the slaves and returns the list's cursor.
func listCursor(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := get(h, "/api/slaves/")
	cursor := rec.Header().Get(slaves.CursorHeader)
	if rec.Code != http.StatusOK || cursor == "" {
		t.Fatalf("list: got %d and cursor %q, want 200 and a cursor", rec.Code, cursor)
	}
	return cursor
}

func freeze(t *testing.T, store *memstore.Store) {
	t.Helper()
	c := machine.Change{SlaveID: "S1", Target: machine.Frozen, Now: func() int64 { return time.Now().UnixMilli() }}
	if err := store.Apply(t.Context(), "S1", machine.UserChange(c, machine.Limits{})); err != nil {
		t.Fatal(err)
	}
}

func wantError(t *testing.T, rec *httptest.ResponseRecorder, code int, message string) {
	t.Helper()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != code || body.Code != code || !strings.Contains(body.Message, message) {
		t.Errorf("got %d %s, want %d with %q", rec.Code, rec.Body, code, message)
	}
}

func TestACursorAlteredInAnyByteIsRefusedAndChangesNothing(t *testing.T) {
	_, h := feedServer(t)
	cursor := listCursor(t, h)
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, flip := range []byte{0x01, 0x80} {
			forged := []byte(string(raw))
			forged[i] ^= flip
			rec := get(h, "/api/slaves/changes?since="+base64.RawURLEncoding.EncodeToString(forged))
			wantError(t, rec, http.StatusBadRequest, "not a cursor this service issued")
		}
	}
	for _, bad := range []string{"x", "!!!", cursor[:len(cursor)-1], cursor + "AA", base64.RawURLEncoding.EncodeToString([]byte{1, 2, 3})} {
		wantError(t, get(h, "/api/slaves/changes?since="+url.QueryEscape(bad)), http.StatusBadRequest, "not a cursor this service issued")
	}
	if rec := get(h, "/api/slaves/changes?since="+cursor); rec.Code != http.StatusOK {
		t.Errorf("the cursor itself: got %d %s, want 200", rec.Code, rec.Body)
	}
}

func TestACursorOlderThanTheFeedsRetentionIsGone(t *testing.T) {
	store, h := feedServer(t)
	cursor := listCursor(t, h)
	store.SetClock(func() time.Time { return time.Now().Add(24*time.Hour + time.Minute) })
	wantError(t, get(h, "/api/slaves/changes?since="+cursor), http.StatusGone, "cursor expired; list again")
	store.SetClock(func() time.Time { return time.Now().Add(24*time.Hour - time.Minute) })
	if rec := get(h, "/api/slaves/changes?since="+cursor); rec.Code != http.StatusOK {
		t.Errorf("within the retention: got %d %s, want 200", rec.Code, rec.Body)
	}
}

func TestWaitMustBeWholeSecondsUpToTwenty(t *testing.T) {
	_, h := feedServer(t)
	for _, bad := range []string{"-1", "21", "1.5", "x", "1e1"} {
		wantError(t, get(h, "/api/slaves/changes?wait="+bad), http.StatusBadRequest, "query param wait must be a whole number of seconds from 0 to 20")
	}
}

type page struct {
	Changes []struct {
		SlaveID       string `json:"slaveId"`
		Type          string `json:"type"`
		PreviousState string `json:"previousState"`
		Sequence      int64  `json:"sequence"`
	} `json:"changes"`
	Cursor string `json:"cursor"`
}

func readPage(t *testing.T, rec *httptest.ResponseRecorder) page {
	t.Helper()
	var p page
	if rec.Code != http.StatusOK {
		t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAWaitingRequestAnswersTheChangeThatArrivesAndAnEmptyOneWhenNoneDoes(t *testing.T) {
	store, h := feedServer(t)
	cursor := listCursor(t, h)
	go func() {
		time.Sleep(300 * time.Millisecond)
		freeze(t, store)
	}()
	// The longest wait: answered before it ends, the answer came of the
	// change, however slow the machine (the wait's end would re-read and
	// find the change too).
	start := time.Now()
	p := readPage(t, get(h, fmt.Sprintf("/api/slaves/changes?wait=%d&since=%s", int(slaves.MaxWait/time.Second), cursor)))
	if took := time.Since(start); len(p.Changes) != 1 || p.Changes[0].Type != "stateChanged" || took >= slaves.MaxWait {
		t.Errorf("got %+v after %v, want the freeze before the wait of %v ends", p.Changes, took, slaves.MaxWait)
	}
	start = time.Now()
	empty := readPage(t, get(h, "/api/slaves/changes?wait=1&since="+p.Cursor))
	if took := time.Since(start); len(empty.Changes) != 0 || took < 500*time.Millisecond || empty.Cursor == "" {
		t.Errorf("got %+v after %v, want no change and a cursor after about a second", empty, took)
	}
}

func TestWithoutACursorTheFeedFollowsFromNow(t *testing.T) {
	store, h := feedServer(t)
	p := readPage(t, get(h, "/api/slaves/changes"))
	if len(p.Changes) != 0 {
		t.Errorf("got %+v, want nothing from before the request", p.Changes)
	}
	freeze(t, store)
	next := readPage(t, get(h, "/api/slaves/changes?since="+p.Cursor))
	if len(next.Changes) != 1 || next.Changes[0].PreviousState != "ACTIVE" || next.Changes[0].SlaveID != "S1" {
		t.Errorf("got %+v, want S1's freeze from ACTIVE", next.Changes)
	}
}

func TestAPageOfLargeChangesIsCutToFitAndTheRestFollowsOnce(t *testing.T) {
	store, h := feedServer(t)
	cursor := listCursor(t, h)
	big := strings.Repeat("x", 60<<10)
	for i := range 40 {
		id := fmt.Sprintf("L%d", i)
		now := time.Now().UnixMilli()
		o := machine.Observation{ID: id, Host: "h", Attributes: map[string]string{"big": big}, At: now}
		if err := store.Apply(t.Context(), id, machine.Observe(o, now)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	pages := 0
	for {
		rec := get(h, "/api/slaves/changes?since="+cursor)
		if n := payload.BodySize(rec.Header(), rec.Body.Bytes()); n > payload.Budget {
			t.Fatalf("page %d takes %d bytes as Lambda would carry it, want at most %d", pages, n, payload.Budget)
		}
		p := readPage(t, rec)
		if len(p.Changes) == 0 {
			break
		}
		pages++
		for _, c := range p.Changes {
			seen[c.SlaveID]++
		}
		cursor = p.Cursor
	}
	if len(seen) != 40 || pages < 2 {
		t.Errorf("got %d slaves in %d pages, want 40 in more than one", len(seen), pages)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s: added %d times, want once", id, n)
		}
	}
}
