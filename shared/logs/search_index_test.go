package logs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/web"
)

// The search read from the index: the pages the listing answers, with the
// same tokens, and no listing or HEAD at all.

// keyIndex is the index in memory: every log of a store, each in the
// partitions of its task, deploy and request as format parses its key.
type keyIndex struct {
	format  logkey.Format
	entries []logkey.Entry

	mu    sync.Mutex
	asked []string // "<request>/<deploy>/<task> <bucket>/<prefix>" of every page
}

func indexOf(f *fakeStore, format logkey.Format) *keyIndex {
	x := &keyIndex{format: format}
	for _, objs := range f.buckets {
		for _, o := range objs {
			x.entries = append(x.entries, logkey.Entry{Object: o})
		}
	}
	slices.SortFunc(x.entries, func(a, b logkey.Entry) int { return strings.Compare(a.Key, b.Key) })
	return x
}

func (x *keyIndex) Task(context.Context, string, logkey.Window) ([]logkey.Entry, error) {
	return nil, nil
}

func (x *keyIndex) Request(context.Context, string, logkey.Window) ([]logkey.Entry, error) {
	return nil, nil
}

func (x *keyIndex) Deploy(context.Context, string, string, logkey.Window) ([]logkey.Entry, error) {
	return nil, nil
}

func (x *keyIndex) Landed(context.Context, logkey.Task, int64) ([]logkey.Entry, error) {
	return nil, nil
}

func (x *keyIndex) Page(_ context.Context, of logkey.Task, bucket, prefix, after string, limit int, w logkey.Window) ([]logkey.Entry, bool, error) {
	x.mu.Lock()
	x.asked = append(x.asked, fmt.Sprintf("%s/%s/%s %s/%s", of.RequestID, of.DeployID, of.ID, bucket, prefix))
	x.mu.Unlock()
	return pageOf(x.format, x.entries, of, bucket, prefix, after, limit, w)
}

// pageOf is the index's Page over entries sorted by key: the partition of
// of holds the logs whose key format parses to of's request, deploy and
// task.
func pageOf(format logkey.Format, entries []logkey.Entry, of logkey.Task, bucket, prefix, after string, limit int, w logkey.Window) ([]logkey.Entry, bool, error) {
	var out []logkey.Entry
	for _, e := range entries {
		if e.Bucket != bucket || !strings.HasPrefix(e.Key, prefix) || e.Key <= after {
			continue
		}
		p, ok := format.Parse(e.Key)
		mine := ok && p.RequestID == of.RequestID && (of.DeployID == "" || p.DeployID == of.DeployID) && (of.ID == "" || p.TaskID == of.ID)
		if !mine || !w.Overlaps(e.Span(p.Time)) {
			continue
		}
		if len(out) == limit {
			return out, false, nil
		}
		out = append(out, e)
	}
	return out, true, nil
}

// Page makes fakeIndex an Index: the lookups' tests never search.
func (f *fakeIndex) Page(_ context.Context, of logkey.Task, bucket, prefix, after string, limit int, w logkey.Window) ([]logkey.Entry, bool, error) {
	return pageOf(logkey.Format{}, f.entries, of, bucket, prefix, after, limit, w)
}

// indexedHandler is handler reading index.
func indexedHandler(t testing.TB, store logs.Store, index logs.Index, cfg logs.Config) http.Handler {
	h := logs.New(store, cfg).ReadsIndex(index)
	logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
	return apidoc.MustLoad(t).Recorder(t, web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
}

// searchBody is a search of the web-api request's logs, over a window that
// covers them all.
func searchBody(per int, extra map[string]any) map[string]any {
	body := map[string]any{
		"requestsAndDeploys": map[string][]string{"web-api": {}},
		"maxPerPage":         per,
		"start":              taskStart.Add(-110 * 24 * time.Hour).UnixMilli(),
		"end":                taskStart.Add(60 * 24 * time.Hour).UnixMilli(),
	}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func searchStore() *fakeStore {
	f := &fakeStore{}
	for i := range 6 {
		start := taskStart.Add(time.Duration(i) * -20 * 24 * time.Hour)
		id := fmt.Sprintf("web-api-d%d-%d-%d-node%d-rack1", i%2, start.UnixMilli(), i, i)
		uploaded(f, "logs-a", id, 25+i)
		uploaded(f, "logs-b", id, 10)
	}
	uploaded(f, "logs-a", "other-d1-1-0-h-r", 5)
	uploaded(f, "logs-c", taskID, 5) // a bucket outside LOG_BUCKETS
	return f
}

func TestIndexedSearchAnswersTheListingsPages(t *testing.T) {
	f := searchStore()
	index := indexOf(f, logkey.Format{})
	listing := handler(t, f, settings("logs-a", "logs-b"))
	indexed := indexedHandler(t, f, index, settings("logs-a", "logs-b"))
	for _, per := range []int{1, 7, 64, 1000} {
		t.Run(fmt.Sprintf("%d per page", per), func(t *testing.T) {
			_, want := follow(t, listing, searchBody(per, map[string]any{"listOnly": true, "excludeMetadata": true}))
			_, got := follow(t, indexed, searchBody(per, map[string]any{"listOnly": true, "excludeMetadata": true}))
			if !slices.EqualFunc(got, want, samePage) {
				t.Errorf("index answered %d pages, listing %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
			}
		})
	}
	t.Run("a token of either resumes in the other", func(t *testing.T) {
		all, _ := follow(t, listing, searchBody(1000, map[string]any{"listOnly": true, "excludeMetadata": true}))
		var keys []string
		body := searchBody(5, map[string]any{"listOnly": true, "excludeMetadata": true})
		for i := 0; ; i++ {
			h := []http.Handler{listing, indexed}[i%2]
			raw, _ := json.Marshal(body)
			p := decode[page](t, serve(t, h, "POST", "/api/logs/search", string(raw)))
			for _, e := range p.Results {
				keys = append(keys, e.Key)
			}
			if p.LastPage {
				break
			}
			body["continuationTokens"] = p.ContinuationTokens
		}
		slices.Sort(keys)
		if slices.Sort(all); !slices.Equal(keys, all) {
			t.Errorf("got %d keys switching at every page, want each of the %d once", len(keys), len(all))
		}
	})
}

func TestIndexedSearchListsNothingAndHeadsNothing(t *testing.T) {
	f := searchStore()
	uploaded(f, "logs-a", taskID, 5)
	index := indexOf(f, logkey.Format{})
	start, end := taskStart.UnixMilli()+1, taskStart.Add(48*time.Hour).UnixMilli()
	for i := range index.entries {
		index.entries[i].Start, index.entries[i].End = &start, &end
	}
	store := &recordingStore{fakeStore: &fakeStore{}}
	h := indexedHandler(t, store, index, settings("logs-a"))
	keys, pages := follow(t, h, map[string]any{"taskIds": []string{taskID}, "maxPerPage": 3})
	if len(keys) == 0 {
		t.Fatal("got nothing: the test searches nothing the index holds")
	}
	for _, p := range pages {
		for _, e := range p.Results {
			if e.StartTime == nil || *e.StartTime != start || !strings.Contains(e.GetURL, e.Key) {
				t.Errorf("%s: got startTime %v and link %q, want the indexed start and a link", e.Key, e.StartTime, e.GetURL)
			}
		}
	}
	if len(store.listed) != 0 || store.heads.Load() != 0 {
		t.Errorf("listed %q and made %d HEADs, want neither", store.listed, store.heads.Load())
	}
	for _, a := range index.asked {
		if !strings.HasPrefix(a, "web-api/d1/"+taskID+" logs-a/") {
			t.Errorf("asked %s, want only the task's partition in the configured bucket", a)
		}
	}
}

func TestIndexedSearchReadsThePartitionTheFormatWrites(t *testing.T) {
	task, _ := logkey.ParseTaskID(taskID)
	for _, c := range []struct{ format, want string }{
		{logkey.DefaultFormat, "web-api/d1/" + taskID},
		{"%requestId/%deployId/%Y/%m/%host-%index-%filename", "web-api/d1/"},
		{"%requestId/%Y/%m/%host-%index-%filename", "web-api//"},
	} {
		t.Run(c.format, func(t *testing.T) {
			format, err := logkey.ParseFormat(c.format)
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeStore{}
			mine := format.Key(logkey.File{Task: task, Filename: "a", Modified: taskStart.Add(time.Hour)})
			f.add("logs-a", mine, taskStart.Add(time.Hour))
			f.add("logs-a", format.Key(logkey.File{Task: logkey.Task{ID: other, RequestID: "web-api", DeployID: "d2", Host: "node2"}, Filename: "a", Modified: taskStart.Add(time.Hour)}), taskStart.Add(time.Hour))
			index := indexOf(f, format)
			cfg := settings("logs-a")
			cfg.Format = format
			keys, _ := follow(t, indexedHandler(t, f, index, cfg), map[string]any{"taskIds": []string{taskID}})
			if !slices.Equal(keys, []string{mine}) {
				t.Errorf("got %q, want the task's log %q only", keys, mine)
			}
			for _, a := range index.asked {
				if !strings.HasPrefix(a, c.want+" ") {
					t.Errorf("asked %s, want partition %s", a, c.want)
				}
			}
		})
	}
}

// A format that writes %taskId before %requestId puts request web-api's
// keys under request web's prefix: the prefix kept lists for both, and
// each one's partition answers its own logs.
func TestIndexedSearchMergesThePartitionsOfOnePrefix(t *testing.T) {
	format, err := logkey.ParseFormat("%Y/%m/%taskId_%index-%filename")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeStore{}
	var want []string
	for i, id := range []string{"web-d1-1-0-h-r", "web-api-d1-1-0-h-r", "web-d2-1-0-h-r", "web-api-d3-1-0-h-r", "web-zz-1-0-h-r"} {
		task, _ := logkey.ParseTaskID(id)
		for j := range 3 {
			at := taskStart.Add(time.Duration(i*3+j) * time.Minute)
			key := format.Key(logkey.File{Task: task, Filename: "f", Index: j, Modified: at})
			f.add("logs-a", key, at)
			want = append(want, key)
		}
	}
	slices.Sort(want)
	cfg := settings("logs-a")
	cfg.Format = format
	for _, per := range []int{1, 2, 4, 100} {
		t.Run(fmt.Sprintf("%d per page", per), func(t *testing.T) {
			index := indexOf(f, format)
			keys, _ := follow(t, indexedHandler(t, f, index, cfg), map[string]any{"requestsAndDeploys": map[string][]string{"web": {}, "web-api": {"d1", "d3"}}, "maxPerPage": per, "listOnly": true})
			if slices.Sort(keys); !slices.Equal(keys, want) {
				t.Errorf("got %q, want each of %q once", keys, want)
			}
		})
	}
}

func samePage(a, b page) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func firstDifference(got, want []page) string {
	for i := range min(len(got), len(want)) {
		if !samePage(got[i], want[i]) {
			x, _ := json.Marshal(got[i])
			y, _ := json.Marshal(want[i])
			return fmt.Sprintf("page %d: index %s\nlisting %s", i, x, y)
		}
	}
	return "one is longer"
}

// stuckIndex answers no page before its context ends.
type stuckIndex struct{ keyIndex }

func (s *stuckIndex) Page(ctx context.Context, _ logkey.Task, _, _, _ string, _ int, _ logkey.Window) ([]logkey.Entry, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

func TestAnIndexedSearchPastItsListTimeoutIs504(t *testing.T) {
	cfg := settings("logs-a")
	cfg.ListTimeout = 10 * time.Millisecond
	h := indexedHandler(t, &fakeStore{}, &stuckIndex{}, cfg)
	serve(t, h, "POST", "/api/logs/search", `{"taskIds":["`+taskID+`"]}`).wantError(t, http.StatusGatewayTimeout, "Timed out waiting for the log index for search")
}

func TestADeploysPrefixIsReadFromItsPartitionAloneWhenItSwallowsItsTasks(t *testing.T) {
	f := searchStore()
	uploaded(f, "logs-a", taskID, 5)
	index := indexOf(f, logkey.Format{})
	h := indexedHandler(t, f, index, settings("logs-a"))
	keys, _ := follow(t, h, map[string]any{"requestsAndDeploys": map[string][]string{"web-api": {"d1"}}, "taskIds": []string{taskID, other}, "maxPerPage": 1000})
	if len(keys) == 0 {
		t.Fatal("got nothing: the test searches nothing the index holds")
	}
	for _, a := range index.asked {
		// The deploy's prefix swallows its task's; the other task's is its own.
		if !strings.HasPrefix(a, "web-api/d1/ ") && !strings.HasPrefix(a, "web-api/d2/"+other+" ") {
			t.Errorf("asked %s, want the deploy's partition, or the other task's for its own prefix", a)
		}
	}
}
