package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// logIndex measures the lookups on the task-log index against the
// listing, over the same objects in MinIO, the index in the local
// emulator: the task of the log critical path (12 monthly prefixes, 50
// logs) with every backend call 20 ms slower, and a request holding
// thousands of logs over 30 days, asked for its last hour.
func logIndex(ctx context.Context, e *env) ([]row, error) {
	now := time.Now().UTC()
	c := newCalls()
	slow, s3cfg, dbcfg, err := slowBackends(ctx, c)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(s3cfg, func(o *s3.Options) { o.UsePathStyle = true })
	db := dynamodb.NewFromConfig(dbcfg)
	const bucket = "bench-log-index"
	_, task, err := putTaskLogs(ctx, e, bucket, fmt.Sprintf("bench-index-%d", now.UnixMilli()), 12, 50, now)
	if err != nil {
		return nil, err
	}
	// Busy requests of two sizes, for the slope of what the last hour's
	// lookup reads (fit): the figures are those of the larger, and of 10
	// million logs extrapolated.
	sizes, lastHour := []int{e.size(500, 250, 100), e.size(1_500, 500, 200)}, 18
	reps := e.size(5, 3, 1)
	busy := func(n int) string { return fmt.Sprintf("bench-busy-%d-%d", now.UnixMilli(), n) }
	logged := 50
	for _, n := range sizes {
		if err := putBusyRequest(ctx, e, bucket, busy(n), n, lastHour, now); err != nil {
			return nil, err
		}
		logged += n
	}
	started := time.Now()
	events, err := indexCounted(ctx, e, bucket)
	if err != nil {
		return nil, err
	}
	indexed := time.Since(started)
	stored, err := tableBytes(ctx, e, stack.LocalName("LogIndexTable"))
	if err != nil {
		return nil, err
	}
	perLog := map[string]float64{}
	for op, n := range events.calls {
		perLog[op] = float64(n) / float64(events.logs)
	}
	// The table holds the logs of this section alone (the sections before
	// index none): its bytes a log are the index's.
	e.costs.indexer = &indexedLog{calls: perLog, storedBytes: stored / float64(events.logs)}
	c.take()
	listing, index, err := logLookups(ctx, e, bucket, client, db, "60s")
	if err != nil {
		return nil, err
	}
	var rows []row
	past := now.Add(-2 * time.Minute).UnixMilli()
	for _, k := range []struct {
		name string
		h    http.Handler
		path string
	}{
		{"listing", listing, "/api/logs/task/" + task.ID},
		{"index", index, "/api/logs/task/" + task.ID},
		{"index, window ending 2 minutes ago (no listing of the newest prefix)", index, fmt.Sprintf("/api/logs/task/%s?end=%d", task.ID, past)},
	} {
		slow.delay.Store(0)
		undelayed, _, _, _, err := timeLookup(ctx, k.h, c, slow, "GET", k.path, "", reps)
		if err != nil {
			return nil, err
		}
		slow.delay.Store(int64(s3Delay))
		d, chain, _, text, err := timeLookup(ctx, k.h, c, slow, "GET", k.path, "", reps)
		if err != nil {
			return nil, err
		}
		r := row{
			figure: "GET /api/logs/task/{id}, 12 months, 50 logs, with metadata and links, " + k.name + " (every backend call +20 ms)",
			value: fmt.Sprintf("%s (undelayed %s: the emulators' and the handler's own time); %d sequential %s; %s",
				ms(d), ms(undelayed), chain, plural(int64(chain), "call"), text),
		}
		if k.name != "listing" {
			// The model's latency is one 20 ms wave on top of what the
			// emulator and handler take undelayed.
			r.target, r.met = "1 sequential call, ≤ 30 ms", verdict(chain <= 1 && d <= 30*time.Millisecond)
		}
		rows = append(rows, r)
	}
	slow.delay.Store(0)

	type lookup struct {
		seconds, calls, read []point
	}
	var lookups [2]lookup
	for i, n := range sizes {
		hour := fmt.Sprintf("/api/logs/request/%s?start=%d&end=%d", busy(n), now.Add(-time.Hour).UnixMilli(), now.UnixMilli())
		largest, times := i == len(sizes)-1, 1
		if largest {
			times = reps
		}
		for j, k := range []struct {
			name string
			h    http.Handler
		}{{"listing", listing}, {"index", index}} {
			d, _, counts, text, err := timeLookup(ctx, k.h, c, slow, "GET", hour, "", times)
			if err != nil {
				return nil, err
			}
			c.scanned.Store(0)
			_, answer := serve(ctx, k.h, "GET", hour, "")
			returned := strings.Count(answer, `"key":`)
			scanned := c.scanned.Load()
			calls := 0
			for _, m := range counts {
				calls += m
			}
			at := float64(n)
			lookups[j].seconds = append(lookups[j].seconds, point{at, d.Seconds()})
			lookups[j].calls = append(lookups[j].calls, point{at, float64(calls)})
			lookups[j].read = append(lookups[j].read, point{at, float64(scanned)})
			if !largest {
				continue
			}
			r := row{
				figure: fmt.Sprintf("GET /api/logs/request/{id}, last hour of 30 days holding %d logs (%d in the hour), %s", n, lastHour, k.name),
				value:  fmt.Sprintf("%s; %d logs answered; %s", ms(d), returned, text),
			}
			if k.name == "index" {
				r.value += fmt.Sprintf("; index items read ÷ returned %d ÷ %d = %.2f", scanned, returned, float64(scanned)/float64(max(returned, 1)))
				r.target, r.met = "read ÷ returned ≤ 1.1, ≤ 1 s", verdict(float64(scanned) <= 1.1*float64(returned) && d <= time.Second)
			} else {
				r.value += fmt.Sprintf(" (%d lists, %d HEADs)", counts["ListObjectsV2"], counts["HeadObject"])
			}
			rows = append(rows, r)
		}
	}
	list, ix := lookups[0], lookups[1]
	rows = append(rows,
		row{figure: fmt.Sprintf("same, a request of %s logs: backend calls, listing → index", thousands(scaleLogs)),
			value: fmt.Sprintf("%s → %s", fit(list.calls...).extrapolated(scaleLogs, count), fit(ix.calls...).extrapolated(scaleLogs, count))},
		row{figure: fmt.Sprintf("same, a request of %s logs: index items read; latency on the emulators, listing → index", thousands(scaleLogs)),
			value: fmt.Sprintf("%s; %s → %s", fit(ix.read...).extrapolated(scaleLogs, count),
				fit(list.seconds...).extrapolated(scaleLogs, seconds), fit(ix.seconds...).extrapolated(scaleLogs, seconds))},
	)
	rows = append(rows, row{figure: fmt.Sprintf("indexing the %d logs of all three (16 at once, known times)", logged),
		value: fmt.Sprintf("%s; calls a log's event: %s; %.0f bytes stored a log (items and DynamoDB's 100 bytes an item, before index copies)", ms(indexed), callsEach(perLog), stored/float64(events.logs))})
	return rows, nil
}

// putBusyRequest uploads n logs of request to bucket over the 30 days
// before now, lastHour of them in the last hour, from 500 tasks, with
// starttime and endtime metadata a minute apart.
func putBusyRequest(ctx context.Context, e *env, bucket, request string, n, lastHour int, now time.Time) error {
	client := stack.S3Client(e.minio.Endpoint, e.minio.AccessKey, e.minio.SecretKey)
	format, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		return err
	}
	month := 30 * 24 * time.Hour
	return inParallel(n, 16, func(i int) error {
		// The last hour holds lastHour logs; the rest spread over the 30
		// days before it.
		at := now.Add(-time.Hour - month + time.Duration(i)*((month-time.Hour)/time.Duration(n-lastHour)))
		if i >= n-lastHour {
			at = now.Add(-time.Hour + time.Duration(i-(n-lastHour)+1)*time.Hour/time.Duration(lastHour+1))
		}
		started := at.Add(-time.Duration(i%500) * time.Minute).Truncate(time.Hour)
		task, err := logkey.ParseTaskID(fmt.Sprintf("%s-d%d-%d-%d-node%d-rack1", request, i%7, started.UnixMilli(), i%500, i%97))
		if err != nil {
			return err
		}
		_, err = client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket),
			Key:    aws.String(format.Key(logkey.File{Task: task, Filename: "service.log", Index: i, Modified: at})),
			Body:   strings.NewReader("log line\n"),
			Metadata: map[string]string{
				"starttime": strconv.FormatInt(at.Add(-time.Minute).UnixMilli(), 10),
				"endtime":   strconv.FormatInt(at.UnixMilli(), 10),
			},
		})
		return err
	})
}

// logLookups returns the lookups of LogsFunction over bucket alone, built
// by its composition root over the given clients: listing the bucket, and
// reading the index as deployed (the bucket known complete, indexLogs).
// deadline is their LOG_LIST_TIMEOUT and LOG_LINK_TIMEOUT, room for the
// emulators on a loaded machine.
func logLookups(ctx context.Context, e *env, bucket string, s3c *s3.Client, db logindex.API, deadline string) (listing, index http.Handler, err error) {
	settings := func(logIndex string) map[string]string {
		return map[string]string{"LOG_BUCKETS": bucket, "LOG_INDEX": logIndex, "LOG_LIST_TIMEOUT": deadline, "LOG_LINK_TIMEOUT": deadline}
	}
	if listing, err = logRoutes(ctx, e, s3c, db, settings("false")); err != nil {
		return nil, nil, err
	}
	index, err = logRoutes(ctx, e, s3c, db, settings("true"))
	return listing, index, err
}

// indexLogs indexes every log of bucket (in MinIO) as IndexerFunction
// does, built by its composition root: the "Object Created" event of each,
// 16 at once (its HEAD, then its items), and then the last step of a
// reconciliation of the whole bucket, which records it complete, so that
// the lookups read it from the index as they read a deployed bucket.
// MinIO has no EventBridge: the indexer's S3 client says the bucket's
// notifications are on, as they are for a deployed log bucket, and the
// events it would send are the ones sent here.
func indexLogs(ctx context.Context, e *env, bucket string) error {
	_, err := indexCounted(ctx, e, bucket)
	return err
}

// indexCounted is indexLogs, counting the calls of the logs' events: it
// returns them with the number of logs.
func indexCounted(ctx context.Context, e *env, bucket string) (indexed, error) {
	c := newCalls()
	var counting aws.Config
	c.count(&counting)
	count := func(o *s3.Options) { o.APIOptions = append(o.APIOptions, counting.APIOptions...) }
	client := stack.S3Client(e.minio.Endpoint, e.minio.AccessKey, e.minio.SecretKey)
	indexerEnv, err := functionEnv(e, stack.IndexerFunction, map[string]string{"LOG_BUCKETS": bucket})
	if err != nil {
		return indexed{}, err
	}
	db := dynamodb.New(e.local.DynamoDB.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, counting.APIOptions...) })
	index, err := indexerapp.New(ctx, indexerEnv, indexerapp.Options{Log: e.quiet, DynamoDB: db,
		S3: s3.New(client.Options(), eventBridgeOn, count)})
	if err != nil {
		return indexed{}, err
	}
	since := time.Now().UnixMilli()
	var keys []string
	for pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)}); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return indexed{}, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	err = inParallel(len(keys), 16, func(i int) error {
		event, err := json.Marshal(map[string]any{"source": "aws.s3", "detail-type": "Object Created",
			"detail": map[string]any{"bucket": map[string]string{"name": bucket}, "object": map[string]string{"key": keys[i], "sequencer": "1"}}})
		if err != nil {
			return err
		}
		r, err := index(ctx, event)
		if err == nil && r.Outcome != "indexed" {
			err = fmt.Errorf("the event of s3://%s/%s was %s, not indexed", bucket, keys[i], r.Outcome)
		}
		return err
	})
	if err != nil {
		return indexed{}, err
	}
	events, _ := c.take()
	finish, err := json.Marshal(map[string]any{"job": logindex.FinishJob, "bucket": bucket, "prefix": "", "started": since, "events": true})
	if err != nil {
		return indexed{}, err
	}
	r, err := index(ctx, finish)
	if err == nil && (r.Run == nil || !r.Run.Complete) {
		err = fmt.Errorf("the reconciliation of %s did not record it complete", bucket)
	}
	return indexed{logs: len(keys), calls: events}, err
}

// indexed is the logs indexLogs indexed and the calls of their events.
type indexed struct {
	logs  int
	calls map[string]int
}

// eventBridgeOn makes an S3 client answer, without a call, that every
// bucket sends its events to EventBridge.
func eventBridgeOn(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("benchEventBridgeOn", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if _, ok := in.Parameters.(*s3.GetBucketNotificationConfigurationInput); ok {
				out := &s3.GetBucketNotificationConfigurationOutput{EventBridgeConfiguration: &s3types.EventBridgeConfiguration{}}
				return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, nil
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
	})
}

// slowBackends returns the S3 and DynamoDB configurations of the
// environment with their calls counted by c and sent through the
// transport it returns, which can hold each call (slowTransport).
func slowBackends(ctx context.Context, c *calls) (*slowTransport, aws.Config, aws.Config, error) {
	next := http.DefaultTransport.(*http.Transport).Clone()
	next.MaxIdleConnsPerHost = headPool // reuse every connection of the pool
	slow := &slowTransport{next: next}
	s3cfg, err := sdkconfig.Load(ctx, sdkconfig.S3, sdkconfig.S3AttemptTimeout)
	if err != nil {
		return nil, aws.Config{}, aws.Config{}, err
	}
	dbcfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, stack.DynamoDBAttemptTimeout)
	if err != nil {
		return nil, aws.Config{}, aws.Config{}, err
	}
	for _, cfg := range []*aws.Config{&s3cfg, &dbcfg} {
		c.count(cfg)
		cfg.HTTPClient = &http.Client{Transport: slow}
	}
	return slow, s3cfg, dbcfg, nil
}

// tableBytes is what the emulator's table holds, as DynamoDB bills its
// storage: each item's names and values, and 100 bytes more.
func tableBytes(ctx context.Context, e *env, table string) (float64, error) {
	var n float64
	pages := dynamodb.NewScanPaginator(e.local.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(table)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		for _, item := range page.Items {
			n += float64(approxItemBytes(item) + 100)
		}
	}
	return n, nil
}

// callsEach is "1 HeadObject, 3 PutItem" of calls a log.
func callsEach(perLog map[string]float64) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(perLog)) {
		parts = append(parts, fmt.Sprintf("%.2f %s", perLog[op], op))
	}
	return strings.Join(parts, ", ")
}
