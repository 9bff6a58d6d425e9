//go:build integration

package logindex_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logstore"
)

// racingObjects is the backfill's HEAD, with the object named victim
// deleted, and its event applied, right after its HEAD: the backfill then
// writes what it read of an object the index already knows is gone.
type racingObjects struct {
	*logstore.Store
	t      *testing.T
	r      rig
	victim string
}

func (o racingObjects) Stat(ctx context.Context, bucket, key string) (logkey.Object, *int64, *int64, bool, error) {
	obj, start, end, found, err := o.Store.Stat(ctx, bucket, key)
	if key == o.victim {
		o.r.remove(o.t, key)
		o.r.send(o.t, "Object Deleted", key, "0055AED6DCD90281FF")
	}
	return obj, start, end, found, err
}

// batch is the batch BackfillStateMachine hands the indexer for keys.
func (r rig) batch(keys []string) json.RawMessage {
	items := make([]map[string]string, len(keys))
	for i, k := range keys {
		items[i] = map[string]string{"Key": k}
	}
	raw, _ := json.Marshal(map[string]any{"BatchInput": map[string]string{"job": logindex.BackfillJob, "bucket": r.bucket}, "Items": items})
	return raw
}

func TestABackfillLosesNoRaceWithEvents(t *testing.T) {
	r := newRig(t)
	tk := task(t, "backfill-d1-1793491200000-0-h1-r1")
	var keys []string
	for i := range 5 {
		keys = append(keys, r.upload(t, tk, fmt.Sprintf("part%d", i), 1793491200000+int64(i), 1793491260000))
	}
	// One log is already indexed by its event; one is deleted while the
	// backfill reads it.
	r.send(t, "Object Created", keys[0], "0055AED6DCD9028101")
	victim := keys[3]

	store := logstore.New(local.S3, s3.NewPresignClient(local.S3))
	backfill := logindex.NewIndexer(racingObjects{store, t, r, victim}, r.table, logkey.Format{}, local.LogBuckets, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	var indexed int64
	for batch := range slices.Chunk(keys, 2) {
		res, err := backfill.Handle(context.Background(), r.batch(batch))
		if err != nil {
			t.Fatal(err)
		}
		indexed += res.Backfill.Indexed
	}
	if indexed != 5 {
		t.Errorf("got %d indexed, want 5: the victim was read before it went", indexed)
	}
	want := slices.Clone(keys)
	want = slices.DeleteFunc(want, func(k string) bool { return k == victim })
	slices.Sort(want)
	if got := r.keys(t, logindex.TaskPartition(tk.ID), always); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q: every live log, and not the one deleted during the backfill", got, want)
	}
}
