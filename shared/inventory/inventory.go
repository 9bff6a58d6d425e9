// Package inventory applies the scheduler's machine reports (docs/behaviour.md
// "Machine reports"): it reads an EventBridge "Machine Report" event or its bare
// detail, and turns each machine into a system transition decided by the machine
// package.
package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/exactjson"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"

	"golang.org/x/sync/errgroup"
)

// DetailType is the EventBridge detail-type of a machine report.
const DetailType = "Machine Report"

// Store is what reports need from storage.
type Store interface {
	// List calls each with every slave, one at a time, and stops at the
	// first error, each's included, which it returns.
	List(ctx context.Context, each func(machine.Slave) error) error
	Apply(ctx context.Context, id string, decide machine.Decide) error
}

// Handler applies machine reports.
type Handler struct {
	// Now is the clock that reports are received by: time.Now unless a test
	// sets another.
	Now func() time.Time

	store   Store
	brake   machine.LossBrake
	log     *slog.Logger
	metrics *metrics.Emitter
}

// New returns a report handler that holds mass losses back with brake. m
// receives the function's cold start, the losses the brake holds back and
// the throttled backend calls of each report; nil means no metrics.
func New(store Store, brake machine.LossBrake, log *slog.Logger, m *metrics.Emitter) *Handler {
	return &Handler{store: store, brake: brake, log: log, metrics: m, Now: time.Now}
}

// Result counts what a report did.
type Result struct {
	Machines int `json:"machines"`
	Invalid  int `json:"invalid"`
	Absent   int `json:"absent"`
	Held     int `json:"held,omitempty"` // losses the mass-loss brake refused
	Failed   int `json:"failed"`
}

type envelope struct {
	DetailType string          `json:"detail-type"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

type report struct {
	Complete    bool               `json:"complete"`
	ConfirmLoss bool               `json:"confirmLoss"`
	Machines    *[]json.RawMessage `json:"machines"`
}

type machineJSON struct {
	ID           string            `json:"id"`
	SlaveID      string            `json:"slaveId"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    json.RawMessage   `json:"resources"`
	Lost         bool              `json:"lost"`
	RunningTasks *int              `json:"runningTasks"`
}

// Handle applies one report. A report that is not one (no machines list, an
// entry without an id) fails whole and changes nothing: EventBridge retries
// it and then sends it to the dead-letter queue, where an operator sees it.
// A machine entry with an id that is otherwise unreadable is logged and
// skipped. A failure to store any machine fails the invocation so that
// EventBridge retries it, which is safe because reports are idempotent.
func (h *Handler) Handle(ctx context.Context, event json.RawMessage) (Result, error) {
	h.metrics.Invocation()
	ctx, calls := callcount.With(ctx)
	now := h.Now().UnixMilli()
	rep, at, err := parse(event, now)
	if err != nil {
		h.log.ErrorContext(ctx, "machine report refused", "error", err.Error())
		return Result{}, err
	}

	res := Result{Machines: len(rep.entries)}
	seen := map[string]bool{} // every id the report names, even in an entry it cannot read
	index := map[string]int{} // id → its observation in obs
	var obs []machine.Observation
	for i, e := range rep.entries {
		o := e.observation
		seen[o.ID] = true
		if e.err != nil {
			// There, only badly described: a complete report must not
			// take it for absent.
			res.Invalid++
			h.log.WarnContext(ctx, "skipped machine in report", "index", i, "error", e.err.Error())
			continue
		}
		if j, ok := index[o.ID]; ok {
			// Applying both would flip the machine on every delivery of
			// the same report; the later entry wins, as in a JSON object.
			res.Invalid++
			h.log.WarnContext(ctx, "machine named twice in report, the later entry wins", "index", i, "id", o.ID)
			obs[j] = o
			continue
		}
		index[o.ID] = len(obs)
		obs = append(obs, o)
	}
	if rep.Complete || slices.ContainsFunc(obs, func(o machine.Observation) bool { return o.Lost }) {
		known, err := h.known(ctx)
		if err != nil {
			return res, err
		}
		if rep.Complete {
			for _, s := range known {
				if !seen[s.ID] && s.Current.State != machine.Dead {
					obs = append(obs, machine.Observation{ID: s.ID, Absent: true, At: at})
					res.Absent++
				}
			}
		}
		if !rep.ConfirmLoss {
			res.Held = h.holdMassLoss(ctx, known, obs, at)
		}
	}
	errs := h.apply(ctx, obs, now)
	res.Failed = len(errs)
	attrs := []slog.Attr{slog.Int("machines", res.Machines), slog.Int("invalid", res.Invalid), slog.Int("absent", res.Absent),
		slog.Int("held", res.Held), slog.Int("failed", res.Failed), slog.Int64("backend_calls", calls.Calls())}
	if throttled := calls.Throttled(); throttled > 0 {
		attrs = append(attrs, slog.Int64("throttled_calls", throttled))
		h.metrics.Emit(nil, metrics.Metric{Name: metrics.BackendThrottles, Value: float64(throttled), Unit: metrics.Count})
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "machine report applied", attrs...)
	return res, errors.Join(errs...)
}

// parsed is a report read: each machine entry once, as an observation at
// the report's time or, when only its id could be read, that id and why the
// rest could not.
type parsed struct {
	report
	entries []entry
}

type entry struct {
	observation machine.Observation
	err         error
}

// parse reads a report, as an EventBridge event or its bare detail, and the
// time it was made: the event's time, never later than now (a sender's
// skewed clock must not stamp history in the future, nor make every later
// report look stale), or now when the event has none. A report with an
// entry whose id cannot be read is refused whole.
func parse(event json.RawMessage, now int64) (parsed, int64, error) {
	var env envelope
	if err := exactjson.Unmarshal(event, &env); err != nil {
		return parsed{}, 0, fmt.Errorf("machine report is not a JSON object: %w", err)
	}
	body, at := event, now
	if env.Detail != nil || env.DetailType != "" {
		if env.DetailType != DetailType {
			return parsed{}, 0, fmt.Errorf("event detail-type %q is not %q", env.DetailType, DetailType)
		}
		body = env.Detail
		if !env.Time.IsZero() {
			at = min(env.Time.UnixMilli(), now)
		}
	}
	var rep report
	if err := exactjson.Unmarshal(body, &rep); err != nil {
		return parsed{}, 0, fmt.Errorf("machine report detail: %w", err)
	}
	if rep.Machines == nil {
		return parsed{}, 0, errors.New(`machine report has no "machines" list`)
	}
	p := parsed{report: rep, entries: make([]entry, len(*rep.Machines))}
	for i, raw := range *rep.Machines {
		o, err := observation(raw, at)
		if err != nil {
			o = machine.Observation{ID: entryID(raw)}
			if err := machine.ValidateID(o.ID); err != nil {
				return parsed{}, 0, fmt.Errorf("machine report entry %d: %w", i, err)
			}
		}
		p.entries[i] = entry{observation: o, err: err}
	}
	return p, at, nil
}

// known returns every slave, sorted by id.
func (h *Handler) known(ctx context.Context) ([]machine.Slave, error) {
	var all []machine.Slave
	err := h.store.List(ctx, func(s machine.Slave) error {
		all = append(all, s)
		return nil
	})
	slices.SortFunc(all, func(a, b machine.Slave) int { return strings.Compare(a.ID, b.ID) })
	return all, err
}

// holdMassLoss has the brake hold the losses among obs when it refuses
// them, logs that once and counts it in the LossesHeld metric. It returns
// how many it held.
func (h *Handler) holdMassLoss(ctx context.Context, known []machine.Slave, obs []machine.Observation, at int64) int {
	held := h.brake.Hold(known, obs, at)
	if len(held) == 0 {
		return 0
	}
	live := 0
	for _, s := range known {
		if s.Current.State != machine.Dead {
			live++
		}
	}
	h.log.WarnContext(ctx, "mass loss held: no machine of this report is marked DEAD; send the report again with confirmLoss if the loss is real",
		"held", len(held), "live", live, "max_lost_fraction", h.brake.MaxFraction, "lost_window", h.brake.Window.String(),
		"first_ids", held[:min(len(held), 10)])
	h.metrics.Emit(nil, metrics.Metric{Name: metrics.LossesHeld, Value: float64(len(held)), Unit: metrics.Count})
	return len(held)
}

// apply stores observations a few at a time.
func (h *Handler) apply(ctx context.Context, obs []machine.Observation, now int64) []error {
	var mu sync.Mutex
	var errs []error
	var g errgroup.Group
	g.SetLimit(8)
	for _, o := range obs {
		g.Go(func() error {
			if err := h.store.Apply(ctx, o.ID, machine.Observe(o, now)); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("machine %s: %w", o.ID, err))
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return errs
}

func observation(raw json.RawMessage, at int64) (machine.Observation, error) {
	var m machineJSON
	if err := exactjson.Unmarshal(raw, &m); err != nil {
		return machine.Observation{}, err
	}
	id := m.ID
	if id == "" {
		id = m.SlaveID
	}
	if err := machine.ValidateID(id); err != nil {
		return machine.Observation{}, err
	}
	res := bytes.TrimSpace(m.Resources)
	if len(res) == 0 || string(res) == "null" {
		res = nil
	} else if res[0] != '{' {
		return machine.Observation{}, fmt.Errorf("machine %s: resources must be an object", id)
	}
	o := machine.Observation{
		ID: id, Host: m.Host, RackID: m.RackID, Attributes: m.Attributes, Resources: res,
		Lost: m.Lost, RunningTasks: m.RunningTasks, At: at,
	}
	return o, o.CheckSize()
}

// entryID reads the id of a machine entry that may be malformed otherwise;
// "" when the entry has none (or is not an object).
func entryID(raw json.RawMessage) string {
	var m struct {
		ID      json.RawMessage `json:"id"`
		SlaveID json.RawMessage `json:"slaveId"`
	}
	if exactjson.Unmarshal(raw, &m) != nil {
		return ""
	}
	var id, slaveID string
	_ = json.Unmarshal(m.ID, &id)
	_ = json.Unmarshal(m.SlaveID, &slaveID)
	if id != "" {
		return id
	}
	return slaveID
}
