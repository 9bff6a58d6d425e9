// Command seedlogs uploads a realistic set of task logs to the local log
// bucket, the way the task uploader writes them: keys from the template's
// LOG_KEY_FORMAT, user metadata starttime and endtime, uploaded with the S3
// transfer manager (feature/s3/transfermanager, which supersedes the
// deprecated feature/s3/manager). It needs the emulator `make run` started (it refuses to
// seed one it would stop again on exit).
//
// make run indexes each log from its S3 event before its upload returns
// (dev/motoserver.py); seedlogs then waits until no event is left queued,
// so that it ends with the bucket indexed, and fails if nothing delivers
// the events (an emulator that make run did not set up).
//
// The set: requests web-api (deploys v41 and v42, and v43, whose tasks
// started hours ago and still run, so that the last hour has logs) and
// batch-etl (deploy b20261101), with tasks started over the last 60 days,
// and the task of the sample events,
// web-api-v42-1793491200000-0-node17-us_east_1a.
//
// Seeding is idempotent. The set is laid out from one instant, that of the
// first seeding, which the sample task's first log carries (metadata
// seedtime): running again lays out the same keys from it and uploads only
// those missing, so a second run adds nothing and says so, and one after an
// interrupted run completes the set. The emulator holds its data in memory
// only: a new make run starts empty and is seeded afresh, from its own now.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logkey"
)

// sampleTask is the task of events/logs-task.json and events/logs-search.json.
const sampleTask = "web-api-v42-1793491200000-0-node17-us_east_1a"

// seedTimeKey is the user metadata that holds the instant a set is laid
// out from, in epoch ms.
const seedTimeKey = "seedtime"

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "seedlogs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	local, err := stack.UpWith(ctx, stack.Addr(), stack.Options{Command: "make seed-logs", Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer local.Close()
	if local.Moto.Started {
		return fmt.Errorf("nothing runs on %s: start the local stack first (make run)", local.Moto.Endpoint)
	}
	env, err := local.Template.FunctionEnv("LogsFunction", stack.LocalName)
	if err != nil {
		return err
	}
	cfg, err := config.LoadLogs(func(name string) string { return env[name] })
	if err != nil {
		return err
	}
	bucket := cfg.Buckets[0]
	r, err := seed(ctx, local.S3, bucket, cfg.Format, time.Now().UTC())
	if err != nil {
		return err
	}
	if r.added == 0 {
		fmt.Printf("s3://%s already holds the %d task logs seeded at %s: nothing added\n", bucket, r.total, r.at.Format(time.RFC3339))
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := local.WaitLogEvents(waitCtx); err != nil {
		return fmt.Errorf("uploaded %d task logs to s3://%s, but they are not indexed: %w", r.added, bucket, err)
	}
	if r.added < r.total {
		fmt.Printf("uploaded the %d task logs missing of the %d seeded at %s to s3://%s (format %s), indexed\n", r.added, r.total, r.at.Format(time.RFC3339), bucket, cfg.Format)
	} else {
		fmt.Printf("uploaded %d task logs to s3://%s (format %s), indexed\n", r.added, bucket, cfg.Format)
	}
	fmt.Printf("try: curl http://127.0.0.1:3000/api/logs/task/%s\n", sampleTask)
	return nil
}

// seeding is what seed did: the instant the set is laid out from, its
// size, and how many of its logs this run uploaded.
type seeding struct {
	at           time.Time
	total, added int
}

// seed uploads to bucket the logs of the set laid out from the first
// seeding's instant (now when the bucket holds none) that it does not hold
// yet. The sample task's first log, which carries that instant, goes first,
// so that a run cut short after it is completed by the next from the same
// instant.
func seed(ctx context.Context, client *s3.Client, bucket string, format logkey.Format, now time.Time) (seeding, error) {
	first := func(at time.Time) file { return files(tasks(at)[0], at)[0] }
	r := seeding{at: now}
	head, err := headLog(ctx, client, bucket, format.Key(first(now).File))
	if err != nil {
		return r, err
	}
	rerun := head != nil
	if rerun {
		ms, err := strconv.ParseInt(head.Metadata[seedTimeKey], 10, 64)
		if err != nil {
			return r, fmt.Errorf("s3://%s/%s holds the sample task's first log, but not the instant it was seeded at (metadata %s): remove the bucket's seeded logs or restart make run", bucket, format.Key(first(now).File), seedTimeKey)
		}
		r.at = time.UnixMilli(ms).UTC()
	}
	uploader := transfermanager.New(client)
	for _, t := range tasks(r.at) {
		for _, f := range files(t, r.at) {
			r.total++
			key := format.Key(f.File)
			if rerun {
				held, err := headLog(ctx, client, bucket, key)
				if err != nil {
					return r, err
				}
				if held != nil {
					continue
				}
			}
			_, err := uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{
				Bucket:      aws.String(bucket),
				Key:         aws.String(key),
				Body:        bytes.NewReader(f.body),
				ContentType: aws.String(f.contentType),
				Metadata: map[string]string{
					"starttime": strconv.FormatInt(f.start, 10),
					"endtime":   strconv.FormatInt(f.end, 10),
					seedTimeKey: strconv.FormatInt(r.at.UnixMilli(), 10),
				},
			})
			if err != nil {
				return r, fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
			}
			r.added++
		}
	}
	return r, nil
}

// headLog returns the metadata of a log, or nil when the bucket does not
// hold it.
func headLog(ctx context.Context, client *s3.Client, bucket, key string) (*s3.HeadObjectOutput, error) {
	out, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var missing *types.NotFound
	if errors.As(err, &missing) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("head s3://%s/%s: %w", bucket, key, err)
	}
	return out, nil
}

// tasks returns the tasks of the set laid out from now: the sample task
// first, then a service restarted every 12 days on three hosts (deploys v41
// and v42) and once more, v43, three hours before now and still running,
// and a daily batch job.
func tasks(now time.Time) []logkey.Task {
	ids := []string{sampleTask}
	service := func(deploy string, started time.Time) {
		for i := range 3 {
			at := started.Add(time.Duration(i) * time.Hour)
			ids = append(ids, fmt.Sprintf("web-api-%s-%d-%d-node%d-us_east_1%c", deploy, at.UnixMilli(), i, 10+i, 'a'+i))
		}
	}
	for day := 60; day > 0; day -= 12 {
		deploy := "v41"
		if day < 30 {
			deploy = "v42"
		}
		service(deploy, now.Add(-time.Duration(day)*24*time.Hour))
	}
	service("v43", now.Add(-5*time.Hour))
	for day := 20; day > 0; day-- {
		started := now.Truncate(24 * time.Hour).Add(-time.Duration(day)*24*time.Hour + 2*time.Hour)
		ids = append(ids, fmt.Sprintf("batch-etl-b20261101-%d-0-node%d-us_east_1b", started.UnixMilli(), 30+day%4))
	}
	var out []logkey.Task
	for _, id := range ids {
		t, err := logkey.ParseTaskID(id)
		if err != nil {
			panic(err) // the ids above are well formed
		}
		out = append(out, t)
	}
	return out
}

type file struct {
	logkey.File
	body        []byte
	contentType string
	start, end  int64
}

// files returns what the uploader writes for a task: a rotated service log
// per day it ran (gzipped, as rotation leaves it), then its stdout and
// stderr once it ended (or now, for the ones still running).
func files(t logkey.Task, now time.Time) []file {
	started := time.UnixMilli(t.StartedAt).UTC()
	ended := started.Add(11 * 24 * time.Hour)
	if ended.After(now) {
		ended = now
	}
	if strings.HasPrefix(t.RequestID, "batch-") {
		ended = started.Add(47 * time.Minute)
	}
	var out []file
	index := 0
	for from := started; from.Before(ended); from = from.Add(24 * time.Hour) {
		to := from.Add(24 * time.Hour)
		if to.After(ended) {
			to = ended
		}
		out = append(out, file{
			File:        logkey.File{Task: t, Filename: "service.log.gz", Index: index, Modified: to},
			body:        gzipped(logLines(t, from, to)),
			contentType: "application/gzip",
			start:       from.UnixMilli(), end: to.UnixMilli(),
		})
		index++
	}
	for _, name := range []string{"stdout", "stderr"} {
		out = append(out, file{
			File:        logkey.File{Task: t, Filename: name, Index: index, Modified: ended},
			body:        logLines(t, started, ended),
			contentType: "text/plain; charset=utf-8",
			start:       started.UnixMilli(), end: ended.UnixMilli(),
		})
		index++
	}
	return out
}

func logLines(t logkey.Task, from, to time.Time) []byte {
	var b bytes.Buffer
	step := max(to.Sub(from)/20, time.Second)
	for i, at := 0, from; at.Before(to); i, at = i+1, at.Add(step) {
		// Now and then an error, so that there is something to search for.
		if i%7 == 6 {
			fmt.Fprintf(&b, "%s ERROR [%s] %s instance %d on %s: upstream timeout after %d ms\n",
				at.Format(time.RFC3339), t.DeployID, t.RequestID, t.InstanceNo, t.Host, 1000+at.Unix()%4000)
			continue
		}
		fmt.Fprintf(&b, "%s INFO [%s] %s instance %d on %s: handled %d requests\n",
			at.Format(time.RFC3339), t.DeployID, t.RequestID, t.InstanceNo, t.Host, at.Unix()%997)
	}
	return b.Bytes()
}

func gzipped(p []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write(p)
	_ = w.Close()
	return b.Bytes()
}
