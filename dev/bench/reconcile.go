package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/dev/reconcile"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
)

// reconcileFigures seeds logs under one request of a log bucket of the
// emulator (750, and 250 for the slope; BENCH_RECONCILE_N sets the larger),
// with no event delivered, and runs ReconcileStateMachine over that prefix
// through the local driver, IndexerFunction's handler in this process
// (docs/behaviour.md "Reconciliation"), counting its backend calls:
//
//   - first, over an index that holds none of them: every log added, the
//     worst case (a bucket whose notifications were never on);
//   - then after 1% of the logs were deleted, 1% rewritten and 1% added
//     behind the index's back: the drift counted exactly, and the day-to-day
//     cost, where most ranges only compare;
//   - then again, at the larger size, interrupted when 40% of its batches
//     are done and resumed from its journal: only the batches cut short
//     are redone.
//
// The figures of 10 million logs are extrapolated from the two sizes.
func reconcileFigures(ctx context.Context, e *env) ([]row, error) {
	// Two sizes, for the slope (fit) of the 10 million logs' figures; the
	// interruption is measured at the larger.
	sizes := []int{e.size(250, 200, 100), e.size(750, 400, 200)} // at least 100: 1% of them change
	if v := os.Getenv("BENCH_RECONCILE_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 {
			return nil, fmt.Errorf("BENCH_RECONCILE_N=%q is not a number of at least 200", v)
		}
		sizes = []int{n / 2, n}
	}
	bucket := e.local.LogBuckets[0]
	counted := newCalls()
	m, err := reconcile.Machine(ctx, e.local, countedClients(e, counted))
	if err != nil {
		return nil, err
	}
	perLog := func(byOp map[string]int, n int) float64 { return float64(total(byOp)) / float64(n) }
	var rows []row
	var emptyCalls, emptyTime, driftCalls, driftTime []point
	for _, n := range sizes {
		request := fmt.Sprintf("benchreconcile%d", time.Now().UnixNano())
		began := time.Now()
		if err := seedLogs(ctx, e, bucket, request, 0, n); err != nil {
			return nil, err
		}
		seeded := time.Since(began)
		input := reconcile.Input(bucket, request+"/")
		run := func(ctx context.Context, progress func(reconcile.Totals)) (logindex.Drift, reconcile.Totals, time.Duration, map[string]int, string, error) {
			began := time.Now()
			runs, totals, err := reconcile.Run(ctx, m, input, progress)
			wall := time.Since(began)
			byOp, ops := counted.take()
			if err != nil {
				return logindex.Drift{}, totals, wall, byOp, ops, err
			}
			return *runs[0].Drift, totals, wall, byOp, ops, nil
		}

		first, firstTotals, firstWall, firstOps, firstCalls, err := run(ctx, nil)
		if err != nil {
			return nil, err
		}

		// 1% deleted, 1% rewritten, 1% added, none of it told to the index.
		changed := n / 100
		if err := changeLogs(ctx, e, bucket, request, n, changed); err != nil {
			return nil, err
		}
		m.States.Store(0)
		drift, driftTotals, driftWall, driftOps, driftText, err := run(ctx, nil)
		if err != nil {
			return nil, err
		}
		wantDrift := logindex.Drift{Added: int64(changed), Removed: int64(changed), Updated: int64(changed)}
		at := float64(n)
		emptyCalls, emptyTime = append(emptyCalls, point{at, perLog(firstOps, n) * at}), append(emptyTime, point{at, firstWall.Seconds()})
		driftCalls, driftTime = append(driftCalls, point{at, perLog(driftOps, n) * at}), append(driftTime, point{at, driftWall.Seconds()})
		if n != sizes[len(sizes)-1] {
			continue
		}
		byOp := map[string]float64{}
		for op, c := range driftOps {
			byOp[op] = float64(c)
		}
		e.costs.reconcile = &reconciledLogs{logs: float64(n), calls: byOp, batches: float64(driftTotals.Batches), states: float64(m.States.Load())}
		rows = append(rows,
			row{figure: "logs seeded (PutObject, 32 at once, no event delivered)", value: fmt.Sprintf("%d in %.1f s (%.0f/s)", n, seeded.Seconds(), float64(n)/seeded.Seconds())},
			row{figure: "reconcile, index empty: batches, wall time", value: fmt.Sprintf("%d batches in %.1f s, %.0f logs/s", firstTotals.Batches, firstWall.Seconds(), float64(n)/firstWall.Seconds()),
				target: "every log added once", met: verdict(first == logindex.Drift{Added: int64(n)})},
			row{figure: "reconcile, index empty: backend calls a log", value: fmt.Sprintf("%.2f (%s)", perLog(firstOps, n), firstCalls)},
			row{figure: "reconcile, 1% deleted, 1% rewritten, 1% added: wall time", value: fmt.Sprintf("%d batches in %.1f s, %.0f logs/s", driftTotals.Batches, driftWall.Seconds(), float64(n)/driftWall.Seconds())},
			row{figure: "reconcile, 1% drift: drift found", value: fmt.Sprintf("%d added, %d removed, %d updated", drift.Added, drift.Removed, drift.Updated),
				target: fmt.Sprintf("%d of each", changed), met: verdict(drift == wantDrift)},
			row{figure: "reconcile, 1% drift: backend calls a log", value: fmt.Sprintf("%.3f (%s)", perLog(driftOps, n), driftText)},
		)
		resumed, err := interrupted(ctx, m, run, driftTotals.Batches)
		if err != nil {
			return nil, err
		}
		rows = append(rows, resumed)
	}
	return append(rows,
		row{figure: fmt.Sprintf("reconcile of %s logs, index empty (on the emulator): backend calls, wall time", thousands(scaleLogs)),
			value: fmt.Sprintf("%s; %s", fit(emptyCalls...).extrapolated(scaleLogs, count), fit(emptyTime...).extrapolated(scaleLogs, seconds))},
		row{figure: fmt.Sprintf("reconcile of %s logs, 1%% drift (on the emulator): backend calls, wall time", thousands(scaleLogs)),
			value: fmt.Sprintf("%s; %s", fit(driftCalls...).extrapolated(scaleLogs, count), fit(driftTime...).extrapolated(scaleLogs, seconds))},
	), nil
}

// interrupted runs the reconciliation a third time, interrupted when 40%
// of its batches are done and resumed from its journal, and says whether a
// finished batch was run again.
func interrupted(ctx context.Context, m *statemachine.Machine, run func(context.Context, func(reconcile.Totals)) (logindex.Drift, reconcile.Totals, time.Duration, map[string]int, string, error), batches int) (row, error) {
	journal, err := statemachine.OpenJournal(filepath.Join(os.TempDir(), fmt.Sprintf("bench-reconcile-%d.jsonl", time.Now().UnixNano())))
	if err != nil {
		return row{}, err
	}
	defer journal.Remove()
	var started atomic.Int64
	invoke := m.Invoke
	m.Invoke = func(ctx context.Context, fn string, payload json.RawMessage) (json.RawMessage, error) {
		started.Add(1)
		return invoke(ctx, fn, payload)
	}
	m.Journal = journal
	cut, interrupt := context.WithCancel(ctx)
	_, cutTotals, _, _, _, err := run(cut, func(t reconcile.Totals) {
		if t.Batches*10 >= batches*4 {
			interrupt()
		}
	})
	interrupt()
	if err == nil {
		return row{}, fmt.Errorf("the third execution ended before its interruption (%s)", cutTotals)
	}
	// The Begin step and the batches: what ran before the interruption.
	cutShort := started.Load() - 1 - int64(cutTotals.Batches)
	started.Store(0)
	_, resumed, _, _, _, err := run(ctx, nil)
	if err != nil {
		return row{}, err
	}
	rerun := started.Load() - 1 // the Finish step
	return row{figure: "resumed after an interruption at 40%", value: fmt.Sprintf("%d of %d batches done before, %d run on resuming, %d cut short and redone",
		cutTotals.Batches, resumed.Batches, rerun, cutShort), target: "no finished batch redone", met: verdict(rerun == int64(resumed.Batches-cutTotals.Batches))}, nil
}

// seedLogs uploads logs from to n-1 of one request, a thousand per task,
// 32 at a time.
func seedLogs(ctx context.Context, e *env, bucket, request string, from, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := from; i < n; i++ {
		g.Go(func() error { return putLog(ctx, e, bucket, request, i, "log\n") })
	}
	return g.Wait()
}

func putLog(ctx context.Context, e *env, bucket, request string, i int, body string) error {
	key := benchLogKey(request, i)
	_, err := e.local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader(body),
		Metadata: map[string]string{"starttime": "1793491200000"}})
	return err
}

func benchLogKey(request string, i int) string {
	task, _ := logkey.ParseTaskID(fmt.Sprintf("%s-d1-1793491200000-%d-h1-r1", request, i/1000))
	return (logkey.Format{}).Key(logkey.File{Task: task, Filename: fmt.Sprintf("part%05d", i%1000), Modified: time.UnixMilli(1793491200000)})
}

// changeLogs deletes k of the n logs, rewrites k others with another body
// and adds k new ones, spread over the prefix.
func changeLogs(ctx context.Context, e *env, bucket, request string, n, k int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	step := n / k
	for j := range k {
		g.Go(func() error {
			key := benchLogKey(request, j*step)
			_, err := e.local.S3.DeleteObject(gctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
			return err
		})
		g.Go(func() error { return putLog(gctx, e, bucket, request, j*step+1, "log, written again\n") })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return seedLogs(ctx, e, bucket, request, n, n+k)
}

// countedClients are the emulator's DynamoDB and S3, their calls counted.
func countedClients(e *env, c *calls) reconcile.Clients {
	var counting aws.Config
	c.count(&counting)
	return reconcile.Clients{
		DynamoDB: dynamodb.New(e.local.DynamoDB.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, counting.APIOptions...) }),
		S3:       s3.New(e.local.S3.Options(), func(o *s3.Options) { o.APIOptions = append(o.APIOptions, counting.APIOptions...) }),
	}
}
