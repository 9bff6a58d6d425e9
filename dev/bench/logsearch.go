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
	// Two sizes, for the slope of what a page reads (fit); the figures
	// are those of the larger, and of 10 million logs extrapolated.
	sizes := []int{e.size(500, 250, 200), e.size(1_500, 500, 300)}
	var at []searched
	for i, n := range sizes {
		reps := 1
		if i == len(sizes)-1 {
			reps = e.size(7, 3, 1)
		}
		s, err := searchAt(ctx, e, n, reps)
		if err != nil {
			return nil, err
		}
		at = append(at, s)
	}
	largest := at[len(at)-1]
	list, index, narrow := largest.list, largest.index, largest.narrow
	perPage := func(value func(searched) float64) line {
		var points []point
		for _, s := range at {
			points = append(points, point{float64(s.logs), value(s)})
		}
		return fit(points...)
	}
	figure := fmt.Sprintf("POST /api/logs/search of a request, page of 100 over %d logs (%d monthly prefixes, default window), listing → index", largest.logs, index.sources)
	return []row{
		{figure: figure + ": backend calls", value: fmt.Sprintf("%d (%s) → %d (%s)", list.calls(), list.text, index.calls(), index.text),
			target: "index ≤ 2 calls, 0 HEADs", met: verdict(index.calls() <= 2 && index.counts["HeadObject"] == 0)},
		{figure: "same: calls in sequence, and the page's latency at 20 ms a call", value: fmt.Sprintf("%d → %d: %s → %s (measured with every call +20 ms: %s → %s)",
			list.chain, index.chain, ms(time.Duration(list.chain)*s3Delay), ms(time.Duration(index.chain)*s3Delay), ms(list.delayed), ms(index.delayed))},
		{figure: "same: items read ÷ returned (keys listed; index items read)", value: fmt.Sprintf("%.0f ÷ %d = %.2f → %.0f ÷ %d = %.2f",
			list.read, list.returned, list.read/float64(list.returned), index.read, index.returned, index.read/float64(index.returned))},
		// moto answers a Query of a secondary index by walking every item of
		// the table, so the index's latency here grows with the table, which
		// DynamoDB's does not.
		{figure: "same: latency on the emulators (MinIO's S3, moto's DynamoDB), undelayed", value: fmt.Sprintf("%s → %s", ms(list.undelayed), ms(index.undelayed))},
		{figure: "index only, the last 7 hours (the newest task's 100 logs, last in the month's key order): calls, in sequence, items read ÷ returned",
			value: fmt.Sprintf("%d (%s), %d in sequence (%s at 20 ms a call), %.0f ÷ %d = %.1f", narrow.calls(), narrow.text, narrow.chain,
				ms(time.Duration(narrow.chain)*s3Delay), narrow.read, narrow.returned, narrow.read/float64(max(narrow.returned, 1)))},
		{figure: fmt.Sprintf("page of 100 over a request of %s logs: backend calls, listing → index", thousands(scaleLogs)),
			value: fmt.Sprintf("%s → %s", perPage(func(s searched) float64 { return float64(s.list.calls()) }).extrapolated(scaleLogs, count),
				perPage(func(s searched) float64 { return float64(s.index.calls()) }).extrapolated(scaleLogs, count))},
		{figure: fmt.Sprintf("page of 100 over a request of %s logs: items read, listing → index; the index's last 7 hours", thousands(scaleLogs)),
			value: fmt.Sprintf("%s → %s; %s", perPage(func(s searched) float64 { return s.list.read }).extrapolated(scaleLogs, count),
				perPage(func(s searched) float64 { return s.index.read }).extrapolated(scaleLogs, count),
				perPage(func(s searched) float64 { return s.narrow.read }).extrapolated(scaleLogs, count))},
	}, nil
}

// pageRead is what one way of reading a search page measured.
type pageRead struct {
	undelayed, delayed time.Duration
	chain, returned    int
	sources            int
	counts             map[string]int
	text               string
	read               float64 // keys listed or index items read, a page
}

func (m pageRead) calls() (n int) {
	for _, k := range m.counts {
		n += k
	}
	return n
}

// searched is a search page over a request of logs logs, by the listing,
// the index, and the index over the last seven hours.
type searched struct {
	logs                int
	list, index, narrow pageRead
}

// searchAt seeds a request of n logs into a bucket of its own and reads a
// search page of it every way, reps times each.
func searchAt(ctx context.Context, e *env, n, reps int) (searched, error) {
	bucket := fmt.Sprintf("bench-log-search-%d", n)
	now := time.Now().UTC()
	requestID := fmt.Sprintf("bench-search-%d", now.UnixMilli())
	logged, err := putRequestLogs(ctx, e, bucket, requestID, n, now)
	if err != nil {
		return searched{}, err
	}

	c := newCalls()
	slow, scfg, dcfg, err := slowBackends(ctx, c)
	if err != nil {
		return searched{}, err
	}
	s3c := s3.NewFromConfig(scfg, func(o *s3.Options) { o.UsePathStyle = true })
	db := dynamodb.NewFromConfig(dcfg)
	listingHandler, indexHandler, err := logLookups(ctx, e, bucket, s3c, db, "10s")
	if err != nil {
		return searched{}, err
	}
	body := fmt.Sprintf(`{"requestsAndDeploys":{%q:[]},"maxPerPage":100}`, requestID)
	measure := func(name string, h http.Handler, body string) (pageRead, error) {
		var m pageRead
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
	s := searched{logs: logged}
	if s.list, err = measure("listing", listingHandler, body); err != nil {
		return s, err
	}
	if s.index, err = measure("index", indexHandler, body); err != nil {
		return s, err
	}
	// The newest task's logs are the last of the month in key order (its
	// deploy's name and start time sort last), so a window of the last
	// seven hours holds exactly them and the index reads the whole month's
	// keys before it to find them.
	recent := fmt.Sprintf(`{"requestsAndDeploys":{%q:[]},"maxPerPage":100,"start":%d}`, requestID, now.Add(-7*time.Hour).UnixMilli())
	s.narrow, err = measure("index, last 7 hours", indexHandler, recent)
	return s, err
}

// putRequestLogs uploads n logs of 100 tasks of requestID to bucket on
// MinIO under the default key format, spread over the 28 days before now,
// each with starttime and endtime metadata, and indexes them as
// IndexerFunction does (scaleLogs), in LogIndexTable on moto. It returns
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
