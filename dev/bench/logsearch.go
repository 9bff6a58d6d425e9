package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logkey"
)

// logSearch compares the search's two ways of reading a page: listing the
// buckets and reading the task-log index. One request holds 10,000 logs
// (2,000 with -quick) over the last 28 days, so that the default 30-day
// window names two monthly prefixes; the logs are in MinIO for the
// listing and in moto's LogIndexTable for the index (written by
// IndexerFunction's handler from each log's event, indexLogs). Every
// backend call is then made 20 ms slower, as in the log critical path, to
// count the calls made one after another.
func logSearch(ctx context.Context, e *env) ([]row, error) {
	const bucket = "bench-log-search"
	n := e.size(10_000, 2_000, 200)
	now := time.Now().UTC()
	requestID := fmt.Sprintf("bench-search-%d", now.UnixMilli())
	logged, err := putRequestLogs(ctx, e, bucket, requestID, n, now)
	if err != nil {
		return nil, err
	}

	c := newCalls()
	slow, scfg, dcfg, err := slowBackends(ctx, c)
	if err != nil {
		return nil, err
	}
	s3c := s3.NewFromConfig(scfg, func(o *s3.Options) { o.UsePathStyle = true })
	db := dynamodb.NewFromConfig(dcfg)
	listingHandler, indexHandler, err := logLookups(ctx, e, bucket, s3c, db, "10s")
	if err != nil {
		return nil, err
	}
	paths := []struct {
		name string
		h    http.Handler
	}{{"listing", listingHandler}, {"index", indexHandler}}
	body := fmt.Sprintf(`{"requestsAndDeploys":{%q:[]},"maxPerPage":100}`, requestID)

	reps := e.size(7, 3, 1)
	type measured struct {
		undelayed, delayed time.Duration
		chain, returned    int
		sources            int
		counts             map[string]int
		text               string
		read               float64 // keys listed or index items read, a page
	}
	measure := func(name string, h http.Handler, body string) (measured, error) {
		var m measured
		status, answer := serve(ctx, h, "POST", "/api/logs/search", body)
		var page struct {
			ContinuationTokens map[string]any `json:"continuationTokens"`
			Results            []any          `json:"results"`
		}
		if err := json.Unmarshal([]byte(answer), &page); status != http.StatusOK || err != nil {
			return m, fmt.Errorf("%s search: got %d %.300s", name, status, answer)
		}
		m.returned, m.sources = len(page.Results), len(page.ContinuationTokens)
		var err error
		slow.delay.Store(0)
		if m.undelayed, _, _, _, err = timeLookup(ctx, h, c, slow, "POST", "/api/logs/search", body, reps); err != nil {
			return m, err
		}
		slow.delay.Store(int64(s3Delay))
		c.listed.Store(0)
		c.scanned.Store(0)
		if m.delayed, m.chain, m.counts, m.text, err = timeLookup(ctx, h, c, slow, "POST", "/api/logs/search", body, reps); err != nil {
			return m, err
		}
		m.read = float64(c.listed.Load()+c.scanned.Load()) / float64(reps+1)
		return m, nil
	}
	var got []measured
	for _, p := range paths {
		m, err := measure(p.name, p.h, body)
		if err != nil {
			return nil, err
		}
		got = append(got, m)
	}
	// The newest task's logs are the last of the month in key order (its
	// deploy's name and start time sort last), so a window of the last
	// seven hours holds exactly them and the index reads the whole month's
	// keys before it to find them.
	recent := fmt.Sprintf(`{"requestsAndDeploys":{%q:[]},"maxPerPage":100,"start":%d}`, requestID, now.Add(-7*time.Hour).UnixMilli())
	narrow, err := measure("index, last 7 hours", paths[1].h, recent)
	if err != nil {
		return nil, err
	}
	list, index := got[0], got[1]
	calls := func(m measured) (n int) {
		for _, k := range m.counts {
			n += k
		}
		return n
	}
	figure := fmt.Sprintf("POST /api/logs/search of a request, page of 100 over %d logs (%d monthly prefixes, default window), listing → index", logged, index.sources)
	return []row{
		{figure: figure + ": backend calls", value: fmt.Sprintf("%d (%s) → %d (%s)", calls(list), list.text, calls(index), index.text),
			target: "index ≤ 2 calls, 0 HEADs", met: verdict(calls(index) <= 2 && index.counts["HeadObject"] == 0)},
		{figure: "same: calls in sequence, and the page's latency at 20 ms a call", value: fmt.Sprintf("%d → %d: %s → %s (measured with every call +20 ms: %s → %s)",
			list.chain, index.chain, ms(time.Duration(list.chain)*s3Delay), ms(time.Duration(index.chain)*s3Delay), ms(list.delayed), ms(index.delayed))},
		{figure: "same: items read ÷ returned (keys listed; index items read)", value: fmt.Sprintf("%.0f ÷ %d = %.2f → %.0f ÷ %d = %.2f",
			list.read, list.returned, list.read/float64(list.returned), index.read, index.returned, index.read/float64(index.returned))},
		// moto answers a Query of a secondary index by walking every item of
		// the table, so the index's latency here grows with the table, which
		// DynamoDB's does not.
		{figure: "same: latency on the emulators (MinIO's S3, moto's DynamoDB), undelayed", value: fmt.Sprintf("%s → %s", ms(list.undelayed), ms(index.undelayed))},
		{figure: "index only, the last 7 hours (the newest task's 100 logs, last in the month's key order): calls, in sequence, items read ÷ returned",
			value: fmt.Sprintf("%d (%s), %d in sequence (%s at 20 ms a call), %.0f ÷ %d = %.1f", calls(narrow), narrow.text, narrow.chain,
				ms(time.Duration(narrow.chain)*s3Delay), narrow.read, narrow.returned, narrow.read/float64(max(narrow.returned, 1)))},
	}, nil
}

// putRequestLogs uploads n logs of 100 tasks of requestID to bucket on
// MinIO under the default key format, spread over the 28 days before now,
// each with starttime and endtime metadata, and indexes them as
// IndexerFunction does (indexLogs), in LogIndexTable on moto. It returns
// how many logs it wrote.
func putRequestLogs(ctx context.Context, e *env, bucket, requestID string, n int, now time.Time) (int, error) {
	client := stack.S3Client(e.minio.Endpoint, e.minio.AccessKey, e.minio.SecretKey)
	if err := stack.CreateBuckets(ctx, client, bucket); err != nil {
		return 0, err
	}
	format, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		return 0, err
	}
	const tasks = 100
	span := 28 * 24 * time.Hour
	err = inParallel(n, 8, func(i int) error {
		t := i % tasks
		started := now.Add(-span + time.Duration(t)*span/tasks)
		task, err := logkey.ParseTaskID(fmt.Sprintf("%s-d%d-%d-%d-node%d-rack1", requestID, t%5, started.UnixMilli(), t, t))
		if err != nil {
			return err
		}
		at := started.Add(time.Duration(i/tasks+1) * time.Minute)
		key := format.Key(logkey.File{Task: task, Filename: "service.log", Index: i / tasks, Modified: at})
		start, end := at.Add(-time.Minute).UnixMilli(), at.UnixMilli()
		_, err = client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("log line\n"),
			Metadata: map[string]string{"starttime": strconv.FormatInt(start, 10), "endtime": strconv.FormatInt(end, 10)},
		})
		if err != nil {
			return fmt.Errorf("log %s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, indexLogs(ctx, e, bucket)
}
