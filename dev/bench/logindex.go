package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/web"
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
	store := logstore.New(client, s3.NewPresignClient(client))
	table := logindex.NewTable(dynamodb.NewFromConfig(dbcfg), stack.LocalName("LogIndexTable"))

	const bucket = "bench-log-index"
	format, task, err := putTaskLogs(ctx, e, bucket, fmt.Sprintf("bench-index-%d", now.UnixMilli()), 12, 50, now)
	if err != nil {
		return nil, err
	}
	busy := fmt.Sprintf("bench-busy-%d", now.UnixMilli())
	n, lastHour := 10_000, 18
	reps := 5
	if e.quick {
		n, reps = 2_000, 3
	}
	if err := putBusyRequest(ctx, e, bucket, busy, n, lastHour, now); err != nil {
		return nil, err
	}
	started := time.Now()
	seq, err := logindex.NormalizeSequencer("1")
	if err != nil {
		return nil, err
	}
	if err := indexBucket(ctx, store, table, format, bucket, seq); err != nil {
		return nil, err
	}
	indexed := time.Since(started)
	c.take()

	settings := logs.Config{Buckets: []string{bucket}, Format: format, URLTTL: time.Hour, Lookback: 30 * 24 * time.Hour,
		ListTimeout: 60 * time.Second, LinkTimeout: 60 * time.Second}
	quiet := web.Options{Logger: e.quiet}
	listing := web.Wrap(logs.New(store, settings), quiet)
	index := web.Wrap(logs.New(store, settings).ReadsIndex(table), quiet)

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

	hour := fmt.Sprintf("/api/logs/request/%s?start=%d&end=%d", busy, now.Add(-time.Hour).UnixMilli(), now.UnixMilli())
	for _, k := range []struct {
		name string
		h    http.Handler
	}{{"listing", listing}, {"index", index}} {
		d, _, counts, text, err := timeLookup(ctx, k.h, c, slow, "GET", hour, "", reps)
		if err != nil {
			return nil, err
		}
		c.scanned.Store(0)
		_, answer := serve(ctx, k.h, "GET", hour, "")
		returned := strings.Count(answer, `"key":`)
		scanned := c.scanned.Load()
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
	rows = append(rows, row{figure: fmt.Sprintf("indexing the %d logs of both (16 at once, known times)", n+50), value: ms(indexed)})
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

// indexBucket writes every log of bucket into the index as its created
// event would, 16 at a time: listed, HEADed for its times, put under the
// partitions its key names.
func indexBucket(ctx context.Context, store *logstore.Store, table *logindex.Table, format logkey.Format, bucket, seq string) error {
	objs, err := store.All(ctx, bucket, "")
	if err != nil {
		return err
	}
	return inParallel(len(objs), 16, func(i int) error {
		parsed, ok := format.Parse(objs[i].Key)
		if !ok {
			return nil
		}
		start, end, err := store.Times(ctx, bucket, objs[i].Key)
		if err != nil {
			return err
		}
		return table.Put(ctx, parsed, logkey.Entry{Object: objs[i], Start: start, End: end}, "", seq)
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
