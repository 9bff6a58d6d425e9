// Package slaves serves the /api/slaves endpoint group (docs/behaviour.md): the route
// table, each route registered with the permission it needs (web.Routes asks access.Policy
// before the route runs), the checks of a change request in the order of docs/behaviour.md
// "User changes", and the mapping between wire JSON and the machine domain.
package slaves

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"
)

// Store is what the handlers need from storage.
type Store interface {
	Get(ctx context.Context, id string) (*machine.Slave, error)
	// List and ListByState call each with the slaves, one at a time, and
	// stop at the first error, each's included, which they return.
	List(ctx context.Context, each func(machine.Slave) error) error
	ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error
	History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error)
	ListExpiring(ctx context.Context, now time.Time) ([]machine.Expiring, error)
	Apply(ctx context.Context, id string, decide machine.Decide) error
	ApplyOnce(ctx context.Context, id string, once machine.Idempotency, decide machine.Decide) error
	// Import applies an import's decision (machine.ImportSlave) on the
	// slave read with its stored history.
	Import(ctx context.Context, id string, decide machine.Decide) error
	// DryRun answers what a change would answer, and writes nothing.
	DryRun(ctx context.Context, id string, decide machine.Decide) error
	Delete(ctx context.Context, id string, match func(machine.Slave) bool) (bool, error)
	DeleteDead(ctx context.Context, before int64) (int, error)
	Feed
}

// Handler serves /api/slaves.
type Handler struct {
	// Now is the clock: time.Now unless a test sets another.
	Now func() time.Time

	store  Store
	limits machine.Limits
	routes *web.Routes
}

// New returns the handler of the slave routes.
func New(store Store, policy access.Policy, limits machine.Limits) *Handler {
	h := &Handler{store: store, limits: limits, Now: time.Now, routes: web.NewRoutes(policy)}
	t := h.routes
	t.HandleNamed("GET /api/slaves", access.Read, web.Plain(h.list))
	t.HandleNamed("GET /api/slaves/{$}", access.Read, web.Plain(h.list))
	t.HandleNamed("GET /api/slaves/expiring", access.Read, read[[]expiringJSON](h.listExpiring))
	t.HandleNamed("GET /api/slaves/changes", access.Read, plain(h.changes))
	t.HandleNamed("DELETE /api/slaves/dead", access.Change, counted{"delete-dead", h.deleteDead})
	t.Handle("POST /api/slaves/import", access.Change, importRoute(h.importSlaves))
	t.HandleNamed("GET /api/slaves/slave/{slaveId}/details", access.Read, plain(h.details))
	t.HandleNamed("GET /api/slaves/slave/{slaveId}", access.Read, read[[]updateJSON](h.history))
	t.Handle("POST /api/slaves/slave/{slaveId}/freeze", access.Change, counted{"freeze", h.change(machine.Frozen)})
	t.Handle("POST /api/slaves/slave/{slaveId}/decommission", access.Change, counted{"decommission", h.change(machine.StartingDecommission)})
	t.Handle("POST /api/slaves/slave/{slaveId}/activate", access.Change, counted{"activate", h.change(machine.Active)})
	t.HandleNamed("DELETE /api/slaves/slave/{slaveId}", access.Change, counted{"delete", h.delete})
	t.HandleNamed("DELETE /api/slaves/slave/{slaveId}/expiring", access.Change, counted{"delete-expiring", h.deleteExpiring})
	return h
}

// ServeHTTP routes the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.routes.ServeHTTP(w, r) }

// Routes returns the route table, which declares each route's permission.
func (h *Handler) Routes() *web.Routes { return h.routes }

// read serves a read route: 200 with the JSON of what it returns, or the
// error.
type read[T any] func(r *http.Request) (T, error)

func (f read[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, err := f(r)
	if err != nil {
		web.Error(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, v)
}

// Fail answers a request the route table stopped, noting its slave.
func (read[T]) Fail(w http.ResponseWriter, r *http.Request, err error) {
	slaveID(r)
	web.Error(w, r, err)
}

// plain serves a read route that writes its own answer, with its headers.
type plain func(w http.ResponseWriter, r *http.Request)

func (f plain) ServeHTTP(w http.ResponseWriter, r *http.Request) { f(w, r) }

// Fail answers a request the route table stopped, noting its slave.
func (plain) Fail(w http.ResponseWriter, r *http.Request, err error) {
	slaveID(r)
	web.Error(w, r, err)
}

// counted serves a change route: 200 with an empty body, or the error,
// counted once in the StateChanges metric by action and result, refusals
// by the route table included.
type counted struct {
	action string
	f      func(r *http.Request) error
}

func (c counted) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.answer(w, r, c.f(r)) }

// Fail answers and counts a request the route table stopped, noting its
// slave.
func (c counted) Fail(w http.ResponseWriter, r *http.Request, err error) {
	slaveID(r)
	c.answer(w, r, err)
}

func (c counted) answer(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusOK
	if err != nil {
		status = web.Status(err)
		web.Error(w, r, err)
	} else {
		web.OK(w)
	}
	if dry, _ := dryRun(r); dry {
		return // a question, not a change
	}
	web.Metrics(r).Emit([]metrics.Dimension{{Name: "Action", Value: c.action}, {Name: "Result", Value: web.Outcome(status)}},
		metrics.Metric{Name: metrics.StateChanges, Value: 1, Unit: metrics.Count})
}

// clock reads the time as a change decision takes it, in epoch ms.
func (h *Handler) clock() int64 { return h.Now().UnixMilli() }

// slaveID returns the slave the route names, if any, and notes it on the
// log line.
func slaveID(r *http.Request) string {
	id := r.PathValue("slaveId")
	web.Note(r, "slave_id", id)
	return id
}

// list answers the slaves the selectors pick (all without one), with the
// feed's cursor of the state answered in CursorHeader.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	sel, err := selectorOf(r.URL.Query())
	if err != nil {
		web.Error(w, r, err)
		return
	}
	list, cursor, err := h.listed(r.Context(), sel, func(s machine.Slave) ([]byte, error) { return json.Marshal(toSlaveJSON(s)) })
	if err != nil {
		web.Error(w, r, err)
		return
	}
	w.Header().Set(CursorHeader, cursor)
	web.JSON(w, http.StatusOK, list.sorted())
}

// listed reads the slaves sel picks, each encoded by encode, and the
// feed's cursor of the state read. A selector that names a few slaves
// reads each of them; one with states reads only those (the ByState
// index), one state after another; any other, the fleet.
func (h *Handler) listed(ctx context.Context, sel machine.Selector, encode func(machine.Slave) ([]byte, error)) (*encodedList, string, error) {
	list := &encodedList{sel: sel, encode: encode}
	scan := func(ctx context.Context) error { return h.store.List(ctx, list.add) }
	switch ids := slices.Compact(slices.Sorted(slices.Values(sel.IDs))); {
	case len(ids) > 0 && len(ids) <= maxPointReads:
		// A few slaves named: read each, not the fleet (a machine page,
		// fleetctl wait).
		scan = func(ctx context.Context) error {
			for _, id := range ids {
				s, err := h.store.Get(ctx, id)
				if err == nil && s != nil {
					err = list.add(*s)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
	case len(sel.States) > 0:
		scan = func(ctx context.Context) error {
			for _, st := range slices.Compact(slices.Sorted(slices.Values(sel.States))) {
				if err := h.store.ListByState(ctx, st, list.add); err != nil {
					return err
				}
			}
			return nil
		}
	}
	fix, cursor, err := h.store.Listed(ctx, scan)
	if err == nil {
		err = list.correct(fix)
	}
	return list, cursor, err
}

// maxPointReads is the most slaves a selector may name for a list, or an
// initial state, to read them one by one instead of the fleet: as many as
// fleetctl names in a follow, and far fewer reads than a page of the
// fleet.
const maxPointReads = 50

// details answers one slave, with its sequence as the ETag a conditional
// change sends back in If-Match.
func (h *Handler) details(w http.ResponseWriter, r *http.Request) {
	id := slaveID(r)
	slave, err := h.store.Get(r.Context(), id)
	if err == nil && slave == nil {
		err = machine.NotFound(id)
	}
	if err != nil {
		web.Error(w, r, err)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(slave.Sequence, 10)))
	web.JSON(w, http.StatusOK, toSlaveJSON(*slave))
}

// history answers the newest entries of a slave's history, as many as the
// limit query parameter says (see historyLimit).
func (h *Handler) history(r *http.Request) ([]updateJSON, error) {
	id := slaveID(r)
	limit, err := historyLimit(r)
	if err != nil {
		return nil, err
	}
	updates, err := h.store.History(r.Context(), id, h.Now(), limit)
	if err != nil {
		return nil, err
	}
	out := make([]updateJSON, len(updates))
	for i, u := range updates {
		out[i] = toUpdateJSON(u)
	}
	return out, nil
}

func (h *Handler) listExpiring(r *http.Request) ([]expiringJSON, error) {
	records, err := h.store.ListExpiring(r.Context(), h.Now())
	if err != nil {
		return nil, err
	}
	out := make([]expiringJSON, len(records))
	for i, e := range records {
		out[i] = toExpiringJSON(e)
	}
	return out, nil
}

// change serves freeze, decommission and activate, whose optional body is a
// change request rather than a user record. A retry of the same request
// (same Idempotency-Key header) within machine.IdempotencyWindow gets the
// first request's answer.
func (h *Handler) change(target machine.State) func(r *http.Request) error {
	return func(r *http.Request) error {
		id := slaveID(r)
		actor := web.CallerOf(r)
		var body changeRequestJSON
		if _, err := web.DecodeBody(r, &body); err != nil {
			return err
		}
		req, err := body.changeRequest()
		if err != nil {
			return err
		}
		dry, err := dryRun(r)
		if err != nil {
			return err
		}
		seen, err := ifMatch(r)
		if err != nil {
			return err
		}
		once, err := idempotency(r, id, target, actor, req, seen, h.Now())
		if err != nil {
			return err
		}
		c := machine.Change{SlaveID: id, Target: target, Request: req, User: actor.Email, Now: h.clock}
		decide := conditional(id, seen, machine.UserChange(c, h.limits))
		if dry {
			return h.store.DryRun(r.Context(), id, decide)
		}
		return h.store.ApplyOnce(r.Context(), id, once, decide)
	}
}

// dryRun reads the change routes' dryRun query flag: "true" asks what the
// change would answer, and changes nothing.
func dryRun(r *http.Request) (bool, error) { return flag(r.URL.Query(), "dryRun") }

// ifMatch reads the If-Match header of a change: the slave's sequence the
// caller saw (its details' ETag, its list entry's or its last change's
// sequence), quoted or not; nil without the header or with "*", which any
// existing slave matches.
func ifMatch(r *http.Request) (*int64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return nil, nil
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(v, `"`), `"`), 10, 64)
	if err != nil || n < 0 {
		return nil, fault.Invalid("If-Match must be a slave's sequence, as its details (ETag), the list and the change feed show it, got %q", v)
	}
	return &n, nil
}

// conditional is decide made only while the slave is at sequence seen, when
// the request named one.
func conditional(id string, seen *int64, decide machine.Decide) machine.Decide {
	if seen == nil {
		return decide
	}
	return machine.Conditional(id, *seen, decide)
}

// maxIdempotencyKey bounds the Idempotency-Key header, as common APIs do.
const maxIdempotencyKey = 255

// idempotency names the request for retries by its Idempotency-Key header,
// in the caller's scope, never by its actionId, which is the caller's
// metadata. The fingerprint covers everything else that decides the
// outcome, so a key reused for another slave, action or body is told apart
// from a retry.
func idempotency(r *http.Request, id string, target machine.State, actor access.Identity, req machine.ChangeRequest, seen *int64, now time.Time) (machine.Idempotency, error) {
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if len(key) > maxIdempotencyKey {
		return machine.Idempotency{}, fault.Invalid("Idempotency-Key must be at most %d characters", maxIdempotencyKey)
	}
	canonical, err := json.Marshal(struct {
		Slave, Action string
		Request       machine.ChangeRequest
		IfMatch       *int64 `json:",omitempty"`
	}{id, string(target), req, seen})
	if err != nil {
		return machine.Idempotency{}, fmt.Errorf("fingerprint request: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return machine.Idempotency{Key: key, Caller: actor.ID, Fingerprint: hex.EncodeToString(sum[:]), At: now.UnixMilli()}, nil
}

// delete removes the slave with its history and expiring record; with
// If-Match, only while it is at the sequence the caller saw.
func (h *Handler) delete(r *http.Request) error {
	id := slaveID(r)
	seen, err := ifMatch(r)
	if err != nil {
		return err
	}
	var match func(machine.Slave) bool
	var moved error
	if seen != nil {
		match = func(s machine.Slave) bool {
			moved = nil // read again after a lost race
			if s.Sequence != *seen {
				moved = machine.Moved(id, *seen, s)
			}
			return moved == nil
		}
	}
	found, err := h.store.Delete(r.Context(), id, match)
	switch {
	case err != nil:
		return err
	case moved != nil:
		return moved
	case !found:
		return machine.NotFoundForDelete(id)
	}
	return nil
}

// deleteExpiring deletes the slave's expiring record, if any; with
// If-Match, only while the slave is at the sequence the caller saw.
func (h *Handler) deleteExpiring(r *http.Request) error {
	id := slaveID(r)
	seen, err := ifMatch(r)
	if err != nil {
		return err
	}
	return h.store.Apply(r.Context(), id, conditional(id, seen, machine.DeleteExpiring))
}

// deleteDead removes every DEAD slave, a few at a time; a slave that came
// back to life meanwhile is kept.
func (h *Handler) deleteDead(r *http.Request) error {
	removed, err := h.store.DeleteDead(r.Context(), math.MaxInt64)
	web.Note(r, "removed", removed)
	return err
}
