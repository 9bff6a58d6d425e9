package logindex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/metrics"
)

// Objects is what the indexer reads of a log: one HEAD.
type Objects interface {
	Stat(ctx context.Context, bucket, key string) (obj logkey.Object, start, end *int64, found bool, err error)
}

// Index is what the indexer writes.
type Index interface {
	Put(ctx context.Context, p logkey.Parsed, e logkey.Entry, seq string) error
	Remove(ctx context.Context, p logkey.Parsed, bucket, key, seq string) error
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
}

// NewIndexer returns the indexer of the logs that buckets hold under
// format. It logs each event's outcome on log and its throttled backend
// calls on m (nil emits nothing).
func NewIndexer(objects Objects, index Index, format logkey.Format, buckets []string, log *slog.Logger, m *metrics.Emitter) *Indexer {
	return &Indexer{objects: objects, index: index, format: format, buckets: buckets, log: log, metrics: m}
}

// Result is what one event did: "indexed", "removed" or "skipped" (a key
// the format did not write, another bucket, an object deleted since); or
// what one backfill batch did: "backfilled", its last Key and its Counts.
type Result struct {
	Outcome  string  `json:"outcome"`
	Bucket   string  `json:"bucket"`
	Key      string  `json:"key"`
	Backfill *Counts `json:"backfill,omitempty"`
}

// invocation is what the indexer is invoked with: S3's EventBridge event
// (the part it reads), or a batch of BackfillStateMachine, which has a
// BatchInput and no source.
type invocation struct {
	BatchInput *batchInput `json:"BatchInput"`
	Items      []batchItem `json:"Items"`
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
// one batch of BackfillStateMachine (docs/behaviour.md "Backfill"). Any
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
	if r.Backfill != nil {
		attrs = append(attrs, "indexed", r.Backfill.Indexed, "skipped", r.Backfill.Skipped, "gone", r.Backfill.Gone)
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
		return Result{}, fmt.Errorf("s3 object event or backfill batch: %w", err)
	}
	if in.BatchInput != nil && in.Source == "" {
		return x.backfill(ctx, *in.BatchInput, in.Items)
	}
	ev := in.event
	if in.BatchInput != nil || ev.Source != "aws.s3" || (ev.DetailType != "Object Created" && ev.DetailType != "Object Deleted") {
		return Result{}, fmt.Errorf("neither a backfill batch nor an S3 \"Object Created\" or \"Object Deleted\" event (source %q, detail-type %q)", ev.Source, ev.DetailType)
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
	obj, start, end, found, err := x.objects.Stat(ctx, bucket, key)
	if err != nil {
		return r, err
	}
	if !found {
		// Deleted since: its delete event, later, removes it.
		return r, nil
	}
	if err := x.index.Put(ctx, parsed, logkey.Entry{Object: obj, Start: start, End: end}, seq); err != nil {
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
