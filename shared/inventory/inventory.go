// Package inventory applies the scheduler's machine reports (SPEC §7): it
// reads an EventBridge "Machine Report" event or its bare detail, and turns
// each machine into a system transition decided by the machine package.
package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"
)

// DetailType is the EventBridge detail-type of a machine report.
const DetailType = "Machine Report"

// Store is what reports need from storage.
type Store interface {
	List(ctx context.Context) ([]machine.Slave, error)
	Apply(ctx context.Context, id string, decide machine.Decide) error
}

// Handler applies machine reports.
type Handler struct {
	// Metrics receives the function's cold start and the throttled backend
	// calls of each report; nil means no metrics.
	Metrics *metrics.Emitter

	store Store
	log   *slog.Logger
	now   func() time.Time
}

// New returns a report handler.
func New(store Store, log *slog.Logger) *Handler {
	return &Handler{store: store, log: log, now: time.Now}
}

// Result counts what a report did.
type Result struct {
	Machines int `json:"machines"`
	Invalid  int `json:"invalid"`
	Absent   int `json:"absent"`
	Failed   int `json:"failed"`
}

type envelope struct {
	DetailType string          `json:"detail-type"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

type report struct {
	Complete bool              `json:"complete"`
	Machines []json.RawMessage `json:"machines"`
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

// Handle applies one report. A machine entry that cannot be read is logged
// and skipped; a failure to store any machine fails the invocation so that
// EventBridge retries it, which is safe because reports are idempotent.
func (h *Handler) Handle(ctx context.Context, event json.RawMessage) (Result, error) {
	h.Metrics.Invocation()
	ctx, calls := callcount.With(ctx)
	now := h.now().UnixMilli()
	at := now
	var env envelope
	if err := json.Unmarshal(event, &env); err != nil {
		return Result{}, fmt.Errorf("machine report is not a JSON object: %w", err)
	}
	body := event
	if env.Detail != nil || env.DetailType != "" {
		if env.DetailType != DetailType {
			return Result{}, fmt.Errorf("event detail-type %q is not %q", env.DetailType, DetailType)
		}
		body = env.Detail
		if !env.Time.IsZero() {
			at = env.Time.UnixMilli()
		}
	}
	var rep report
	if err := json.Unmarshal(body, &rep); err != nil {
		return Result{}, fmt.Errorf("machine report detail: %w", err)
	}

	res := Result{Machines: len(rep.Machines)}
	seen := map[string]bool{} // every id the report names, even in an entry it cannot read
	index := map[string]int{} // id → its observation in obs
	var obs []machine.Observation
	for i, raw := range rep.Machines {
		o, err := observation(raw, at)
		if err != nil {
			res.Invalid++
			h.log.WarnContext(ctx, "skipped machine in report", "index", i, "error", err.Error())
			if id := entryID(raw); validID(id) == nil {
				// There, only badly described: a complete report must
				// not take it for absent.
				seen[id] = true
			}
			continue
		}
		seen[o.ID] = true
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
	if rep.Complete {
		known, err := h.store.List(ctx)
		if err != nil {
			return res, err
		}
		for _, s := range known {
			if !seen[s.ID] && s.Current.State != machine.Dead {
				obs = append(obs, machine.Observation{ID: s.ID, Absent: true, At: at})
				res.Absent++
			}
		}
	}
	errs := h.apply(ctx, obs, now)
	res.Failed = len(errs)
	attrs := []slog.Attr{slog.Int("machines", res.Machines), slog.Int("invalid", res.Invalid), slog.Int("absent", res.Absent),
		slog.Int("failed", res.Failed), slog.Int64("backend_calls", calls.Calls())}
	if throttled := calls.Throttled(); throttled > 0 {
		attrs = append(attrs, slog.Int64("throttled_calls", throttled))
		h.Metrics.Emit(nil, metrics.Metric{Name: metrics.BackendThrottles, Value: float64(throttled), Unit: metrics.Count})
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "machine report applied", attrs...)
	return res, errors.Join(errs...)
}

// apply stores observations a few at a time.
func (h *Handler) apply(ctx context.Context, obs []machine.Observation, now int64) []error {
	const workers = 8
	work := make(chan machine.Observation)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o := range work {
				if err := h.store.Apply(ctx, o.ID, machine.Observe(o, now)); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("machine %s: %w", o.ID, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, o := range obs {
		work <- o
	}
	close(work)
	wg.Wait()
	return errs
}

func observation(raw json.RawMessage, at int64) (machine.Observation, error) {
	var m machineJSON
	if err := json.Unmarshal(raw, &m); err != nil {
		return machine.Observation{}, err
	}
	id := m.ID
	if id == "" {
		id = m.SlaveID
	}
	if err := validID(id); err != nil {
		return machine.Observation{}, err
	}
	res := bytes.TrimSpace(m.Resources)
	if len(res) == 0 || string(res) == "null" {
		res = nil
	} else if res[0] != '{' {
		return machine.Observation{}, fmt.Errorf("machine %s: resources must be an object", id)
	}
	return machine.Observation{
		ID: id, Host: m.Host, RackID: m.RackID, Attributes: m.Attributes, Resources: res,
		Lost: m.Lost, RunningTasks: m.RunningTasks, At: at,
	}, nil
}

// entryID reads the id of a machine entry that may be malformed otherwise.
func entryID(raw json.RawMessage) string {
	var m struct {
		ID      string `json:"id"`
		SlaveID string `json:"slaveId"`
	}
	_ = json.Unmarshal(raw, &m)
	if m.ID != "" {
		return m.ID
	}
	return m.SlaveID
}

// validID accepts what an agent id can be: non-empty, printable, no '/',
// and not starting with '#', which the store reserves.
func validID(id string) error {
	switch {
	case id == "":
		return errors.New("machine has no id")
	case len(id) > 256, strings.HasPrefix(id, "#"), strings.ContainsAny(id, "/\x00\n\r\t"):
		return fmt.Errorf("machine id %q is not valid", id)
	}
	return nil
}
