package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/dev/reconcile"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
)

// freshness is "upload → visible": how long after its PutObject a log
// shows in a task lookup reading the index, with the log buckets' S3 events
// delivered to IndexerFunction's handler as make run delivers them
// (stack.DeliverLogEvents). On the stack as make run has it, the emulator
// answers an upload once its event is applied (dev/motoserver.py), so that
// figure says whether a lookup right after an upload finds it; the
// delivery and the apply are also timed on an emulator without that hold,
// from the PutObject call to the end of the handler's write, so that the
// hold cannot hide them.
func freshness(ctx context.Context, e *env) ([]row, error) {
	n := e.size(50, 10, 3)
	held, err := uploadsVisible(ctx, e, e.local, n)
	if err != nil {
		return nil, err
	}

	// An emulator of its own whose uploads answer at once.
	os.Setenv("MOTOSERVER_EVENT_HOLD", "0")
	moto, err := stack.StartMoto(ctx, "127.0.0.1:0")
	os.Unsetenv("MOTOSERVER_EVENT_HOLD")
	if err != nil {
		return nil, err
	}
	defer moto.Stop()
	unheld := &stack.Local{
		Template: e.local.Template, Moto: moto, LogBuckets: e.local.LogBuckets,
		DynamoDB: stack.DynamoDBClient(moto.Endpoint), S3: stack.LocalS3Client(moto.Endpoint),
	}
	if err := unheld.Template.CreateTables(ctx, unheld.DynamoDB, stack.LocalName); err != nil {
		return nil, err
	}
	if err := stack.CreateBuckets(ctx, unheld.S3, unheld.LogBuckets...); err != nil {
		return nil, err
	}
	delivered, err := uploadsVisible(ctx, e, unheld, n)
	if err != nil {
		return nil, err
	}

	return []row{
		{figure: fmt.Sprintf("PutObject → the log in a task lookup (index), make run's emulator, %d uploads one at a time", n),
			value: spread(held.visible), target: "found by the first lookup", met: verdict(held.lookups == 1)},
		{figure: "same: the upload's own answer (held until its event is applied)", value: spread(held.answered)},
		{figure: "PutObject → its event applied (EventBridge → queue → handler: HEAD + conditioned PutItems), emulator without the hold", value: spread(delivered.applied)},
		{figure: "same emulator: PutObject → the log in a task lookup, lookups repeated until it shows",
			value: fmt.Sprintf("%s; up to %d lookups", spread(delivered.visible), delivered.lookups)},
	}, nil
}

// visibility is what uploadsVisible measured.
type visibility struct {
	answered, applied, visible []time.Duration
	lookups                    int // the most lookups one upload needed
}

// uploadsVisible uploads n logs of one task to local's first log bucket,
// one at a time, and times each from its PutObject call to its answer, to
// the end of its event's apply, and to the first task lookup that lists
// it.
func uploadsVisible(ctx context.Context, e *env, local *stack.Local, n int) (visibility, error) {
	var v visibility
	indexerEnv, err := functionEnv(e, stack.IndexerFunction, nil)
	if err != nil {
		return v, err
	}
	index, err := indexerapp.New(ctx, indexerEnv, indexerapp.Options{Log: e.quiet, DynamoDB: local.DynamoDB, S3: local.S3})
	if err != nil {
		return v, err
	}
	var mu sync.Mutex
	applied := map[string]time.Time{}
	delivery, err := local.DeliverLogEvents(ctx, func(ctx context.Context, raw json.RawMessage) error {
		r, err := index(ctx, raw)
		if err == nil {
			mu.Lock()
			applied[r.Key] = time.Now()
			mu.Unlock()
		}
		return err
	}, e.quiet)
	if err != nil {
		return v, err
	}
	defer delivery.Close()
	// Later sections write to the bucket too: no event of theirs is held.
	defer local.S3.PutBucketNotificationConfiguration(context.WithoutCancel(ctx), &s3.PutBucketNotificationConfigurationInput{
		Bucket: aws.String(local.LogBuckets[0]), NotificationConfiguration: &s3types.NotificationConfiguration{},
	})

	// The lookups read the index only for a bucket that a reconciliation
	// found complete with its notifications on: make run reconciles its
	// buckets once their events flow, and so does this.
	if _, err := reconcile.Buckets(ctx, local); err != nil {
		return v, err
	}
	logsEnv, err := functionEnv(e, "LogsFunction", nil)
	if err != nil {
		return v, err
	}
	lookups, err := logsapp.New(ctx, logsEnv, logsapp.Options{S3: local.S3, DynamoDB: local.DynamoDB})
	if err != nil {
		return v, err
	}
	cfg, err := config.LoadLogs(logsEnv)
	if err != nil {
		return v, err
	}
	now := time.Now().UTC()
	id := fmt.Sprintf("bench-fresh-d1-%d-0-node1-rack1", now.Add(-time.Minute).UnixMilli())
	task, err := logkey.ParseTaskID(id)
	if err != nil {
		return v, err
	}
	for i := range n {
		key := cfg.Format.Key(logkey.File{Task: task, Filename: "stdout", Index: i, Modified: now})
		began := time.Now()
		_, err := local.S3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(local.LogBuckets[0]), Key: aws.String(key), Body: strings.NewReader("log\n"),
			Metadata: map[string]string{"starttime": strconv.FormatInt(now.Add(-time.Minute).UnixMilli(), 10)},
		})
		if err != nil {
			return v, err
		}
		v.answered = append(v.answered, time.Since(began))
		for tries := 1; ; tries++ {
			rec := httptest.NewRecorder()
			lookups.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/logs/task/"+id+"?list=true", nil))
			if rec.Code != http.StatusOK {
				return v, fmt.Errorf("task lookup: %d %s", rec.Code, rec.Body)
			}
			if got := rec.Header().Get(logs.IndexBucketsHeader); !slices.Contains(strings.Split(got, ","), local.LogBuckets[0]) {
				return v, fmt.Errorf("the task lookup listed %s instead of reading the index (%s: %q)", local.LogBuckets[0], logs.IndexBucketsHeader, got)
			}
			if strings.Contains(rec.Body.String(), strconv.Quote(key)) {
				v.visible = append(v.visible, time.Since(began))
				v.lookups = max(v.lookups, tries)
				break
			}
			if time.Since(began) > time.Minute {
				return v, fmt.Errorf("s3://%s/%s not in a task lookup a minute after its upload", local.LogBuckets[0], key)
			}
		}
		// Its task's item may be read before the handler has written the
		// request's and the deploy's.
		for {
			mu.Lock()
			at, ok := applied[key]
			mu.Unlock()
			if ok {
				v.applied = append(v.applied, at.Sub(began))
				break
			}
			if time.Since(began) > time.Minute {
				return v, fmt.Errorf("the event of s3://%s/%s not applied a minute after its upload", local.LogBuckets[0], key)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return v, nil
}

// spread is "p50 x ms, p95 y ms, max z ms" of ds (which it sorts).
func spread(ds []time.Duration) string {
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return fmt.Sprintf("p50 %s, p95 %s, max %s", ms(at(0.5)), ms(at(0.95)), ms(ds[len(ds)-1]))
}
