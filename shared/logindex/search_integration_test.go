//go:build integration

package logindex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// searchPage is a search answer, kept as JSON to compare answers exactly.
type searchPage struct {
	ContinuationTokens map[string]json.RawMessage `json:"continuationTokens"`
	LastPage           bool                       `json:"lastPage"`
	Results            []wireLog                  `json:"results"`
}

func post(t *testing.T, h http.Handler, body map[string]any) searchPage {
	t.Helper()
	raw, _ := json.Marshal(body)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/logs/search", bytes.NewReader(raw)))
	if rec.Code != http.StatusOK {
		t.Fatalf("search %s: got %d %s, want 200", raw, rec.Code, rec.Body)
	}
	var p searchPage
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// countedS3 and countedDynamoDB count the calls the search makes.
type countedS3 struct {
	logstore.API
	lists, heads atomic.Int64
}

func (c *countedS3) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, o ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c.lists.Add(1)
	return c.API.ListObjectsV2(ctx, in, o...)
}

func (c *countedS3) HeadObject(ctx context.Context, in *s3.HeadObjectInput, o ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c.heads.Add(1)
	return c.API.HeadObject(ctx, in, o...)
}

type countedDynamoDB struct {
	logindex.API
	queries atomic.Int64
}

func (c *countedDynamoDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.API.Query(ctx, in, o...)
}

// TestTheSearchReadsFromTheIndexWhatItListsFromTheBuckets uploads the logs
// of a request's tasks to two buckets (and of a neighbouring request),
// hands their events to the indexer, and follows the same searches through
// the listing and through the index: the same pages, token for token.
func TestTheSearchReadsFromTheIndexWhatItListsFromTheBuckets(t *testing.T) {
	ctx := context.Background()
	second := "task-logs-search"
	if err := stack.CreateBuckets(ctx, local.S3, second); err != nil {
		t.Fatal(err)
	}
	buckets := []string{local.LogBuckets[0], second}
	table := logindex.NewTable(local.DynamoDB, stack.LocalName("LogIndexTable"))
	indexer := logindex.NewIndexer(logstore.NewBuckets(local.S3), table, logkey.Format{}, buckets, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)

	now := time.Now()
	started := now.Add(-3 * time.Hour).UnixMilli()
	tasks := []logkey.Task{
		task(t, fmt.Sprintf("srch-d1-%d-0-h1-r1", started)),
		task(t, fmt.Sprintf("srch-d1-%d-1-h2-r1", started)),
		task(t, fmt.Sprintf("srch-d2-%d-0-h1-r1", started)),
		task(t, fmt.Sprintf("srch-api-d1-%d-0-h1-r1", started)),
	}
	seq := 0
	for bi, b := range buckets {
		r := rig{indexer: indexer, table: table, bucket: b, logged: &bytes.Buffer{}}
		for i, tk := range tasks {
			if bi > 0 && tk.RequestID == "srch-api" {
				continue // a request whose logs are all in one bucket
			}
			for j := range 6 {
				from := started + int64(i*60_000+j*1_000+bi*100)
				key := r.upload(t, tk, fmt.Sprintf("file-%d-%d", bi, j), from, from+30_000)
				seq++
				if res := r.send(t, "Object Created", key, fmt.Sprintf("0055AED6DCD9%08X", seq)); res.Outcome != "indexed" {
					t.Fatalf("%s: got %+v, want indexed", key, res)
				}
			}
		}
	}

	s3api := &countedS3{API: local.S3}
	ddb := &countedDynamoDB{API: local.DynamoDB}
	store := logstore.New(s3api, s3.NewPresignClient(local.S3))
	cfg := logs.Config{Buckets: buckets, URLTTL: time.Hour, Lookback: 30 * 24 * time.Hour,
		ListTimeout: routeDeadline, LinkTimeout: routeDeadline}
	quiet := web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	listing := web.Wrap(logs.New(store, cfg), quiet)
	indexed := web.Wrap(logs.New(store, cfg).ReadsIndex(logindex.NewTable(ddb, stack.LocalName("LogIndexTable"))), quiet)

	// Until the listing filters by window, a window covering every log.
	search := func(per int, extra map[string]any) map[string]any {
		body := map[string]any{"maxPerPage": per, "start": started - 1, "end": now.Add(time.Hour).UnixMilli(), "listOnly": true}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	scopes := []map[string]any{
		{"requestsAndDeploys": map[string][]string{"srch": {}}},
		{"requestsAndDeploys": map[string][]string{"srch": {"d2"}}, "taskIds": []string{tasks[0].ID}},
		{"taskIds": []string{tasks[1].ID, tasks[3].ID}, "fileNamePrefixAllowlist": []string{"srch/"}},
		{"requestsAndDeploys": map[string][]string{"srch-api": {}, "srch": {}}},
	}
	for i, scope := range scopes {
		for _, per := range []int{1, 4, 7, 1000} {
			t.Run(fmt.Sprintf("search %d, %d per page", i, per), func(t *testing.T) {
				a, b := search(per, scope), search(per, scope)
				pages := 0
				for {
					want, got := post(t, listing, a), post(t, indexed, b)
					if w, g := mustJSON(t, want), mustJSON(t, got); w != g {
						t.Fatalf("page %d: index answered\n%s\nlisting answered\n%s", pages, g, w)
					}
					if len(got.Results) > per {
						t.Fatalf("page %d: got %d results, want at most %d", pages, len(got.Results), per)
					}
					if pages++; got.LastPage {
						break
					}
					if pages > 200 {
						t.Fatal("the search never ends")
					}
					a["continuationTokens"], b["continuationTokens"] = want.ContinuationTokens, got.ContinuationTokens
				}
				if per == 1000 && pages != 1 {
					t.Errorf("got %d pages, want one: the first page reaches every prefix's end and says so", pages)
				}
			})
		}
	}

	t.Run("tokens of either resume in the other, every log once", func(t *testing.T) {
		seen := map[string]int{}
		body := search(5, scopes[0])
		for i := 0; ; i++ {
			p := post(t, []http.Handler{listing, indexed}[i%2], body)
			for _, l := range p.Results {
				seen[l.Key]++
			}
			if p.LastPage {
				break
			}
			body["continuationTokens"] = p.ContinuationTokens
		}
		if len(seen) != 2*3*6 {
			t.Errorf("got %d logs, want the request's %d in its two buckets", len(seen), 2*3*6)
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("got %s %d times", k, n)
			}
		}
	})

	t.Run("a page with metadata and links costs one Query per prefix and no S3 call", func(t *testing.T) {
		one := cfg
		one.Buckets = buckets[:1]
		h := web.Wrap(logs.New(store, one).ReadsIndex(logindex.NewTable(ddb, stack.LocalName("LogIndexTable"))), quiet)
		s3api.lists.Store(0)
		s3api.heads.Store(0)
		ddb.queries.Store(0)
		p := post(t, h, map[string]any{"requestsAndDeploys": map[string][]string{"srch-api": {}}, "maxPerPage": 4})
		if len(p.Results) != 4 {
			t.Fatalf("got %d results, want 4", len(p.Results))
		}
		for _, l := range p.Results {
			if l.StartTime == nil || l.EndTime == nil || !strings.Contains(l.GetURL, "X-Amz-Signature=") {
				t.Errorf("%s: got times %v, %v and link %q, want the uploaded times and a presigned link", l.Key, l.StartTime, l.EndTime, l.GetURL)
			}
		}
		sources := int64(len(p.ContinuationTokens))
		if q := ddb.queries.Load(); q != sources {
			t.Errorf("got %d Queries, want one per prefix (%d)", q, sources)
		}
		if n := s3api.lists.Load() + s3api.heads.Load(); n != 0 {
			t.Errorf("got %d S3 calls, want none", n)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
