//go:build integration

package apitest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/apitest"
	"github.com/fleetops/fleet/shared/logkey"
)

// getWhole GETs target from the API as a client that does not accept gzip
// (the old scheduler's logfetch) and returns the body, failing on a read
// that does not end cleanly.
func getWhole(t *testing.T, srv *httptest.Server, target string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+target, nil)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: read %d bytes, then %v", target, len(body), err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != "" {
		t.Fatalf("GET %s: got %d %q %.200s, want a plain 200", target, res.StatusCode, res.Header.Get("Content-Encoding"), body)
	}
	if len(body) <= 6<<20 {
		t.Errorf("GET %s: got %d bytes, want more than Lambda's buffered 6 MB for this test to mean anything", target, len(body))
	}
	return res, body
}

// TestTheLocalAPIAnswersListsLargerThanLambdasBufferedLimitWhole serves
// the API as make run does (localapi, streamed) over moto and MinIO, and
// asks, without gzip, for a fleet and a task's logs that each take more
// than Lambda's 6 MB buffered response: every slave and every log arrives.
func TestTheLocalAPIAnswersListsLargerThanLambdasBufferedLimitWhole(t *testing.T) {
	ctx := context.Background()
	s, err := apitest.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	api, err := s.Handler(apitest.None, apitest.Options{Env: map[string]string{"LOG_INDEX": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	// The list must pass 6 MB and span several pages of the table's Scan
	// (1 MB each): 150 slaves of 240 KB take the 36 MB of JSON and the 6 MB
	// of table that 1,500 of 24 KB took, for a tenth of the emulator's
	// writes (a description may take 300 KB, machine.MaxDescription).
	t.Run("a fleet of 150 slaves of 240 KB each", func(t *testing.T) {
		// Reports of 1 MB, as before.
		const n, perReport = 150, 25
		attrs := map[string]string{"note": strings.Repeat("<", 40_000)} // 240 KB as JSON escapes it
		var machines []apitest.Machine
		for i := range n {
			machines = append(machines, apitest.Machine{ID: fmt.Sprintf("stream-%04d", i), Host: fmt.Sprintf("h%04d", i), Rack: "r1", Attributes: attrs})
		}
		for i := 0; i < n; i += perReport {
			if err := s.Report(ctx, time.Time{}, machines[i:min(i+perReport, n)]...); err != nil {
				t.Fatal(err)
			}
		}
		_, body := getWhole(t, srv, "/api/slaves")
		if len(body) < 30<<20 {
			t.Errorf("got %d bytes of list, want 30 MB at least", len(body))
		}
		var got []struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &got); err != nil || len(got) != n {
			t.Fatalf("got %d slaves (%v), want all %d", len(got), err, n)
		}
	})

	// The listing must pass 6 MB and span more than one page of S3's
	// listing (1,000 keys): 1,100 logs of 12 KB of listing each are both,
	// as 1,700 were, for two thirds of the uploads.
	t.Run("a task's 1,100 logs with long names, 13 MB of listing", func(t *testing.T) {
		const n, taskID = 1100, "stream-api-v7-1793491200000-0-node3-us_east_1a"
		format, _ := logkey.ParseFormat(logkey.DefaultFormat)
		task, err := logkey.ParseTaskID(taskID)
		if err != nil {
			t.Fatal(err)
		}
		// MinIO keeps a key's segments as file names, of at most 255 bytes.
		long := strings.Repeat(strings.Repeat("<", 150)+"/", 5) + strings.Repeat("<", 150) + ".log"
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 16)
		for i := range n {
			key := format.Key(logkey.File{Task: task, Filename: "/", Index: i, Modified: time.UnixMilli(task.StartedAt).Add(time.Duration(i) * time.Minute)}) + long
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				_, err := s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(apitest.LogBucket), Key: aws.String(key), Body: strings.NewReader("log\n")})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		_, body := getWhole(t, srv, "/api/logs/task/"+taskID+"?excludeMetadata=true")
		if len(body) < 12<<20 {
			t.Errorf("got %d bytes of listing, want 12 MB at least", len(body))
		}
		var got []json.RawMessage
		if err := json.Unmarshal(body, &got); err != nil || len(got) != n {
			t.Fatalf("got %d logs (%v), want all %d", len(got), err, n)
		}
	})
}
