package logindex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/metrics"
)

// Objects is what the indexer reads of a log: one HEAD; and what the
// reconciliation reads of a bucket besides the listing its state machine
// hands it: the keys after another (Page, logstore's), and whether the
// bucket sends its events to EventBridge (EventsOn).
type Objects interface {
	Stat(ctx context.Context, bucket, key string) (e logkey.Entry, etag string, found bool, err error)
	Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error)
	EventsOn(ctx context.Context, bucket string) (bool, error)
}

// Index is what the indexer writes, and what the reconciliation reads and
// writes (docs/behaviour.md "Reconciliation"); Table is it.
type Index interface {
	Put(ctx context.Context, p logkey.Parsed, e logkey.Entry, etag, seq string) error
	Remove(ctx context.Context, p logkey.Parsed, bucket, key, seq string) error
	Held(ctx context.Context, bucket, lo, hi string) ([]Held, error)
	Fill(ctx context.Context, p logkey.Parsed, e logkey.Entry, etag string) (bool, error)
	Correct(ctx context.Context, p logkey.Parsed, e logkey.Entry, etag, seq string) (bool, error)
	Drop(ctx context.Context, p logkey.Parsed, bucket, key, seq string) (bool, error)
	Recorded(ctx context.Context, p logkey.Parsed, bucket, key string) (Recorded, error)
	AddDrift(ctx context.Context, bucket string, run int64, d Drift) error
	Drift(ctx context.Context, bucket string, run int64) (Drift, error)
	MarkComplete(ctx context.Context, bucket string, since, at int64) error
	Unmark(ctx context.Context, bucket string) error
}

// Indexer keeps the index as S3's events announce the log buckets'
// objects created and deleted (docs/behaviour.md "Task-log index").
type Indexer struct {
	objects Objects
	index   Index
	format  logkey.Format
	buckets []string
	log     *slog.Logger
	metrics *metrics.Emitter
	now     func() time.Time
}

// NewIndexer returns the indexer of the logs that buckets hold under
// format. It logs each event's outcome on log and its throttled backend
// calls on m (nil emits nothing).
func NewIndexer(objects Objects, index Index, format logkey.Format, buckets []string, log *slog.Logger, m *metrics.Emitter) *Indexer {
	return &Indexer{objects: objects, index: index, format: format, buckets: buckets, log: log, metrics: m, now: time.Now}
}

// Result is what one event did: "indexed", "removed" or "skipped" (a key
// the format did not write, another bucket, an object deleted since); or
// what one step of a reconciliation did: "reconciled" (a batch, its last
// Key and its Counts), "begun" or "finished" (its Run), or "listed" (the
// Buckets to reconcile one by one).
type Result struct {
	Outcome string   `json:"outcome"`
	Bucket  string   `json:"bucket"`
	Key     string   `json:"key"`
	Batch   *Counts  `json:"batch,omitempty"`
	Run     *Run     `json:"run,omitempty"`
	Buckets []string `json:"buckets,omitempty"`
}

// invocation is what the indexer is invoked with: S3's EventBridge event
// (the part it reads), a batch of ReconcileStateMachine's Map, which has a
// BatchInput and no source, or one of its steps, which has a job.
type invocation struct {
	BatchInput *batchInput `json:"BatchInput"`
	Items      []batchItem `json:"Items"`
	Job        string      `json:"job"`
	Run
	event
}

// event is the part of S3's EventBridge event the indexer reads.
type event struct {
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
	Detail     struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string `json:"key"`
			Sequencer string `json:"sequencer"`
		} `json:"object"`
	} `json:"detail"`
}

// Handle applies one "Object Created" or "Object Deleted" event of S3, or
// one batch or step of ReconcileStateMachine (docs/behaviour.md
// "Reconciliation"). Any
// other input fails, so that a misrouted one is seen. A key the format
// did not write is logged and skipped: the bucket may hold other objects.
// The outcome is logged once, with the backend calls it took; throttled
// ones are counted in BackendThrottles.
func (x *Indexer) Handle(ctx context.Context, raw json.RawMessage) (Result, error) {
	ctx, calls := callcount.With(ctx)
	r, err := x.apply(ctx, raw)
	if throttled := calls.Throttled(); throttled > 0 {
		x.metrics.Emit(nil, metrics.Metric{Name: metrics.BackendThrottles, Value: float64(throttled), Unit: metrics.Count})
	}
	attrs := []any{"outcome", r.Outcome, "bucket", r.Bucket, "key", r.Key, "backend_calls", calls.Calls()}
	if r.Batch != nil {
		attrs = append(attrs, "added", r.Batch.Added, "removed", r.Batch.Removed, "updated", r.Batch.Updated,
			"unchanged", r.Batch.Unchanged, "skipped", r.Batch.Skipped)
	}
	if r.Run != nil {
		attrs = append(attrs, "run", r.Run.Started, "events", r.Run.Events, "complete", r.Run.Complete)
		if r.Run.Drift != nil {
			attrs = append(attrs, "added", r.Run.Drift.Added, "removed", r.Run.Drift.Removed, "updated", r.Run.Drift.Updated)
		}
	}
	if err != nil {
		x.log.ErrorContext(ctx, "s3 event not applied", append(attrs, "error", err.Error())...)
		return r, err
	}
	x.log.InfoContext(ctx, "s3 event applied", attrs...)
	return r, nil
}

func (x *Indexer) apply(ctx context.Context, raw json.RawMessage) (Result, error) {
	var in invocation
	if err := json.Unmarshal(raw, &in); err != nil {
		return Result{}, fmt.Errorf("s3 object event or reconciliation step: %w", err)
	}
	ev := in.event
	switch {
	case in.BatchInput != nil && in.Source == "" && in.Job == "":
		return x.reconcileBatch(ctx, *in.BatchInput, in.Items)
	case (in.Job == BucketsJob || in.Job == BeginJob || in.Job == FinishJob) && in.BatchInput == nil && in.Source == "":
		return x.reconcileStep(ctx, in.Job, in.Run)
	case in.BatchInput != nil || in.Job != "" || ev.Source != "aws.s3" || (ev.DetailType != "Object Created" && ev.DetailType != "Object Deleted"):
		return Result{}, fmt.Errorf("neither a reconciliation step nor an S3 \"Object Created\" or \"Object Deleted\" event (source %q, detail-type %q)", ev.Source, ev.DetailType)
	}
	bucket, key := ev.Detail.Bucket.Name, ev.Detail.Object.Key
	r := Result{Outcome: "skipped", Bucket: bucket, Key: key}
	seq, err := NormalizeSequencer(ev.Detail.Object.Sequencer)
	if err != nil {
		return r, fmt.Errorf("s3 event of s3://%s/%s: %w", bucket, key, err)
	}
	if !slices.Contains(x.buckets, bucket) {
		x.log.Warn("skipped an event of a bucket outside LOG_BUCKETS", "bucket", bucket, "key", key)
		return r, nil
	}
	parsed, ok := x.format.Parse(key)
	if !ok {
		x.log.Warn("skipped a key that LOG_KEY_FORMAT did not write", "bucket", bucket, "key", key, "format", x.format.String())
		return r, nil
	}
	if ev.DetailType == "Object Deleted" {
		if err := x.index.Remove(ctx, parsed, bucket, key, seq); err != nil {
			return r, err
		}
		r.Outcome = "removed"
		return r, nil
	}
	e, etag, found, err := x.objects.Stat(ctx, bucket, key)
	if err != nil {
		return r, err
	}
	if !found {
		// Deleted since: its delete event, later, removes it.
		return r, nil
	}
	if err := x.index.Put(ctx, parsed, e, etag, seq); err != nil {
		return r, err
	}
	r.Outcome = "indexed"
	return r, nil
}

// sequencerWidth is the width sequencers are padded to: S3's are 16 to 20
// hex digits today.
const sequencerWidth = 64

// NormalizeSequencer returns S3's detail.sequencer so that comparing two as
// strings orders their events. S3 says to compare sequencers of one key as
// hexadecimal strings after padding the shorter on the right with zeros;
// padding every one to the same width does that once, at write time.
func NormalizeSequencer(s string) (string, error) {
	if s == "" || len(s) > sequencerWidth || strings.Trim(strings.ToUpper(s), "0123456789ABCDEF") != "" {
		return "", fmt.Errorf("sequencer %q is not a hexadecimal string of at most %d digits", s, sequencerWidth)
	}
	return strings.ToUpper(s) + strings.Repeat("0", sequencerWidth-len(s)), nil
}
