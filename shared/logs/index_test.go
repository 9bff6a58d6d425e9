package logs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/web"
)

// fakeIndex answers every lookup with its entries and records the windows
// it was asked.
type fakeIndex struct {
	entries []logkey.Entry
	asked   []string
}

func (f *fakeIndex) answer(what string, w logkey.Window) []logkey.Entry {
	f.asked = append(f.asked, what)
	var out []logkey.Entry
	for _, e := range f.entries {
		if e.LastModified >= w.Start && e.LastModified < w.End {
			out = append(out, e)
		}
	}
	return out
}

func (f *fakeIndex) Task(_ context.Context, id string, w logkey.Window) ([]logkey.Entry, error) {
	return f.answer("task "+id, w), nil
}

func (f *fakeIndex) Request(_ context.Context, id string, w logkey.Window) ([]logkey.Entry, error) {
	return f.answer("request "+id, w), nil
}

func (f *fakeIndex) Deploy(_ context.Context, req, dep string, w logkey.Window) ([]logkey.Entry, error) {
	return f.answer("deploy "+req+"/"+dep, w), nil
}

func (f *fakeIndex) Landed(_ context.Context, of logkey.Task, since int64) ([]logkey.Entry, error) {
	return f.answer(fmt.Sprintf("landed %+v", of), logkey.Window{Start: since, End: 1 << 62}), nil
}

func indexedRoutes(store logs.Store, index logs.Index) http.Handler {
	h := logs.New(store, settings("logs-a")).ReadsIndex(index)
	logs.SetClock(h, func() time.Time { return taskStart.Add(5 * 24 * time.Hour) })
	return web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func TestIndexedLookupsListNothingAndHeadNothing(t *testing.T) {
	at := taskStart.Add(time.Hour).UnixMilli()
	start, end := at-60_000, at
	k1, k2 := taskKey("k1", at), taskKey("k2", at)
	index := &fakeIndex{entries: []logkey.Entry{
		{Object: logkey.Object{Bucket: "logs-a", Key: k1, LastModified: at, Size: 3}, Start: &start, End: &end},
		{Object: logkey.Object{Bucket: "elsewhere", Key: k2, LastModified: at, Size: 3}},
	}}
	store := newRecordingStore()
	h := indexedRoutes(store, index)
	for _, path := range []string{
		// Ending before the last minute: the newest prefix is not listed.
		fmt.Sprintf("/api/logs/task/%s?end=%d", taskID, taskStart.Add(2*time.Hour).UnixMilli()),
		"/api/logs/request/web-api?excludeMetadata=true",
		"/api/logs/request/web-api/deploy/d1?list=true",
	} {
		r := serve(t, h, http.MethodGet, path, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: got %d %s", path, r.status, r.body)
		}
		got := decode[[]logEntry](t, r)
		if len(got) != 1 || got[0].Key != k1 {
			t.Fatalf("%s: got %+v, want k1 only (elsewhere is not a configured bucket)", path, got)
		}
		if metadata := !strings.Contains(path, "excludeMetadata=true"); (got[0].StartTime != nil) != metadata || metadata && *got[0].StartTime != start {
			t.Errorf("%s: got startTime %v, want the indexed start only when metadata is asked for", path, got[0].StartTime)
		}
	}
	if store.lists.Load() != 0 || store.heads.Load() != 0 {
		t.Errorf("got %d lists and %d HEADs, want none: the index holds the times", store.lists.Load(), store.heads.Load())
	}
	if len(index.asked) != 3 {
		t.Errorf("got %q, want one query per lookup", index.asked)
	}
	bad := serve(t, h, http.MethodGet, "/api/logs/request/web-api/deploy/v-42", "")
	bad.wantJSONError(t, http.StatusBadRequest, "v-42 is not a valid deploy id")
	if len(index.asked) != 3 {
		t.Errorf("got %q, want no query for an invalid id", index.asked)
	}
}

func TestTaskLookupsOnTheIndexAlsoListTheNewestPrefix(t *testing.T) {
	now := taskStart.Add(5 * 24 * time.Hour)
	f := &fakeStore{}
	format, _ := logkey.ParseFormat(logkey.DefaultFormat)
	task, _ := logkey.ParseTaskID(taskID)
	put := func(name string, at time.Time) logkey.Object {
		key := format.Key(logkey.File{Task: task, Filename: name, Modified: at})
		f.add("logs-a", key, at)
		return logkey.Object{Bucket: "logs-a", Key: key, LastModified: at.UnixMilli(), Size: int64(len(key))}
	}
	indexed := put("indexed.log", now.Add(-time.Hour))
	uploading := put("just-uploaded.log", now.Add(-2*time.Second)) // its event is not applied yet
	index := &fakeIndex{entries: []logkey.Entry{{Object: indexed}}}
	h := indexedRoutes(f, index)

	got := sortedKeys(decode[[]logEntry](t, serve(t, h, http.MethodGet, "/api/logs/task/"+taskID, "")))
	if want := slices.Sorted(slices.Values([]string{indexed.Key, uploading.Key})); !slices.Equal(got, want) {
		t.Errorf("task lookup up to now: got %q, want the indexed log and the one uploaded seconds ago %q", got, want)
	}
	if f.lists.Load() != 1 {
		t.Errorf("got %d lists, want 1: the task's newest prefix only", f.lists.Load())
	}
	if f.heads.Load() != 1 {
		t.Errorf("got %d HEADs, want 1: the log the index does not hold", f.heads.Load())
	}

	lists := f.lists.Load()
	got = sortedKeys(decode[[]logEntry](t, serve(t, h, http.MethodGet, "/api/logs/request/web-api", "")))
	if !slices.Equal(got, []string{indexed.Key}) || f.lists.Load() != lists {
		t.Errorf("request lookup: got %q and %d more lists, want the indexed log only and no list (its newest prefix is the whole month)", got, f.lists.Load()-lists)
	}
}

// failingLists is S3 whose lists fail.
type failingLists struct{ *fakeStore }

func (failingLists) All(context.Context, string, string) ([]logkey.Object, error) {
	return nil, fault.Unavailable("S3 is busy")
}

func TestATaskLookupOnTheIndexStandsWhenItsNewestPrefixCannotBeListed(t *testing.T) {
	at := taskStart.Add(time.Hour).UnixMilli()
	k1 := taskKey("k1", at)
	index := &fakeIndex{entries: []logkey.Entry{{Object: logkey.Object{Bucket: "logs-a", Key: k1, LastModified: at, Size: 3}}}}
	r := serve(t, indexedRoutes(failingLists{&fakeStore{}}, index), http.MethodGet, "/api/logs/task/"+taskID, "")
	if got := decode[[]logEntry](t, r); len(got) != 1 || got[0].Key != k1 {
		t.Errorf("got %+v, want the index's k1: the newest prefix only adds to it", got)
	}
}

// taskKey is the key the uploader of taskID writes its file name under at
// at (epoch ms), in the default format.
func taskKey(name string, at int64) string {
	task, _ := logkey.ParseTaskID(taskID)
	return (logkey.Format{}).Key(logkey.File{Task: task, Filename: name, Modified: time.UnixMilli(at)})
}

func TestLandedSinceAnswersWhatLandedWhateverItsSpan(t *testing.T) {
	now := taskStart.Add(5 * 24 * time.Hour)
	since := now.Add(-10 * time.Minute)
	f := &fakeStore{times: map[string][2]*int64{}}
	old := taskStart.Add(time.Hour).UnixMilli()
	late := taskKey("late.log", old) // its span ended days ago; it landed now
	f.add("logs-a", late, now.Add(-time.Minute))
	f.times[late] = [2]*int64{&old, &old}
	earlier := taskKey("earlier.log", old)
	f.add("logs-a", earlier, now.Add(-time.Hour))
	index := &fakeIndex{entries: []logkey.Entry{
		{Object: logkey.Object{Bucket: "logs-a", Key: late, LastModified: now.Add(-time.Minute).UnixMilli()}, Start: &old, End: &old},
		{Object: logkey.Object{Bucket: "logs-a", Key: earlier, LastModified: now.Add(-time.Hour).UnixMilli()}},
	}}
	for path, h := range map[string]http.Handler{"listing": routes(f, settings("logs-a")), "index": indexedRoutes(&fakeStore{}, index)} {
		for _, lookup := range []string{"/api/logs/task/" + taskID, "/api/logs/request/web-api", "/api/logs/request/web-api/deploy/d1"} {
			got := sortedKeys(decode[[]logEntry](t, serve(t, h, http.MethodGet, fmt.Sprintf("%s?landedSince=%d", lookup, since.UnixMilli()), "")))
			if !slices.Equal(got, []string{late}) {
				t.Errorf("%s on the %s: got %q, want the late upload only", lookup, path, got)
			}
		}
		bad := serve(t, h, http.MethodGet, fmt.Sprintf("/api/logs/request/web-api?landedSince=%d&start=%d", since.UnixMilli(), since.UnixMilli()), "")
		bad.wantJSONError(t, http.StatusBadRequest, "landedSince answers what landed since")
	}
	if !slices.ContainsFunc(index.asked, func(a string) bool { return strings.HasPrefix(a, "landed ") }) {
		t.Errorf("got %q, want the index asked what landed", index.asked)
	}
}
