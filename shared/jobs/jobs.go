// Package jobs runs the scheduled jobs over the slave tables: the expiry
// trigger, which applies every due expiring state change (docs/behaviour.md
// "Expiring changes"), and the retention job, which removes DEAD slaves kept
// longer than DEAD_SLAVE_RETENTION (docs/behaviour.md "Deletes"). History
// entries need no job: they expire by DynamoDB TTL.
//
// Each run logs one line and, for the trigger, one metrics document with its
// outcomes and its lag: how long the oldest due record had waited, which
// stays under a minute while the trigger keeps up.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/exactjson"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"
)

// Store is what the jobs need from storage.
type Store interface {
	Due(ctx context.Context, now int64) ([]machine.Due, error)
	Apply(ctx context.Context, id string, decide machine.Decide) error
	KeepDeferred(ctx context.Context, id string, now int64) error
	DeleteDead(ctx context.Context, before int64) (int, error)
}

// The jobs an event can ask for.
const (
	Expiry    = "expiry"
	Retention = "retention"
)

// Records are applied in one lane per shard of the change feed, the lanes
// at once and each lane in order. Every change moves the head of its
// slave's shard in its transaction (docs/tables.md "Changes"), so two
// records of one shard applied at once race for the head and the loser
// reads and decides again; with more workers than shards a run of
// thousands of records lost such races until some ran out of attempts.

// margin is the time kept free before the invocation's deadline: records
// not started by then are left for the next run rather than cut off.
const margin = 10 * time.Second

// Runner runs the jobs.
type Runner struct {
	// Now is the clock: time.Now unless a test sets another.
	Now func() time.Time

	store         Store
	limits        machine.Limits
	deadRetention time.Duration
	log           *slog.Logger
	metrics       *metrics.Emitter
}

// New returns a runner. limits.MaxDecommissioning applies to reverts into
// STARTING_DECOMMISSION; deadRetention is how long a DEAD slave is kept. m
// receives the function's cold start and each run's outcomes; nil means no
// metrics.
func New(store Store, limits machine.Limits, deadRetention time.Duration, log *slog.Logger, m *metrics.Emitter) *Runner {
	return &Runner{store: store, limits: limits, deadRetention: deadRetention, log: log, metrics: m, Now: time.Now}
}

// Result says what one run did. It is both the invocation's response and
// the run's log line.
type Result struct {
	Job        string `json:"job"`
	Due        int    `json:"due,omitempty"`        // due records found
	Applied    int    `json:"applied"`              // slaves reverted
	Skipped    int    `json:"skipped"`              // illegal or already-at-state reverts: record deleted only
	Dropped    int    `json:"dropped"`              // records of slaves that are gone
	Superseded int    `json:"superseded,omitempty"` // already handled by a concurrent run or change
	Deferred   int    `json:"deferred,omitempty"`   // waiting for room under the decommission limit
	Failed     int    `json:"failed,omitempty"`     // left for the next run after an error
	Remaining  int    `json:"remaining,omitempty"`  // not started before the deadline; left for the next run
	Removed    int    `json:"removed,omitempty"`    // DEAD slaves removed by retention
	Millis     int64  `json:"millis"`
	// LagMillis is how long the oldest due record had been due when the run
	// started, deferred records aside: they wait for room by design.
	LagMillis int64 `json:"lagMillis,omitempty"`
}

// event is what the schedules send: {"job": "expiry"} or {"job":
// "retention"}. Any other JSON object, an EventBridge "Scheduled Event" for
// one, runs the expiry job, unless it is plainly another kind of event (an
// API Gateway request, a machine report, records from a queue or a stream):
// that one is refused, so that a misrouted event fails where it can be seen
// rather than run a job. The fields are read by their exact names, like
// every field the service reads: "JOB" is not "job".
type event struct {
	Job string `json:"job"`

	DetailType     string          `json:"detail-type"`
	HTTPMethod     string          `json:"httpMethod"`
	RouteKey       string          `json:"routeKey"`
	RequestContext json.RawMessage `json:"requestContext"`
	Records        json.RawMessage `json:"Records"`
	Machines       json.RawMessage `json:"machines"`
}

// foreign names the kind of event e is when it is not one a schedule sends,
// or returns "".
func (e event) foreign() string {
	switch {
	case e.HTTPMethod != "" || e.RouteKey != "" || e.RequestContext != nil:
		return "an API Gateway request"
	case e.DetailType != "" && e.DetailType != "Scheduled Event":
		return fmt.Sprintf("an EventBridge %q event", e.DetailType)
	case e.Machines != nil:
		return "a machine report"
	case e.Records != nil:
		return "an event of records (SQS, SNS, S3 or a stream)"
	}
	return ""
}

// Handle runs the job the event names. It fails when the event is not one a
// schedule sends, and when the job could not run at all; records that fail
// are counted, logged and retried by the next run.
func (r *Runner) Handle(ctx context.Context, raw json.RawMessage) (Result, error) {
	r.metrics.Invocation()
	var e event
	if err := exactjson.Unmarshal(raw, &e); err != nil {
		return Result{}, fmt.Errorf("scheduled event is not a JSON object: %w", err)
	}
	if kind := e.foreign(); kind != "" {
		return Result{}, fmt.Errorf(`%s is not a scheduled event: the expiry function runs on {"job": "expiry"}, {"job": "retention"} or an EventBridge Scheduled Event`, kind)
	}
	switch e.Job {
	case "", Expiry:
		return r.Expire(ctx)
	case Retention:
		return r.Retain(ctx)
	}
	return Result{}, fmt.Errorf("unknown job %q: want %q or %q", e.Job, Expiry, Retention)
}

// Expire applies every record due now, one lane per feed shard.
func (r *Runner) Expire(ctx context.Context) (Result, error) {
	ctx, calls := callcount.With(ctx)
	start := r.Now()
	now := start.UnixMilli()
	res := Result{Job: Expiry}
	due, err := r.store.Due(ctx, now)
	if err != nil {
		return res, fmt.Errorf("find due records: %w", err)
	}
	res.Due = len(due)

	stop := func() bool { return false }
	if deadline, ok := ctx.Deadline(); ok {
		stop = func() bool { return time.Until(deadline) < margin }
	}
	lanes := make([][]machine.Due, change.FeedShards)
	for _, d := range due {
		shard := change.ShardOf(d.SlaveID)
		lanes[shard] = append(lanes[shard], d)
	}
	var mu sync.Mutex
	deferred := map[string]bool{}
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Go(func() {
			for i, d := range lane {
				if stop() {
					mu.Lock()
					res.Remaining += len(lane) - i
					mu.Unlock()
					return
				}
				id := d.SlaveID
				var outcome machine.Outcome
				err := r.store.Apply(ctx, id, machine.Expire(id, r.clock, r.limits, &outcome))
				if isDeferred(err) {
					// It waits for a slot, however long that takes:
					// keep it from being collected meanwhile.
					if kerr := r.store.KeepDeferred(ctx, id, now); kerr != nil {
						r.log.WarnContext(ctx, "deferred record not kept", "slave_id", id, "error", kerr.Error())
					}
				}
				mu.Lock()
				r.count(ctx, &res, id, outcome, err)
				deferred[id] = isDeferred(err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, d := range due {
		if !deferred[d.SlaveID] {
			res.LagMillis = now - d.At
			break
		}
	}
	res.Millis = r.Now().Sub(start).Milliseconds()
	r.report(ctx, res, calls)
	return res, nil
}

// isDeferred tells a record left waiting under the decommission limit.
func isDeferred(err error) bool {
	return errors.Is(err, machine.ErrOverLimit)
}

func (r *Runner) count(ctx context.Context, res *Result, id string, outcome machine.Outcome, err error) {
	switch {
	case isDeferred(err):
		res.Deferred++
	case err != nil:
		res.Failed++
		r.log.WarnContext(ctx, "expiring record not applied", "slave_id", id, "error", err.Error())
	case outcome == machine.Applied:
		res.Applied++
	case outcome == machine.Skipped:
		res.Skipped++
	case outcome == machine.Dropped:
		res.Dropped++
	default:
		res.Superseded++
	}
}

// clock reads the time as a decision takes it, in epoch ms.
func (r *Runner) clock() int64 { return r.Now().UnixMilli() }

// Retain removes the DEAD slaves whose state is older than the retention.
func (r *Runner) Retain(ctx context.Context) (Result, error) {
	ctx, calls := callcount.With(ctx)
	start := r.Now()
	res := Result{Job: Retention}
	removed, err := r.store.DeleteDead(ctx, start.Add(-r.deadRetention).UnixMilli())
	res.Removed = removed
	res.Millis = r.Now().Sub(start).Milliseconds()
	if err != nil {
		return res, fmt.Errorf("remove dead slaves: %w", err)
	}
	r.report(ctx, res, calls)
	return res, nil
}

// report writes the run's log line and metrics.
func (r *Runner) report(ctx context.Context, res Result, calls *callcount.Counter) {
	attrs := []slog.Attr{slog.String("job", res.Job), slog.Int("due", res.Due), slog.Int("applied", res.Applied),
		slog.Int("skipped", res.Skipped), slog.Int("dropped", res.Dropped), slog.Int("superseded", res.Superseded),
		slog.Int("deferred", res.Deferred), slog.Int("failed", res.Failed), slog.Int("remaining", res.Remaining),
		slog.Int("removed", res.Removed), slog.Int64("millis", res.Millis), slog.Int64("lag_ms", res.LagMillis),
		slog.Int64("backend_calls", calls.Calls())}
	throttled := calls.Throttled()
	if throttled > 0 {
		attrs = append(attrs, slog.Int64("throttled_calls", throttled))
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "scheduled job done", attrs...)

	var ms []metrics.Metric
	if res.Job == Expiry {
		for _, m := range []struct {
			name string
			n    int
		}{
			{metrics.ExpiryApplied, res.Applied}, {metrics.ExpirySkipped, res.Skipped}, {metrics.ExpiryDropped, res.Dropped},
			{metrics.ExpirySuperseded, res.Superseded}, {metrics.ExpiryDeferred, res.Deferred}, {metrics.ExpiryFailed, res.Failed},
			{metrics.ExpiryRemaining, res.Remaining},
		} {
			ms = append(ms, metrics.Metric{Name: m.name, Value: float64(m.n), Unit: metrics.Count})
		}
		ms = append(ms, metrics.Metric{Name: metrics.ExpiryLag, Value: float64(res.LagMillis), Unit: metrics.Milliseconds})
	}
	if throttled > 0 {
		ms = append(ms, metrics.Metric{Name: metrics.BackendThrottles, Value: float64(throttled), Unit: metrics.Count})
	}
	r.metrics.Emit(nil, ms...)
}
