package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// s3Delay is what the log critical path adds to every S3 request, so that
// a lookup's latency divided by it counts the S3 calls made one after the
// other.
const s3Delay = 20 * time.Millisecond

// The pools shared/logs runs its lists and HEADs on (its unexported
// listWorkers and headWorkers), for the prediction printed beside the
// measurement.
const (
	listPool = 16
	headPool = 64
)

// logPath measures the critical path of the log lookups: a task whose
// window spans 12 monthly prefixes holds 50 logs, and every S3 request
// takes 20 ms longer. The depth (latency ÷ 20 ms) is about the number of
// S3 round trips made in sequence, which the transport also counts exactly.
func logPath(ctx context.Context, e *env) ([]row, error) {
	const bucket = "bench-log-path"
	now := time.Now().UTC()
	const months, files = 12, 50
	_, task, err := putTaskLogs(ctx, e, bucket, fmt.Sprintf("bench-path-%d", now.UnixMilli()), months, files, now)
	if err != nil {
		return nil, err
	}

	cfg, err := sdkconfig.Load(ctx, sdkconfig.S3, sdkconfig.S3AttemptTimeout)
	if err != nil {
		return nil, err
	}
	c := newCalls()
	c.count(&cfg)
	next := http.DefaultTransport.(*http.Transport).Clone()
	next.MaxIdleConnsPerHost = headPool // reuse every connection of the pool
	slow := &slowTransport{next: next}
	cfg.HTTPClient = &http.Client{Transport: slow}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	// The listing's path (the log index section measures the index). A
	// task lookup's window runs from the task's start to now whatever
	// LOG_LOOKBACK is; 400 days would also cover a request lookup. The
	// deadlines leave room for the emulator on a loaded machine.
	h, err := logRoutes(ctx, e, client, nil, map[string]string{"LOG_BUCKETS": bucket, "LOG_INDEX": "false",
		"LOG_LOOKBACK": "9600h", "LOG_LIST_TIMEOUT": "10s", "LOG_LINK_TIMEOUT": "10s"})
	if err != nil {
		return nil, err
	}
	reps := e.size(7, 3, 1)
	cases := []struct {
		figure, method, path, body string
		target                     bool
	}{
		{"GET /api/logs/task/{id}, 12 monthly prefixes, 50 logs, with metadata and links", "GET", "/api/logs/task/" + task.ID, "", true},
		{"GET /api/logs/task/{id}?excludeMetadata=true, same task", "GET", "/api/logs/task/" + task.ID + "?excludeMetadata=true", "", false},
		{"POST /api/logs/search, one page of 10, same task", "POST", "/api/logs/search", fmt.Sprintf(`{"taskIds":[%q],"maxPerPage":10}`, task.ID), false},
	}
	var rows []row
	for _, k := range cases {
		slow.delay.Store(0)
		undelayed, _, _, _, err := timeLookup(ctx, h, c, slow, k.method, k.path, k.body, reps)
		if err != nil {
			return nil, err
		}
		slow.delay.Store(int64(s3Delay))
		delayed, chain, counts, text, err := timeLookup(ctx, h, c, slow, k.method, k.path, k.body, reps)
		if err != nil {
			return nil, err
		}
		lists, heads := counts["ListObjectsV2"], counts["HeadObject"]
		r := row{
			figure: k.figure + " (every S3 call +20 ms)",
			value: fmt.Sprintf("%s ÷ 20 ms = depth %.1f (undelayed %s); %s; %d %s in sequence; pools of %d lists and %d HEADs predict %d, a 3-worker pool: %d",
				ms(delayed), float64(delayed)/float64(s3Delay), ms(undelayed), text, chain, plural(int64(chain), "call"),
				listPool, headPool, ceilDiv(lists, listPool)+ceilDiv(heads, headPool), ceilDiv(lists, 3)+ceilDiv(heads, 3)),
		}
		if k.target {
			// The verdict counts the calls made one after another rather
			// than dividing the latency, which also holds MinIO's own time:
			// on a small machine a good part of a 20 ms wave.
			r.target, r.met = "depth ≤ 3", verdict(chain <= 3)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// timeLookup sends one request to h once to warm up, then reps times, and
// returns the median latency, and the longest sequence of S3 calls each
// sent after the one before had answered and the calls by operation of the
// last one.
func timeLookup(ctx context.Context, h http.Handler, c *calls, t *slowTransport, method, path, body string, reps int) (time.Duration, int, map[string]int, string, error) {
	var ds []time.Duration
	var chain int
	var counts map[string]int
	var text string
	for i := range reps + 1 {
		c.take()
		t.spans()
		start := time.Now()
		status, answer := serve(ctx, h, method, path, body)
		d := time.Since(start)
		if status != http.StatusOK {
			return 0, 0, nil, "", fmt.Errorf("%s %s: got %d %.300s, want 200", method, path, status, answer)
		}
		counts, text = c.take()
		if i > 0 {
			ds = append(ds, d)
			chain = max(chain, longestChain(t.spans()))
		}
	}
	return median(ds), chain, counts, text, nil
}

// longestChain returns the length of the longest sequence of spans each of
// which started after the one before it ended: the S3 calls a lookup made
// one after another, however long each took.
func longestChain(spans []span) int {
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	depth := make([]int, len(spans))
	longest := 0
	for i, s := range spans {
		depth[i] = 1
		for j := range i {
			if !spans[j].end.After(s.start) {
				depth[i] = max(depth[i], depth[j]+1)
			}
		}
		longest = max(longest, depth[i])
	}
	return longest
}

func ceilDiv(n, d int) int { return (n + d - 1) / d }

// span is when one S3 call was sent and when its answer came.
type span struct{ start, end time.Time }

// slowTransport holds every request for delay before sending it on, and
// records when each one was sent and answered.
type slowTransport struct {
	next  http.RoundTripper
	delay atomic.Int64 // a time.Duration
	mu    sync.Mutex
	log   []span
}

func (t *slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	if d := time.Duration(t.delay.Load()); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return nil, r.Context().Err()
		}
	}
	resp, err := t.next.RoundTrip(r)
	t.mu.Lock()
	t.log = append(t.log, span{start, time.Now()})
	t.mu.Unlock()
	return resp, err
}

// spans returns the calls recorded since the last call and forgets them.
func (t *slowTransport) spans() []span {
	t.mu.Lock()
	defer t.mu.Unlock()
	got := t.log
	t.log = nil
	return got
}

// putTaskLogs creates bucket on MinIO and uploads n logs of a new task of
// requestID under the default key format, as its uploader writes them: the
// task started at 00:30 UTC on the 1st of the month months-1 months before
// now's, so that its window spans months monthly prefixes, and the logs go
// round-robin into those months, each with starttime and endtime metadata.
// It returns the key format and the task.
func putTaskLogs(ctx context.Context, e *env, bucket, requestID string, months, n int, now time.Time) (logkey.Format, logkey.Task, error) {
	client := stack.S3Client(e.minio.Endpoint, e.minio.AccessKey, e.minio.SecretKey)
	if err := stack.CreateBuckets(ctx, client, bucket); err != nil {
		return logkey.Format{}, logkey.Task{}, err
	}
	format, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		return logkey.Format{}, logkey.Task{}, err
	}
	first := time.Date(now.Year(), now.Month()-time.Month(months-1), 1, 0, 0, 0, 0, time.UTC)
	task, err := logkey.ParseTaskID(fmt.Sprintf("%s-d1-%d-0-node1-us_east_1a", requestID, first.Add(30*time.Minute).UnixMilli()))
	if err != nil {
		return logkey.Format{}, logkey.Task{}, err
	}
	type object struct {
		key string
		at  time.Time
	}
	objects := make([]object, n)
	for i := range objects {
		at := first.AddDate(0, i%months, 0).Add(time.Duration(i/months+1) * time.Hour)
		if !at.Before(now) {
			at = now.Add(-time.Duration(n-i) * time.Second) // early on the 1st: keep logs in the past
		}
		objects[i] = object{format.Key(logkey.File{Task: task, Filename: fmt.Sprintf("service-%d.log", i), Index: i, Modified: at}), at}
	}
	err = inParallel(len(objects), 8, func(i int) error {
		o := objects[i]
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket),
			Key:    aws.String(o.key),
			Body:   strings.NewReader("log line\n"),
			Metadata: map[string]string{
				"starttime": strconv.FormatInt(o.at.Add(-time.Hour).UnixMilli(), 10),
				"endtime":   strconv.FormatInt(o.at.UnixMilli(), 10),
			},
		})
		if err != nil {
			return fmt.Errorf("put s3://%s/%s: %w", bucket, o.key, err)
		}
		return nil
	})
	return format, task, err
}
