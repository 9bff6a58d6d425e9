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
)

// BackfillJob is what the BatchInput of BackfillStateMachine's batches
// names as their job: the field that tells a batch from an S3 event.
const BackfillJob = "backfill"

// MaxBatch bounds the keys of one batch: the template's MaxItemsPerBatch
// is 500, and a batch is done well within the function's timeout.
const MaxBatch = 1000

// batchParallelism bounds the keys of a batch worked on at once: a HEAD
// and up to three PutItems each, ~50 ms in AWS, so 500 keys take about
// two seconds (docs/behaviour.md "Backfill").
const batchParallelism = 8

// backfillSeq is the sequencer of what a backfill writes: below every
// event's, so that it only fills in a log the index has never heard of. An
// event, earlier or later, always wins: a live object's event rewrites the
// same item, and a delete's tombstone keeps the backfill from bringing the
// log back. That makes a backfill safe to run while events arrive.
var backfillSeq = strings.Repeat("0", sequencerWidth)

// Counts are what a backfill batch did with its keys: Indexed, Skipped (a
// key the format did not write) and Gone (deleted since it was listed).
type Counts struct {
	Indexed int64 `json:"indexed"`
	Skipped int64 `json:"skipped"`
	Gone    int64 `json:"gone"`
}

// batchInput is the BatchInput the template declares for each batch of
// BackfillStateMachine's Map.
type batchInput struct {
	Job    string `json:"job"`
	Bucket string `json:"bucket"`
}

// batchItem is an object of ListObjectsV2 as the Map's ItemReader gives it
// (Key, Size, LastModified, Etag, StorageClass): the key is all the
// indexer reads, its HEAD tells the rest.
type batchItem struct {
	Key string `json:"Key"`
}

// backfill indexes the keys of a batch as their created events would, but with
// the lowest sequencer. It refuses a batch of a bucket outside LOG_BUCKETS,
// or one that is not a batch of this job, before it reads anything.
func (x *Indexer) backfill(ctx context.Context, b batchInput, items []batchItem) (Result, error) {
	r := Result{Outcome: "backfilled", Bucket: b.Bucket, Backfill: &Counts{}}
	switch {
	case b.Job != BackfillJob:
		return r, fmt.Errorf("BatchInput.job %q, want %q", b.Job, BackfillJob)
	case !slices.Contains(x.buckets, b.Bucket):
		return r, fmt.Errorf("backfill of bucket %q, which is not one of LOG_BUCKETS", b.Bucket)
	case len(items) == 0 || len(items) > MaxBatch:
		return r, fmt.Errorf("backfill batch of %d keys, want 1 to %d", len(items), MaxBatch)
	}
	for _, item := range items {
		if item.Key == "" {
			return r, errors.New("backfill batch item without a Key")
		}
	}
	var indexed, skipped, gone atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(batchParallelism)
	for _, item := range items {
		g.Go(func() error {
			parsed, ok := x.format.Parse(item.Key)
			if !ok {
				skipped.Add(1)
				return nil
			}
			obj, start, end, found, err := x.objects.Stat(gctx, b.Bucket, item.Key)
			if err != nil {
				return err
			}
			if !found {
				gone.Add(1)
				return nil
			}
			if err := x.index.Put(gctx, parsed, logkey.Entry{Object: obj, Start: start, End: end}, backfillSeq); err != nil {
				return err
			}
			indexed.Add(1)
			return nil
		})
	}
	err := g.Wait()
	r.Key = items[len(items)-1].Key
	r.Backfill = &Counts{Indexed: indexed.Load(), Skipped: skipped.Load(), Gone: gone.Load()}
	return r, err
}
