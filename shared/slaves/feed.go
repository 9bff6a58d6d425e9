package slaves

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/payload"
	"github.com/fleetops/fleet/shared/web"
)

// CursorHeader carries, on a list of the slaves, the change feed's cursor
// of the state the list answered: following the feed from it misses no
// change after the list and repeats none in it (docs/behaviour.md "The
// change feed").
const CursorHeader = "X-Changes-Cursor"

// MaxWait bounds the wait query parameter of the change feed.
const MaxWait = 20 * time.Second

// Feed is what the handlers need from the change feed (change.Protocol).
type Feed interface {
	Changes(ctx context.Context, since string, wait time.Duration, sel machine.Selector) (change.Page, error)
	Listed(ctx context.Context, list func(context.Context) error) (map[string]*machine.Slave, string, error)
}

// StreamHold is how long a stream of changes (stream=true) is held open,
// at most: the function's deadline, less RouteDeadline's margin, may end it
// sooner. Its last line is a bookmark to resume from.
const StreamHold = 5 * time.Minute

// Heartbeat bounds how long a stream goes without a line: a bookmark when
// no change came.
const Heartbeat = 10 * time.Second

// changesJSON is the answer of GET /api/slaves/changes.
type changesJSON struct {
	Changes []changeJSON `json:"changes"`
	Cursor  string       `json:"cursor"`
}

// changeJSON is one change of the feed. Sequence only grows from one
// change of a slave to the next: a consumer that sees one not above the
// last it saw of that slave has seen it already.
type changeJSON struct {
	SlaveID       string        `json:"slaveId"`
	Type          string        `json:"type"`
	Timestamp     int64         `json:"timestamp"`
	Sequence      int64         `json:"sequence"`
	Update        *updateJSON   `json:"update,omitempty"`
	PreviousState string        `json:"previousState,omitempty"`
	Slave         *slaveJSON    `json:"slave,omitempty"`
	Expiring      *expiringJSON `json:"expiring,omitempty"`
}

// bookmarkJSON is a line of a stream with no change, or the end of the
// initial state: the cursor to follow from.
type bookmarkJSON struct {
	Type            string `json:"type"` // always "bookmark"
	Cursor          string `json:"cursor"`
	InitialStateEnd bool   `json:"initialStateEnd,omitempty"` // the initial state's last line
	StreamEnd       bool   `json:"streamEnd,omitempty"`       // the stream's last line
}

// streamErrorJSON is a stream's line for a failure after its first line;
// the bookmark after it says where to resume.
type streamErrorJSON struct {
	Type    string `json:"type"` // always "error"
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ChangeJSON is the body of one change as the feed answers it, and as its
// "Slave Changed" event carries it (shared/publish).
func ChangeJSON(c change.Change) ([]byte, error) {
	return json.Marshal(toChangeJSON(c))
}

func toChangeJSON(c change.Change) changeJSON {
	out := changeJSON{SlaveID: c.SlaveID, Type: string(c.Kind), Timestamp: c.At, Sequence: c.Seq, PreviousState: string(c.Previous)}
	if c.Entry != nil {
		out.Update = new(toUpdateJSON(*c.Entry))
	}
	if c.Slave != nil {
		out.Slave = new(toSlaveJSON(*c.Slave))
	}
	if c.Expiring != nil {
		out.Expiring = new(toExpiringJSON(*c.Expiring))
	}
	return out
}

// added is a slave of the initial state, as an "added" change: the slave
// alone, its current state said once (an initial state of 100,000 slaves
// is then about the list's size, not half as large again).
func added(s machine.Slave) ([]byte, error) {
	return json.Marshal(changeJSON{SlaveID: s.ID, Type: string(change.Added), Timestamp: s.FirstSeenAt, Sequence: s.Sequence,
		Slave: new(toSlaveJSON(s))})
}

// feedQuery is what a request of the feed asks.
type feedQuery struct {
	since           string
	wait            time.Duration
	sel             machine.Selector
	initial, stream bool
}

func feedQueryOf(r *http.Request) (feedQuery, error) {
	q := r.URL.Query()
	var f feedQuery
	var err error
	f.since = q.Get("since")
	if f.wait, err = waitParam(q.Get("wait")); err != nil {
		return f, err
	}
	if f.sel, err = selectorOf(q); err != nil {
		return f, err
	}
	if f.initial, err = flag(q, "initial"); err != nil {
		return f, err
	}
	if f.stream, err = flag(q, "stream"); err != nil {
		return f, err
	}
	if f.initial && f.since != "" {
		return f, fault.Invalid("query param initial=true starts a follow with the current state: it takes no since")
	}
	return f, nil
}

// flag reads a true/false query parameter of the slave routes (dryRun,
// initial, stream, overrideLimit), false when absent.
func flag(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fault.Invalid("%s must be true or false, got %q", name, v)
	}
}

// changes serves the change feed: the changes the selectors pick after the
// since cursor (from now without one), holding the request up to wait
// seconds for one; with initial=true the current state first; with
// stream=true as newline-delimited JSON held open (stream).
func (h *Handler) changes(w http.ResponseWriter, r *http.Request) {
	f, err := feedQueryOf(r)
	if err != nil {
		web.Error(w, r, err)
		return
	}
	switch {
	case f.stream:
		h.stream(w, r, f)
	case f.initial:
		h.initial(w, r, f.sel)
	default:
		out, err := h.page(r.Context(), f)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		web.JSON(w, http.StatusOK, out)
	}
}

// page is one answer of the long poll.
func (h *Handler) page(ctx context.Context, f feedQuery) (changesJSON, error) {
	page, err := h.store.Changes(ctx, f.since, f.wait, f.sel)
	if err != nil {
		return changesJSON{}, err
	}
	out := changesJSON{Changes: []changeJSON{}, Cursor: page.Cursor}
	size := 0
	for i, c := range page.Changes {
		change := toChangeJSON(c)
		b, err := json.Marshal(change)
		if err != nil {
			return changesJSON{}, fmt.Errorf("encode change of %s: %w", c.SlaveID, err)
		}
		// No byte takes more than 6 as Lambda carries it: an answer of
		// changes within payload.Budget/6 always fits, and one change always does.
		if size += len(b); i > 0 && size > payload.Budget/6 {
			out.Cursor = page.After(i)
			break
		}
		out.Changes = append(out.Changes, change)
	}
	return out, nil
}

// initial answers the current state of the slaves sel picks as "added"
// changes, sorted by id, then the bookmark that ends the initial state,
// whose cursor the answer carries too: following from it misses no change
// after that state and repeats none in it, as a list and its cursor.
func (h *Handler) initial(w http.ResponseWriter, r *http.Request, sel machine.Selector) {
	list, cursor, err := h.listed(r.Context(), sel, added)
	if err != nil {
		web.Error(w, r, err)
		return
	}
	end, err := json.Marshal(bookmarkJSON{Type: "bookmark", Cursor: cursor, InitialStateEnd: true})
	if err != nil {
		web.Error(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, struct {
		Changes []json.RawMessage `json:"changes"`
		Cursor  string            `json:"cursor"`
	}{append(list.sorted(), end), cursor})
}

// stream answers the changes as newline-delimited JSON, one change or
// bookmark a line, flushed as it is written, for StreamHold or until the
// route's deadline: with initial=true the current state and its bookmark
// first; then every change the selector picks, and a bookmark after
// Heartbeat without one; last a bookmark with the cursor to resume from. A
// failure before the first line is a JSON error; after it, an error line
// and the last bookmark.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, f feedQuery) {
	ctx := r.Context()
	end := h.Now().Add(StreamHold)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(end) {
		end = d.Add(-time.Second)
	}
	cursor := f.since
	var lines []json.RawMessage
	if f.initial {
		list, at, err := h.listed(ctx, f.sel, added)
		if err != nil {
			web.Error(w, r, err)
			return
		}
		lines, cursor = list.sorted(), at
		lines = append(lines, line(bookmarkJSON{Type: "bookmark", Cursor: at, InitialStateEnd: true}))
	}
	started := false
	send := func(ls []json.RawMessage) error {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-store")
			started = true
		}
		for _, l := range ls {
			if _, err := w.Write(l); err != nil {
				return err
			}
			if _, err := w.Write(newline); err != nil {
				return err
			}
		}
		return http.NewResponseController(w).Flush()
	}
	if len(lines) > 0 {
		if err := send(lines); err != nil {
			return // the client is gone
		}
	}
	for h.Now().Add(time.Second).Before(end) {
		page, err := h.store.Changes(ctx, cursor, min(Heartbeat, end.Sub(h.Now())), f.sel)
		if err != nil {
			if !started {
				web.Error(w, r, err)
				return
			}
			if ctx.Err() != nil {
				return // the client is gone, or the deadline came
			}
			body := web.Failure(r, err)
			send([]json.RawMessage{line(streamErrorJSON{Type: "error", Code: body.Code, Message: body.Message})})
			break
		}
		lines = lines[:0]
		for _, c := range page.Changes {
			lines = append(lines, line(toChangeJSON(c)))
		}
		cursor = page.Cursor
		if len(lines) == 0 {
			lines = append(lines, line(bookmarkJSON{Type: "bookmark", Cursor: cursor}))
		}
		if err := send(lines); err != nil {
			return
		}
	}
	if cursor != "" {
		send([]json.RawMessage{line(bookmarkJSON{Type: "bookmark", Cursor: cursor, StreamEnd: true})})
	}
}

var newline = []byte{'\n'}

// line is v's JSON, for a stream; the types a stream writes always encode.
func line(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Errorf("encode a line of the stream: %w", err))
	}
	return b
}

// waitParam reads the wait query parameter: whole seconds, 0 to MaxWait.
func waitParam(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || time.Duration(n)*time.Second > MaxWait {
		return 0, fault.Invalid("query param wait must be a whole number of seconds from 0 to %d", int(MaxWait/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

// RouteDeadline bounds every request but a stream, in Lambda: the
// function's timeout is a stream's (StreamHold and a margin), so the
// deadline the other routes' reads and waits answer before is set here
// (docs/decisions.md "Streams held for minutes").
const RouteDeadline = 20 * time.Second

// Deadlines gives every request to h but a stream of changes a deadline of
// RouteDeadline from its start.
func Deadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/slaves/changes" || r.URL.Query().Get("stream") != "true" {
			ctx, cancel := context.WithTimeout(r.Context(), RouteDeadline)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}
