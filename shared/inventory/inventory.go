// Package inventory applies the scheduler's machine reports (docs/behaviour.md
// "Machine reports"): it reads an EventBridge "Machine Report" event or its
// bare detail, or a report object of the reports bucket as a stream when S3
// announces it, and turns each machine into a system transition decided by
// the machine package.
package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"

	"golang.org/x/sync/errgroup"
)

// Store is what reports need from storage.
type Store interface {
	// List calls each with every slave, one at a time, and stops at the
	// first error, each's included, which it returns.
	List(ctx context.Context, each func(machine.Slave) error) error
	Apply(ctx context.Context, id string, decide machine.Decide) error
	// ApplyAbsent applies each id's decision, as Apply does, to ids the
	// caller believes are not stored, creating them together; it returns
	// each id's error (change.Protocol.ApplyAbsent).
	ApplyAbsent(ctx context.Context, ids []string, decide func(id string) machine.Decide) []error
}

// Objects reads report objects of the reports bucket.
type Objects interface {
	// Open returns the body of the object bucket/key, to be closed.
	Open(ctx context.Context, bucket, key string) (io.ReadCloser, error)
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
	bucket  string  // REPORTS_BUCKET
	objects Objects // nil: no reports bucket
	bound   Bound   // what a report object may expand to

	marks    Marks // nil: reports are not recorded, nor split
	parts    Parts
	partSize int
}

// New returns a report handler that holds mass losses back with brake. m
// receives the function's cold start, the losses the brake holds back and
// the throttled backend calls of each report; nil means no metrics.
func New(store Store, brake machine.LossBrake, log *slog.Logger, m *metrics.Emitter) *Handler {
	return &Handler{store: store, brake: brake, log: log, metrics: m, Now: time.Now, bound: BoundFor(DefaultMemoryMB)}
}

// Bounded has h refuse report objects over bound (BoundFor the function's
// memory; BoundFor(DefaultMemoryMB) unless set), and returns h.
func (h *Handler) Bounded(bound Bound) *Handler {
	h.bound = bound
	return h
}

// ReadsFrom has h read the reports that S3 announces in bucket (REPORTS_BUCKET)
// through objects, and returns h.
func (h *Handler) ReadsFrom(bucket string, objects Objects) *Handler {
	h.bucket, h.objects = bucket, objects
	return h
}

// Result counts what a report, or a step of one applied in parts, did.
type Result struct {
	Machines int `json:"machines"`
	Invalid  int `json:"invalid"`
	Absent   int `json:"absent"`
	Held     int `json:"held,omitempty"` // losses the mass-loss brake refused
	Changed  int `json:"changed"`        // machines the report changes, each applied on its own
	Failed   int `json:"failed"`
	// Superseded is set when a newer report had started by the time this
	// one's absences were to be applied, so they were not.
	Superseded bool `json:"superseded,omitempty"`
	*Split          // a report the plan step split into parts
}

// Handle applies one input of InventoryFunction, whichever of its shapes
// Decode reads it as, through that shape's entry point; an input of no
// shape, or of two, is refused. A report that is not one (no machines list,
// an entry without an id) fails whole and changes nothing: EventBridge
// retries it and then sends it to the dead-letter queue, where an operator
// sees it. A machine entry with an id that is otherwise unreadable is
// logged and skipped. A failure to store any machine fails the invocation
// so that it is retried, which is safe because reports are idempotent.
func (h *Handler) Handle(ctx context.Context, event json.RawMessage) (Result, error) {
	in, err := Decode(event)
	if err != nil {
		return h.run(ctx, "", func(context.Context, int64) (Result, []error, error) { return Result{}, nil, err })
	}
	switch in := in.(type) {
	case ReportEvent:
		return h.ApplyEvent(ctx, in)
	case Report:
		return h.ApplyReport(ctx, in)
	case ObjectEvent:
		return h.ApplyObject(ctx, in)
	case PlanStep:
		return h.Plan(ctx, in)
	case PartStep:
		return h.ApplyPart(ctx, in)
	case FinishStep:
		return h.Finish(ctx, in)
	}
	return Result{}, fmt.Errorf("input %T has no entry point", in)
}

// ApplyEvent applies the report inline in a "Machine Report" event, made
// at the event's time (never later than its receipt).
func (h *Handler) ApplyEvent(ctx context.Context, e ReportEvent) (Result, error) {
	return h.run(ctx, "", func(ctx context.Context, now int64) (Result, []error, error) { return h.report(ctx, e, now, false) })
}

// ApplyReport applies a report sent by a direct invocation, made when it
// is received.
func (h *Handler) ApplyReport(ctx context.Context, r Report) (Result, error) {
	return h.run(ctx, "", func(ctx context.Context, now int64) (Result, []error, error) { return h.report(ctx, r, now, false) })
}

// ApplyObject applies the report object S3 announces, whole. The template
// sends these events to ReportStateMachine, whose plan step (Plan) may
// apply the report in parts instead.
func (h *Handler) ApplyObject(ctx context.Context, e ObjectEvent) (Result, error) {
	return h.run(ctx, "", func(ctx context.Context, now int64) (Result, []error, error) { return h.report(ctx, e, now, false) })
}

// Plan is ReportStateMachine's plan step: it reads and plans the report
// its event brings and applies it, or, when it changes more machines than
// a part holds, writes it in parts and returns its Split for the other
// steps (docs/architecture.md "Reports in parts").
func (h *Handler) Plan(ctx context.Context, s PlanStep) (Result, error) {
	return h.run(ctx, StepPlan, func(ctx context.Context, now int64) (Result, []error, error) {
		return h.report(ctx, s.Event, now, true)
	})
}

// run counts the invocation and the backend calls of apply, and logs its
// outcome once, naming the step when it is one.
func (h *Handler) run(ctx context.Context, step string, apply func(ctx context.Context, now int64) (Result, []error, error)) (Result, error) {
	h.metrics.Invocation()
	ctx, calls := callcount.With(ctx)
	res, errs, err := apply(ctx, h.Now().UnixMilli())
	if err != nil {
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			h.log.ErrorContext(ctx, "machine report refused: larger than the function reads", "error", err.Error(),
				"report", tooLarge.Key, "limit", tooLarge.Limit, "limit_of", tooLarge.What, "memory_mb", tooLarge.Bound.MemoryMB)
			h.metrics.Emit(nil, metrics.Metric{Name: metrics.ReportsTooLarge, Value: 1, Unit: metrics.Count})
			return Result{}, err
		}
		h.log.ErrorContext(ctx, "machine report refused", "error", err.Error())
		return Result{}, err
	}
	res.Failed = len(errs)
	attrs := []slog.Attr{slog.Int("machines", res.Machines), slog.Int("invalid", res.Invalid), slog.Int("absent", res.Absent),
		slog.Int("held", res.Held), slog.Int("changed", res.Changed), slog.Int("failed", res.Failed), slog.Int64("backend_calls", calls.Calls())}
	if step != "" {
		attrs = append(attrs, slog.String("step", step))
	}
	if res.Split != nil {
		attrs = append(attrs, slog.String("report", res.Report), slog.Int("parts", res.Parts))
	}
	if throttled := calls.Throttled(); throttled > 0 {
		attrs = append(attrs, slog.Int64("throttled_calls", throttled))
		h.metrics.Emit(nil, metrics.Metric{Name: metrics.BackendThrottles, Value: float64(throttled), Unit: metrics.Count})
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "machine report applied", attrs...)
	return res, errors.Join(errs...)
}

// report reads and plans a report, then applies it, or, with split and a
// plan larger than one part, writes it in parts for the state machine to
// apply. It returns the report's result, the machines it failed to store,
// and the error that refuses the report whole.
func (h *Handler) report(ctx context.Context, src Source, now int64, split bool) (Result, []error, error) {
	rep, err := h.read(ctx, src, now)
	if err != nil {
		return Result{}, nil, err
	}
	res, obs, fresh, err := h.plan(ctx, rep, now)
	if err != nil {
		return res, nil, err
	}
	id := reportID(src.raw())
	if h.marks != nil {
		if err := h.marks.StartReport(ctx, rep.at, id); err != nil {
			return res, nil, err
		}
	}
	if split && h.parts != nil && len(obs) > h.partSize {
		res.Split, err = h.split(ctx, id, rep.at, obs, fresh)
		return res, nil, err
	}
	return res, h.apply(ctx, obs, fresh, now), nil
}

// plan turns a report into the observations that would change the fleet:
// each machine once, the machines a complete report leaves out as absent,
// the brake's verdict on the losses of the whole report, and, when the
// fleet was scanned for it, none that would change nothing, and the ids of
// those the scan did not find (fresh), which are created together (apply).
func (h *Handler) plan(ctx context.Context, rep parsed, now int64) (Result, []machine.Observation, map[string]bool, error) {
	at := rep.at
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
	lost := slices.ContainsFunc(obs, func(o machine.Observation) bool { return o.Lost })
	var fresh map[string]bool
	if rep.Complete || lost || len(obs) >= ScanFrom {
		known, err := h.known(ctx)
		if err != nil {
			return res, nil, nil, err
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
		obs = changing(known, obs, now)
		fresh = unknown(known, obs)
	}
	res.Changed = len(obs)
	return res, obs, fresh, nil
}

// unknown returns the ids of obs that are not in known, which is sorted by
// id.
func unknown(known []machine.Slave, obs []machine.Observation) map[string]bool {
	fresh := map[string]bool{}
	for _, o := range obs {
		if _, found := slices.BinarySearchFunc(known, o.ID, func(s machine.Slave, id string) int { return strings.Compare(s.ID, id) }); !found {
			fresh[o.ID] = true
		}
	}
	return fresh
}

// read reads the report src carries or names.
func (h *Handler) read(ctx context.Context, src Source, now int64) (parsed, error) {
	switch src := src.(type) {
	case ReportEvent:
		return parseInline(src.Detail, reportTime(src.Time, now))
	case Report:
		return parseInline(src.body, now)
	case ObjectEvent:
		return h.readObject(ctx, src, now)
	}
	return parsed{}, fmt.Errorf("input %T brings no report", src)
}

// readObject reads the report object an "Object Created" event names. Only
// objects under ReportsPrefix of the reports bucket are reports; the report
// was made when the object was created.
func (h *Handler) readObject(ctx context.Context, e ObjectEvent, now int64) (parsed, error) {
	bucket, key := e.Bucket, e.Key
	switch {
	case h.objects == nil:
		return parsed{}, errors.New("reports from a bucket are not configured (REPORTS_BUCKET)")
	case bucket != h.bucket || !strings.HasPrefix(key, ReportsPrefix):
		return parsed{}, fmt.Errorf("object s3://%s/%s is not under s3://%s/%s, where reports are", bucket, key, h.bucket, ReportsPrefix)
	}
	body, err := h.objects.Open(ctx, bucket, key)
	if err != nil {
		return parsed{}, fmt.Errorf("machine report %s: %w", key, err)
	}
	defer body.Close()
	return parseObject(key, body, reportTime(e.Time, now), h.bound)
}

// ScanFrom is the size from which a report is planned against one scan of
// the fleet even when it is partial and loses no machine. Applying a machine
// costs a transactional read of three items (6 read units) before any
// write; a scan reads about 0.05 units a slave. So from a few hundred
// machines in a fleet of tens of thousands, one scan is the cheaper read, and
// it spares every write of a machine that did not change.
const ScanFrom = 1000

// changing keeps the observations that would change the fleet as the scan
// read it: a machine described as stored, in a state the report does not
// move, costs nothing more. The store's Apply still reads and decides each
// kept one on its own snapshot, so the scan only spares work; a change made
// between the scan and this report's writes is seen by the next report
// (docs/decisions.md, "Cost in proportion to change").
func changing(known []machine.Slave, obs []machine.Observation, now int64) []machine.Observation {
	byID := make(map[string]*machine.Slave, len(known))
	for i := range known {
		byID[known[i].ID] = &known[i]
	}
	kept := obs[:0]
	for _, o := range obs {
		plan, err := machine.Observe(o, now)(machine.Snapshot{Slave: byID[o.ID]})
		if err != nil || plan != nil {
			kept = append(kept, o)
		}
	}
	return kept
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

// apply stores observations: those of the machines fresh names (a scan
// did not find them) created together, in a few writes (Store.ApplyAbsent),
// then the others a few at a time. A first report of a fleet is then a
// write for 28 machines rather than a read and a write for each: on the
// local emulator, which serves one request at a time, a first report of
// 4,000 machines outlasted InventoryFunction's 60 s on a busy machine, and
// takes half a minute so (BENCHMARKS.md, "Reports on a busy local stack").
// The creates go first, alone: each is conditioned on the heads of the
// change feed, which every other change moves, so a change applied
// meanwhile would make a whole batch lose its race and be applied a read
// and a write per machine after all.
func (h *Handler) apply(ctx context.Context, obs []machine.Observation, fresh map[string]bool, now int64) []error {
	var errs []error
	var ids []string
	created := map[string]machine.Observation{}
	var known []machine.Observation
	for _, o := range obs {
		if fresh[o.ID] {
			ids = append(ids, o.ID)
			created[o.ID] = o
		} else {
			known = append(known, o)
		}
	}
	if len(ids) > 0 {
		for i, err := range h.store.ApplyAbsent(ctx, ids, func(id string) machine.Decide { return machine.Observe(created[id], now) }) {
			if err != nil {
				errs = append(errs, fmt.Errorf("machine %s: %w", ids[i], err))
			}
		}
	}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(8)
	for _, o := range known {
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
