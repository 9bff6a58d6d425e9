package logindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/metrics"
)

// The jobs of ReconcileStateMachine (docs/behaviour.md "Reconciliation"):
// the list of buckets of a run over all of them, the first step of a run
// of one bucket, its Map's batches (their BatchInput's job) and its last
// step.
const (
	BucketsJob   = "reconcile-buckets"
	BeginJob     = "reconcile-begin"
	ReconcileJob = "reconcile"
	FinishJob    = "reconcile-finish"
)

// MaxBatch bounds the keys of one batch: the template's MaxItemsPerBatch
// is 500, and a batch is done well within the function's timeout.
const MaxBatch = 1000

// batchParallelism bounds the keys of a batch worked on at once: each one
// that drifted costs a HEAD and up to three writes, ~50 ms in AWS.
const batchParallelism = 8

// Run is a reconciliation of one bucket, under a prefix, as its steps pass
// it on: begun at Started (epoch ms) with the bucket's EventBridge
// notifications on (Events) or off; once finished, the Drift it fixed in
// all and whether the bucket is now known Complete.
type Run struct {
	Bucket   string `json:"bucket"`
	Prefix   string `json:"prefix"`
	Started  int64  `json:"started,omitempty"`
	Events   bool   `json:"events"`
	Drift    *Drift `json:"drift,omitempty"`
	Complete bool   `json:"complete"`
}

// Drift is what a reconciliation fixed: logs S3 holds that the index
// lacked (Added), logs the index held that S3 does not (Removed), logs
// written again since the index recorded them (Updated).
type Drift struct {
	Added   int64 `json:"added"`
	Removed int64 `json:"removed"`
	Updated int64 `json:"updated"`
}

// Counts are what a reconciliation batch did: its Drift, the logs it found
// as the index holds them (Unchanged), and the keys it left alone (Skipped:
// keys the format did not write, objects gone or written since the
// listing, logs an event recorded meanwhile).
type Counts struct {
	Drift
	Unchanged int64 `json:"unchanged"`
	Skipped   int64 `json:"skipped"`
}

// batchInput is the BatchInput the template declares for each batch of
// ReconcileStateMachine's Map.
type batchInput struct {
	Job     string `json:"job"`
	Bucket  string `json:"bucket"`
	Prefix  string `json:"prefix"`
	Started int64  `json:"started"`
	Events  bool   `json:"events"`
}

// batchItem is an object of ListObjectsV2 as the Map's ItemReader gives it
// (Key, Size, LastModified in epoch seconds, Etag, StorageClass).
type batchItem struct {
	Key          string  `json:"Key"`
	Size         int64   `json:"Size"`
	LastModified float64 `json:"LastModified"`
	Etag         string  `json:"Etag"`
}

// reconcileStep runs the first or last step of a reconciliation of the
// bucket run names, after checking that it is one of LOG_BUCKETS.
func (x *Indexer) reconcileStep(ctx context.Context, job string, run Run) (Result, error) {
	r := Result{Bucket: run.Bucket, Key: run.Prefix}
	if job == BucketsJob && run == (Run{}) {
		r.Outcome, r.Buckets = "listed", x.buckets
		return r, nil
	}
	if !slices.Contains(x.buckets, run.Bucket) {
		return r, fmt.Errorf("reconciliation of bucket %q, which is not one of LOG_BUCKETS", run.Bucket)
	}
	switch job {
	case BeginJob:
		r.Outcome = "begun"
		out, err := x.begin(ctx, run.Bucket, run.Prefix)
		r.Run = &out
		return r, err
	case FinishJob:
		r.Outcome = "finished"
		if run.Started <= 0 {
			return r, errors.New("reconciliation finished without the start its first step gave")
		}
		out, err := x.finish(ctx, run)
		r.Run = &out
		return r, err
	}
	return r, fmt.Errorf("job %q, want %q, %q or %q", job, BucketsJob, BeginJob, FinishJob)
}

// begin starts a run: it notes whether the bucket's notifications are on
// (off, the bucket stops being known complete at once), and reconciles the
// keys under prefix before S3's first, which no batch covers (all of them
// when the bucket holds none).
func (x *Indexer) begin(ctx context.Context, bucket, prefix string) (Run, error) {
	run := Run{Bucket: bucket, Prefix: prefix, Started: x.now().UnixMilli()}
	var err error
	if run.Events, err = x.objects.EventsOn(ctx, bucket); err != nil {
		return run, err
	}
	if !run.Events {
		if err := x.index.Unmark(ctx, bucket); err != nil {
			return run, err
		}
	}
	first, found, err := x.listedAfter(ctx, run, "")
	if err != nil {
		return run, err
	}
	hi, ok := lastUnder(prefix)
	if !ok {
		return run, fmt.Errorf("prefix of %d bytes, longer than any key", len(prefix))
	}
	lo := prefix
	if lo == "" {
		lo = "\x00" // the least key: DynamoDB takes no empty one
	}
	var c Counts
	if err := x.compare(ctx, run, lo, hi, first, found, nil, &c); err != nil {
		return run, err
	}
	return run, x.record(ctx, bucket, run.Started, c.Drift)
}

// finish ends a run: the bucket is known complete when the run covered it
// all and its notifications were on from the run's start to now, so that
// what the listing did not see, its events brought.
func (x *Indexer) finish(ctx context.Context, run Run) (Run, error) {
	d, err := x.index.Drift(ctx, run.Bucket, run.Started)
	if err != nil {
		return run, err
	}
	run.Drift = &d
	on, err := x.objects.EventsOn(ctx, run.Bucket)
	if err != nil {
		return run, err
	}
	run.Complete = run.Prefix == "" && run.Events && on
	switch {
	case run.Complete:
		err = x.index.MarkComplete(ctx, run.Bucket, run.Started, x.now().UnixMilli())
	case !on:
		err = x.index.Unmark(ctx, run.Bucket)
	}
	return run, err
}

// reconcileBatch makes the index equal to S3 over the batch's key range:
// from its first key to the next key S3 holds after its last (the next
// batch's first), or to the end of the prefix. It refuses a batch of a
// bucket outside LOG_BUCKETS, or one that is not a batch of this job, or
// whose keys are not in S3's order under its prefix, before it reads
// anything.
func (x *Indexer) reconcileBatch(ctx context.Context, b batchInput, items []batchItem) (Result, error) {
	r := Result{Outcome: "reconciled", Bucket: b.Bucket, Batch: &Counts{}}
	switch {
	case b.Job != ReconcileJob:
		return r, fmt.Errorf("BatchInput.job %q, want %q", b.Job, ReconcileJob)
	case !slices.Contains(x.buckets, b.Bucket):
		return r, fmt.Errorf("reconciliation of bucket %q, which is not one of LOG_BUCKETS", b.Bucket)
	case b.Started <= 0:
		return r, errors.New("reconciliation batch without its run's start")
	case len(items) == 0 || len(items) > MaxBatch:
		return r, fmt.Errorf("reconciliation batch of %d keys, want 1 to %d", len(items), MaxBatch)
	}
	for i, item := range items {
		switch {
		case item.Key == "":
			return r, errors.New("reconciliation batch item without a Key")
		case !strings.HasPrefix(item.Key, b.Prefix):
			return r, fmt.Errorf("reconciliation batch item %q outside prefix %q", item.Key, b.Prefix)
		case i > 0 && item.Key <= items[i-1].Key:
			return r, fmt.Errorf("reconciliation batch items %q and %q out of S3's order", items[i-1].Key, item.Key)
		}
	}
	r.Key = items[len(items)-1].Key
	hi, _ := lastUnder(b.Prefix) // the prefix of keys is no longer than they are
	run := Run{Bucket: b.Bucket, Prefix: b.Prefix, Started: b.Started, Events: b.Events}
	next, found, err := x.listedAfter(ctx, run, r.Key)
	if err != nil {
		return r, err
	}
	err = x.compare(ctx, run, items[0].Key, hi, next, found, items, r.Batch)
	return r, errors.Join(err, x.record(ctx, b.Bucket, b.Started, r.Batch.Drift))
}

// listedAfter returns the first key under the run's prefix after after
// that S3 held when the run began, which is where the next batch starts:
// a key written since (in a later second) may fall between two batches,
// and ending the range there would leave the rest of the gap to no batch.
// A key that was only written again since is passed over too: the ranges
// then overlap, which costs a HEAD of each key of the overlap, never a
// wrong fix.
func (x *Indexer) listedAfter(ctx context.Context, run Run, after string) (string, bool, error) {
	for {
		objs, done, err := x.objects.Page(ctx, run.Bucket, run.Prefix, after, afterPage)
		if err != nil {
			return "", false, err
		}
		for _, o := range objs {
			if o.LastModified/1000 <= run.Started/1000 {
				return o.Key, true, nil
			}
		}
		if done || len(objs) == 0 {
			return "", false, nil
		}
		after = objs[len(objs)-1].Key
	}
}

// afterPage is how many keys listedAfter lists at once: usually the first
// is the one.
const afterPage = 10

// compare reconciles the keys from lo up to next (excluded), or up to hi
// (included) when there is no next key: listed is what S3 holds there, in
// key order; the index's side is one read of ByBucket over the same range. Every change is conditioned on
// the sequencer it read, so that a live event recorded meanwhile wins. An
// object written in a second after the run began, while the bucket's
// notifications were on, is left to its event: the listing may have seen
// it before its event was applied, and it is no drift.
func (x *Indexer) compare(ctx context.Context, run Run, lo, hi, next string, hasNext bool, listed []batchItem, c *Counts) error {
	bucket := run.Bucket
	if hasNext {
		hi = next
	}
	if lo > hi {
		return nil
	}
	held, err := x.index.Held(ctx, bucket, lo, hi)
	if err != nil {
		return err
	}
	if hasNext {
		held = slices.DeleteFunc(held, func(h Held) bool { return h.Key >= next })
	}
	var added, removed, updated, unchanged, skipped atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(batchParallelism)
	i, j := 0, 0
	for i < len(listed) || j < len(held) {
		switch {
		case j == len(held) || (i < len(listed) && listed[i].Key < held[j].Key):
			item := listed[i]
			i++
			if run.Events && int64(item.LastModified) > run.Started/1000 {
				skipped.Add(1)
				continue
			}
			g.Go(func() error { return x.fill(gctx, bucket, item, &added, &updated, &unchanged, &skipped) })
		case i == len(listed) || held[j].Key < listed[i].Key:
			h := held[j]
			j++
			g.Go(func() error { return x.drop(gctx, bucket, h, &removed, &skipped) })
		default:
			item, h := listed[i], held[j]
			i, j = i+1, j+1
			switch {
			case same(item, h):
				unchanged.Add(1)
				continue
			case run.Events && int64(item.LastModified) > run.Started/1000:
				skipped.Add(1)
				continue
			}
			g.Go(func() error { return x.update(gctx, bucket, h, &updated, &removed, &unchanged, &skipped) })
		}
	}
	err = g.Wait()
	c.Added += added.Load()
	c.Removed += removed.Load()
	c.Updated += updated.Load()
	c.Unchanged += unchanged.Load()
	c.Skipped += skipped.Load()
	return err
}

// same tells whether S3's listing and the index agree on an object: its
// size, its last modification (to the second, as the listing gives it)
// and its ETag, when the index holds one.
func same(item batchItem, h Held) bool {
	return item.Size == h.Size && int64(item.LastModified) == h.Modified/1000 && (h.ETag == "" || h.ETag == item.Etag)
}

// fill indexes a listed object the index does not hold (ByBucket, which
// may lag): with the lowest sequencer when nothing is recorded of it, else
// over what is recorded: a tombstone of an earlier life, an item of an
// older version of this table without inBucket. Over a tombstone, only
// once a HEAD after reading it still finds the object: the HEAD before may
// have come before the delete that wrote it.
func (x *Indexer) fill(ctx context.Context, bucket string, item batchItem, added, updated, unchanged, skipped *atomic.Int64) error {
	p, ok := x.format.Parse(item.Key)
	if !ok {
		skipped.Add(1)
		return nil
	}
	e, etag, found, err := x.objects.Stat(ctx, bucket, item.Key)
	if err != nil || !found {
		skipped.Add(1)
		return err
	}
	if written, err := x.index.Fill(ctx, p, e, etag); err != nil || written {
		added.Add(1)
		return err
	}
	rec, err := x.index.Recorded(ctx, p, bucket, item.Key)
	switch {
	case err != nil:
		return err
	case rec.Live && rec.Listed:
		skipped.Add(1) // an event recorded it since the range was read
		return nil
	}
	if e, etag, found, err = x.objects.Stat(ctx, bucket, item.Key); err != nil || !found {
		skipped.Add(1)
		return err
	}
	written, err := x.index.Correct(ctx, p, e, etag, rec.Seq)
	switch {
	case err != nil || !written:
		skipped.Add(1)
	case !rec.Live:
		added.Add(1)
	case sameAsHead(rec.Held, e, etag):
		unchanged.Add(1)
	default:
		updated.Add(1)
	}
	return err
}

// update rewrites a log the listing says changed since the index recorded
// it, from what a HEAD says now, over what the index read (h.Seq).
func (x *Indexer) update(ctx context.Context, bucket string, h Held, updated, removed, unchanged, skipped *atomic.Int64) error {
	p, ok := x.format.Parse(h.Key)
	if !ok {
		skipped.Add(1)
		return nil
	}
	e, etag, found, err := x.objects.Stat(ctx, bucket, h.Key)
	switch {
	case err != nil:
		return err
	case !found:
		return x.drop(ctx, bucket, h, removed, skipped)
	case sameAsHead(h, e, etag):
		unchanged.Add(1)
		return nil
	}
	written, err := x.index.Correct(ctx, p, e, etag, h.Seq)
	if written {
		updated.Add(1)
	} else {
		skipped.Add(1)
	}
	return err
}

// drop removes a log the index holds and the listing does not, once a
// HEAD confirms S3 no longer holds it (it may have been written since the
// listing), over what the index read (h.Seq).
func (x *Indexer) drop(ctx context.Context, bucket string, h Held, removed, skipped *atomic.Int64) error {
	p, ok := x.format.Parse(h.Key)
	if !ok {
		// Written under another LOG_KEY_FORMAT: its partitions are unknown.
		x.log.Warn("kept a log of the index that LOG_KEY_FORMAT did not write", "bucket", bucket, "key", h.Key)
		skipped.Add(1)
		return nil
	}
	_, _, found, err := x.objects.Stat(ctx, bucket, h.Key)
	if err != nil || found {
		skipped.Add(1)
		return err
	}
	deleted, err := x.index.Drop(ctx, p, bucket, h.Key, h.Seq)
	if deleted {
		removed.Add(1)
	} else {
		skipped.Add(1)
	}
	return err
}

// sameAsHead tells whether what the index holds is what a HEAD read.
func sameAsHead(h Held, e logkey.Entry, etag string) bool {
	return h.Size == e.Size && h.Modified == e.LastModified && (h.ETag == "" || h.ETag == etag)
}

// record adds what a step fixed to its run's drift, and emits it.
func (x *Indexer) record(ctx context.Context, bucket string, run int64, d Drift) error {
	if d == (Drift{}) {
		return nil
	}
	x.metrics.Emit(nil,
		metrics.Metric{Name: metrics.ReconcileAdded, Value: float64(d.Added), Unit: metrics.Count},
		metrics.Metric{Name: metrics.ReconcileRemoved, Value: float64(d.Removed), Unit: metrics.Count},
		metrics.Metric{Name: metrics.ReconcileUpdated, Value: float64(d.Updated), Unit: metrics.Count})
	return x.index.AddDrift(ctx, bucket, run, d)
}
