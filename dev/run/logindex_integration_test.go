//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/dev/reconcile"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logkey"
)

// The task-log index as make run keeps it: the log buckets' S3 events
// delivered to IndexerFunction's handler, the lookups reading the index.
// No test waits for a delivery: the emulator answers an upload once its
// event is applied.

// indexedStack is make run's server over a stack of the test's own: its
// handler, the stack, and the log it writes.
func indexedStack(t *testing.T) (http.Handler, *stack.Local, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	h, err := api(ctx, local, log)
	if err != nil {
		t.Fatal(err)
	}
	events, err := deliverLogEvents(ctx, local, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reconcile.Buckets(ctx, local); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		events.Close()
		cancel()
		local.Close()
	})
	return h, local, logs
}

// logEntry is what the tests read of a lookup's answer.
type logEntry struct {
	Key       string `json:"key"`
	StartTime *int64 `json:"startTime"`
	EndTime   *int64 `json:"endTime"`
}

func lookup(t *testing.T, h http.Handler, target string) (entries []logEntry, body string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", target, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &entries); err != nil {
		t.Fatalf("GET %s: %v in %s", target, err, rec.Body)
	}
	return entries, rec.Body.String()
}

func keys(entries []logEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Key)
	}
	return out
}

func TestMakeRunIndexesTheLogBucketsFromTheirS3Events(t *testing.T) {
	h, local, logs := indexedStack(t)
	ctx := context.Background()
	env, err := localEnv(local, "LogsFunction")
	if err != nil {
		t.Fatal(err)
	}
	if env("LOG_INDEX") != "true" {
		t.Fatalf("LOG_INDEX is %q, want make run to read the index, as the template's default", env("LOG_INDEX"))
	}
	cfg, err := config.LoadLogs(env)
	if err != nil {
		t.Fatal(err)
	}
	bucket := local.LogBuckets[0]
	now := time.Now().UTC()
	taskID := func(n int) string {
		return "idx-api-v1-" + strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10) + "-" + strconv.Itoa(n) + "-node1-rack1"
	}
	task := func(n int) logkey.Task {
		t.Helper()
		tk, err := logkey.ParseTaskID(taskID(n))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	upload := func(tk logkey.Task, name string, start, end int64) string {
		t.Helper()
		key := cfg.Format.Key(logkey.File{Task: tk, Filename: name, Modified: now})
		_, err := local.S3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("log\n"),
			Metadata: map[string]string{"starttime": strconv.FormatInt(start, 10), "endtime": strconv.FormatInt(end, 10)},
		})
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	remove := func(key string) {
		t.Helper()
		if _, err := local.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	taskLookup := func(n int) string { return "/api/logs/task/" + taskID(n) + "?list=true" }
	start, end := now.Add(-time.Hour).UnixMilli(), now.Add(-time.Minute).UnixMilli()

	t.Run("an uploaded log is found by the lookup right after the upload", func(t *testing.T) {
		tk := task(0)
		key := upload(tk, "stdout", start, end)
		got, body := lookup(t, h, taskLookup(0))
		if len(got) != 1 || got[0].Key != key {
			t.Fatalf("got %s, want %s", body, key)
		}
	})

	t.Run("a deleted log is gone from the lookup right after the delete", func(t *testing.T) {
		tk := task(1)
		key := upload(tk, "stdout", start, end)
		remove(key)
		if got, body := lookup(t, h, taskLookup(1)); len(got) != 0 {
			t.Fatalf("got %s, want nothing", body)
		}
	})

	t.Run("an overwritten log has the times of its new metadata", func(t *testing.T) {
		tk := task(2)
		upload(tk, "stdout", start, end)
		key := upload(tk, "stdout", start+1000, end+1000)
		got, body := lookup(t, h, taskLookup(2))
		if len(got) != 1 || got[0].Key != key || got[0].StartTime == nil || *got[0].StartTime != start+1000 || got[0].EndTime == nil || *got[0].EndTime != end+1000 {
			t.Fatalf("got %s, want %s from %d to %d", body, key, start+1000, end+1000)
		}
	})

	t.Run("a key the format did not write is logged and skipped", func(t *testing.T) {
		before := indexItems(t, local)
		const odd = "not-a-task-log.txt"
		if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(odd), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), `"msg":"skipped a key that LOG_KEY_FORMAT did not write"`) || !strings.Contains(logs.String(), `"key":"`+odd+`"`) {
			t.Errorf("got log %s, want the skipped key named", logs.String())
		}
		if after := indexItems(t, local); after != before {
			t.Errorf("the index holds %d items, want %d as before", after, before)
		}
	})

	t.Run("the listing answers what the index answers", func(t *testing.T) {
		t.Setenv("LOG_INDEX", "false")
		listing, err := logsapp.New(ctx, env, logsapp.Options{S3: local.S3})
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{
			"/api/logs/request/idx-api?list=true",
			"/api/logs/request/idx-api/deploy/v1",
			taskLookup(2),
		} {
			fromIndex, _ := lookup(t, h, target)
			fromListing, _ := lookup(t, listing, target)
			if len(fromIndex) != 2 && !strings.Contains(target, "/task/") {
				t.Errorf("GET %s: got %v, want the two logs left", target, keys(fromIndex))
			}
			a, _ := json.Marshal(fromIndex)
			b, _ := json.Marshal(fromListing)
			if !bytes.Equal(a, b) {
				t.Errorf("GET %s: the index answers %s, the listing %s", target, a, b)
			}
		}
	})
}

// indexItems counts the items of the local index table.
func indexItems(t *testing.T, local *stack.Local) int32 {
	t.Helper()
	out, err := local.DynamoDB.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(stack.LocalName("LogIndexTable")), Select: "COUNT"})
	if err != nil {
		t.Fatal(err)
	}
	return out.Count
}
