//go:build integration

package logindex_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// wireLog is a log as the lookups answer it.
type wireLog struct {
	Key          string `json:"key"`
	LastModified int64  `json:"lastModified"`
	Size         int64  `json:"size"`
	StartTime    *int64 `json:"startTime"`
	EndTime      *int64 `json:"endTime"`
	GetURL       string `json:"getUrl"`
	DownloadURL  string `json:"downloadUrl"`
}

// get asks h for path and decodes the logs it answers.
func get(t *testing.T, h http.Handler, path string) []wireLog {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: got %d %s, want 200", path, rec.Code, rec.Body)
	}
	var out []wireLog
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTheIndexAnswersWhatTheListingAnswers uploads the logs of two deploys
// of a request (and of a neighbouring request), hands their events to the
// indexer, and asks the same lookups of the listing path and of the index:
// same logs, same fields, same order.
func TestTheIndexAnswersWhatTheListingAnswers(t *testing.T) {
	r := newRig(t)
	now := time.Now()
	started := now.Add(-2 * time.Hour).UnixMilli()
	tasks := []logkey.Task{
		task(t, fmt.Sprintf("same-d1-%d-0-h1-r1", started)),
		task(t, fmt.Sprintf("same-d1-%d-1-h2-r1", started)),
		task(t, fmt.Sprintf("same-d2-%d-0-h1-r1", started)),
		task(t, fmt.Sprintf("same-bar-d1-%d-0-h1-r1", started)),
	}
	seq := 0
	for i, tk := range tasks {
		for j, name := range []string{"stdout", "stderr"} {
			from := started + int64(i*60_000+j*1_000)
			key := r.upload(t, tk, name, from, from+30_000)
			seq++
			r.send(t, "Object Created", key, fmt.Sprintf("0055AED6DCD9%08X", seq))
		}
	}

	store := logstore.New(local.S3, s3.NewPresignClient(local.S3))
	cfg := logs.Config{Buckets: local.LogBuckets, URLTTL: time.Hour, Lookback: 30 * 24 * time.Hour,
		ListTimeout: routeDeadline, LinkTimeout: routeDeadline}
	quiet := web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	listing := web.Wrap(logs.New(store, cfg), quiet)
	indexed := web.Wrap(logs.New(store, cfg).ReadsIndex(r.table), quiet)

	for _, path := range []string{
		"/api/logs/task/" + tasks[0].ID,
		"/api/logs/request/same",
		"/api/logs/request/same-bar",
		"/api/logs/request/same/deploy/d1",
		"/api/logs/request/same/deploy/d2",
		"/api/logs/request/same?maxPerPage=3",
		"/api/logs/request/same/deploy/d1?excludeMetadata=true",
	} {
		t.Run(path, func(t *testing.T) {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			want := get(t, listing, path+sep+"list=true")
			got := get(t, indexed, path+sep+"list=true")
			if len(want) == 0 {
				t.Fatal("the listing found nothing: the test uploads nothing it looks up")
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("index answered\n%+v\nlisting answered\n%+v", got, want)
			}
			for _, l := range get(t, indexed, path) {
				if !strings.Contains(l.GetURL, "X-Amz-Signature=") || !strings.Contains(l.DownloadURL, "X-Amz-Signature=") {
					t.Errorf("%s: got links %q, %q, want both presigned", l.Key, l.GetURL, l.DownloadURL)
				}
			}
		})
	}

	t.Run("a window narrower than a month is exact on both", func(t *testing.T) {
		// The second task's logs start a minute after the first's.
		from, to := started+60_000, started+61_000
		path := fmt.Sprintf("/api/logs/request/same/deploy/d1?list=true&start=%d&end=%d", from, to)
		got := get(t, indexed, path)
		if len(got) != 1 || !strings.Contains(got[0].Key, tasks[1].ID+"_") {
			t.Errorf("index: got %+v, want the second task's stdout only", got)
		}
		if listed := get(t, listing, path); !reflect.DeepEqual(listed, got) {
			t.Errorf("listing answered\n%+v\nindex answered\n%+v", listed, got)
		}
	})
}
