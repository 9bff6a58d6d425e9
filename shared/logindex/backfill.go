package logindex

import (
	"context"
	"strings"

	"github.com/fleetops/fleet/shared/logkey"
)

// Lister pages through a bucket in key order, as logstore.Store.Page does.
type Lister interface {
	Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error)
}

// backfillSeq is the sequencer of what a backfill writes: below every
// event's, so that it only fills in a log the index has never heard of. An
// event, earlier or later, always wins: a live object's event rewrites the
// same item, and a delete's tombstone keeps the backfill from bringing the
// log back. That makes a backfill safe to run while events arrive.
var backfillSeq = strings.Repeat("0", sequencerWidth)

// Backfill indexes at most limit objects of bucket after the key after, in
// key order, and returns the key to resume after and whether the bucket is
// done: run it again from next until done, from any process, any number
// of times. Keys the format did not write are skipped, as the indexer
// skips their events.
func (x *Indexer) Backfill(ctx context.Context, objects Lister, bucket, after string, limit int) (next string, done bool, err error) {
	page, done, err := objects.Page(ctx, bucket, "", after, limit)
	if err != nil {
		return after, false, err
	}
	next = after
	for _, o := range page {
		if parsed, ok := x.format.Parse(o.Key); ok {
			obj, start, end, found, err := x.objects.Stat(ctx, bucket, o.Key)
			if err != nil {
				return next, false, err
			}
			if found {
				if err := x.index.Put(ctx, parsed, logkey.Entry{Object: obj, Start: start, End: end}, backfillSeq); err != nil {
					return next, false, err
				}
			}
		}
		next = o.Key
	}
	return next, done, nil
}
