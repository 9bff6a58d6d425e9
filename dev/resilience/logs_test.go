//go:build resilience

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/web"
)

// TestResilienceLogsUnderBackendFaults drives task lookups, request lookups
// and paginated searches while 20% of S3 calls fail. Every answer must be a
// JSON 503 or 504 or a complete 200: a lookup answered 200 lists every log
// of its task or request, and a search followed to its last page, retrying
// failed pages, returns every log exactly once.
func TestResilienceLogsUnderBackendFaults(t *testing.T) {
	bucket := local.LogBuckets[0]
	format, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		t.Fatal(err)
	}
	// Tasks started over the last months, each with logs in several months.
	now := time.Now().UTC()
	byTask := map[string][]string{}
	var tasks []logkey.Task
	for i := range 6 {
		started := now.AddDate(0, -i, -40) // its last log, 8 × 97 h later, is in the past
		id := fmt.Sprintf("fault-api-d%d-%d-0-node%d-us_east_1a", i%2, started.UnixMilli(), i)
		task, err := logkey.ParseTaskID(id)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
		for n := range 8 {
			key := format.Key(logkey.File{Task: task, Filename: fmt.Sprintf("service-%d.log", n), Index: n, Modified: started.Add(time.Duration(n) * 97 * time.Hour)})
			if _, err := local.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("log line\n")}); err != nil {
				t.Fatal(err)
			}
			byTask[id] = append(byTask[id], key)
		}
	}

	cfg, err := sdkconfig.Load(t.Context(), sdkconfig.S3, attemptTimeout)
	if err != nil {
		t.Fatal(err)
	}
	faults := newFaulty(http.DefaultTransport.(*http.Transport).Clone(), 0.2, 4)
	cfg.HTTPClient = &http.Client{Transport: faults, Timeout: attemptTimeout}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	settings := logs.Config{Buckets: []string{bucket}, Format: format, URLTTL: time.Hour, Lookback: 400 * 24 * time.Hour,
		ListTimeout: 5 * time.Second, LinkTimeout: 2 * time.Second, Policy: access.Policy{}}
	h := web.Wrap(logs.New(logstore.New(client, s3.NewPresignClient(client)), settings), web.Options{Logger: quiet})
	srv := httptest.NewServer(checked(t, deadline(h, 15*time.Second)))
	defer srv.Close()

	var mu sync.Mutex
	statuses := map[int]int{}
	tally := func(a answer) answer {
		mu.Lock()
		statuses[a.status]++
		mu.Unlock()
		return a
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				task := tasks[(w+i)%len(tasks)]
				switch i % 3 {
				case 0:
					a := tally(send(t, srv.Client(), "GET", srv.URL+"/api/logs/task/"+task.ID, "", nil))
					checkComplete(t, a, "task "+task.ID, byTask[task.ID])
				case 1:
					a := tally(send(t, srv.Client(), "GET", srv.URL+"/api/logs/request/"+task.RequestID+"?excludeMetadata=true", "", nil))
					var want []string
					for _, keys := range byTask {
						want = append(want, keys...)
					}
					checkComplete(t, a, "request "+task.RequestID, want)
				default:
					got, done := searchAll(t, srv.Client(), srv.URL, task.ID)
					switch {
					case done && !sameKeys(got, byTask[task.ID]):
						violation(t, "search for %s: got %d logs %v, want %d exactly once", task.ID, len(got), got, len(byTask[task.ID]))
					case !done && !subset(got, byTask[task.ID]):
						violation(t, "search for %s: pages so far hold %v, want each of the task's logs at most once", task.ID, got)
					}
					if done {
						tally(answer{status: 200})
					} else {
						tally(answer{status: 503})
					}
				}
			}
		})
	}
	wg.Wait()
	figures.faults.Add(faults.injected())
	t.Logf("faults injected: %d of %d S3 calls (%s)", faults.injected(), faults.calls.Load(), faults.summary())
	t.Logf("lookups and searches (503: abandoned), by answer: %v", statuses)
	if statuses[200] == 0 {
		t.Errorf("got no lookup answered 200, want most to get through the faults")
	}
}

// checkComplete checks that a lookup answered 200 lists exactly want.
func checkComplete(t *testing.T, a answer, what string, want []string) {
	t.Helper()
	if a.status != 200 {
		return // send has checked it is a JSON 503 or 504
	}
	var entries []struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(a.body), &entries); err != nil {
		violation(t, "%s: got %s, want a JSON list", what, a.body)
		return
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Key)
	}
	if !sameKeys(got, want) {
		violation(t, "%s: answered 200 with %d logs, want all %d", what, len(got), len(want))
	}
}

// searchAll follows a search for one task to its last page, three logs a
// page, retrying a page that failed with the same tokens, and reports
// whether it got there. It gives up on a page still failing after the
// retries: once most calls fail, the SDK's retry quota stops retrying and
// the service answers 503s until S3 recovers, which is what it should do.
func searchAll(t *testing.T, client *http.Client, base, taskID string) ([]string, bool) {
	t.Helper()
	var keys []string
	tokens := map[string]any{}
	for page := 0; page < 100; page++ {
		body, _ := json.Marshal(map[string]any{"taskIds": []string{taskID}, "maxPerPage": 3, "listOnly": true, "continuationTokens": tokens})
		a := retrying(t, client, 10, "POST", base+"/api/logs/search", string(body), nil)
		if a.status != 200 {
			return keys, false
		}
		var res struct {
			ContinuationTokens map[string]any `json:"continuationTokens"`
			LastPage           bool           `json:"lastPage"`
			Results            []struct {
				Key string `json:"key"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(a.body), &res); err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Results {
			keys = append(keys, r.Key)
		}
		if res.LastPage {
			return keys, true
		}
		tokens = res.ContinuationTokens
	}
	violation(t, "search for %s: no last page after 100 pages", taskID)
	return keys, false
}

// subset reports whether got holds distinct members of want.
func subset(got, want []string) bool {
	seen := map[string]bool{}
	for _, k := range got {
		if seen[k] || !slices.Contains(want, k) {
			return false
		}
		seen[k] = true
	}
	return true
}

func sameKeys(got, want []string) bool {
	a, b := slices.Clone(got), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
