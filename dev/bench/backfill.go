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

	"github.com/fleetops/fleet/dev/backfill"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/logkey"
)

// backfillFigures seeds BENCH_BACKFILL_N logs (100,000; 5,000 with -quick)
// into a log bucket of the emulator and runs BackfillStateMachine over them
// through the local driver, IndexerFunction's handler in this process
// (docs/behaviour.md "Backfill"), counting its backend calls. A second
// execution is interrupted when 40% of its batches are done and resumed
// from its journal: only the batches cut short by the interruption are
// redone. Every log has three items (task, request, deploy).
func backfillFigures(ctx context.Context, e *env) ([]row, error) {
	n := 100_000
	if e.quick {
		n = 5_000
	}
	if v := os.Getenv("BENCH_BACKFILL_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return nil, fmt.Errorf("BENCH_BACKFILL_N=%q is not a positive number", v)
		}
	}
	bucket := e.local.LogBuckets[0]
	const request = "benchbackfill"
	began := time.Now()
	if err := seedLogs(ctx, e, bucket, request, n); err != nil {
		return nil, err
	}
	seeded := time.Since(began)

	counted := newCalls()
	m, err := backfill.Machine(ctx, e.local, countedClients(e, counted))
	if err != nil {
		return nil, err
	}
	input := backfill.Input(bucket, request+"/")
	began = time.Now()
	totals, err := backfill.Run(ctx, m, input, nil)
	if err != nil {
		return nil, err
	}
	wall := time.Since(began)
	byOp, ops := counted.take()
	all := 0
	for _, c := range byOp {
		all += c
	}

	// The second execution: interrupted at 40% of its batches, then resumed.
	journal, err := statemachine.OpenJournal(filepath.Join(os.TempDir(), fmt.Sprintf("bench-backfill-%d.jsonl", time.Now().UnixNano())))
	if err != nil {
		return nil, err
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
	first, err := backfill.Run(cut, m, input, func(t backfill.Totals) {
		if t.Batches*10 >= totals.Batches*4 {
			interrupt()
		}
	})
	interrupt()
	if err == nil {
		return nil, fmt.Errorf("the second execution ended before its interruption (%s)", first)
	}
	cutShort := started.Load() - int64(first.Batches)
	started.Store(0)
	resumed, err := backfill.Run(ctx, m, input, nil)
	if err != nil {
		return nil, err
	}
	rerun := started.Load()

	complete := totals.Indexed == int64(n) && resumed.Indexed == int64(n)
	return []row{
		{figure: "logs seeded (PutObject, 32 at once)", value: fmt.Sprintf("%d in %.1f s (%.0f/s)", n, seeded.Seconds(), float64(n)/seeded.Seconds())},
		{figure: "backfill: batches, wall time", value: fmt.Sprintf("%d batches in %.1f s", totals.Batches, wall.Seconds())},
		{figure: "backfill: logs indexed a second", value: fmt.Sprintf("%.0f", float64(n)/wall.Seconds()),
			target: "every log indexed once", met: verdict(complete)},
		{figure: "backfill: backend calls a log", value: fmt.Sprintf("%.2f (%s)", float64(all)/float64(n), ops)},
		{figure: "resumed after an interruption at 40%", value: fmt.Sprintf("%d of %d batches done before, %d run on resuming, %d cut short and redone",
			first.Batches, resumed.Batches, rerun, cutShort), target: "no finished batch redone", met: verdict(rerun == int64(resumed.Batches-first.Batches))},
	}, nil
}

// seedLogs uploads n tiny logs of one request, a thousand per task, 32 at
// a time.
func seedLogs(ctx context.Context, e *env, bucket, request string, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			task, err := logkey.ParseTaskID(fmt.Sprintf("%s-d1-1793491200000-%d-h1-r1", request, i/1000))
			if err != nil {
				return err
			}
			key := (logkey.Format{}).Key(logkey.File{Task: task, Filename: fmt.Sprintf("part%04d", i%1000), Modified: time.UnixMilli(1793491200000)})
			_, err = e.local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("log\n"),
				Metadata: map[string]string{"starttime": "1793491200000"}})
			return err
		})
	}
	return g.Wait()
}

// countedClients are the emulator's DynamoDB and S3, their calls counted.
func countedClients(e *env, c *calls) backfill.Clients {
	var counting aws.Config
	c.count(&counting)
	return backfill.Clients{
		DynamoDB: dynamodb.New(e.local.DynamoDB.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, counting.APIOptions...) }),
		S3:       s3.New(e.local.S3.Options(), func(o *s3.Options) { o.APIOptions = append(o.APIOptions, counting.APIOptions...) }),
	}
}
