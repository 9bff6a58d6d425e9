package logs_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/logkey"
)

// Windows filter the logs themselves, exactly (docs/behaviour.md "Task
// logs"): a log belongs to [start, end) when its span overlaps it, however
// many logs its month holds.

// windowLogs uploads, in one month, the logs of one task whose spans the
// test knows, and returns the window [start, end) and the keys of the logs
// inside it with metadata and without (when only the key's %s time and the
// last modification tell).
func windowLogs(f *fakeStore) (start, end int64, withMetadata, withoutMetadata []string) {
	format, _ := logkey.ParseFormat(logkey.DefaultFormat)
	task, _ := logkey.ParseTaskID(taskID)
	day := taskStart.Add(4 * 24 * time.Hour)
	start, end = day.Add(6*time.Hour).UnixMilli(), day.Add(9*time.Hour).UnixMilli()
	ms := func(h float64) *int64 { v := day.Add(time.Duration(h * float64(time.Hour))).UnixMilli(); return &v }
	f.times = map[string][2]*int64{}
	for i, l := range []struct {
		name             string
		written, updated float64 // hours into the day: the key's %s time, the last modification
		start, end       *int64  // metadata
		in, inByKey      bool
	}{
		{"before", 1, 2, ms(1), ms(2), false, false},
		{"ends-at-start", 5, 6, ms(5), ms(6), true, true},
		{"inside", 7, 7.5, ms(7), ms(7.5), true, true},
		{"long-running", 0, 12, ms(0), ms(12), true, true},
		{"written-before-uploaded-after", 3, 10, nil, nil, true, true},
		{"metadata-says-before", 7, 8, ms(1), ms(2), false, true},
		{"starts-at-end", 9, 10, ms(9), ms(10), false, false},
		{"after", 10, 11, ms(10), ms(11), false, false},
	} {
		key := format.Key(logkey.File{Task: task, Filename: l.name, Index: i, Modified: time.UnixMilli(*ms(l.written))})
		f.add("logs", key, time.UnixMilli(*ms(l.updated)))
		f.times[key] = [2]*int64{l.start, l.end}
		if l.in {
			withMetadata = append(withMetadata, key)
		}
		if l.inByKey {
			withoutMetadata = append(withoutMetadata, key)
		}
	}
	return start, end, withMetadata, withoutMetadata
}

func sortedKeys(logs []logEntry) []string {
	var keys []string
	for _, l := range logs {
		keys = append(keys, l.Key)
	}
	return slices.Sorted(slices.Values(keys))
}

func TestWindowsKeepTheLogsWhoseSpanOverlapsThem(t *testing.T) {
	f := &fakeStore{}
	start, end, want, wantByKey := windowLogs(f)
	slices.Sort(want)
	slices.Sort(wantByKey)
	h := handler(t, f, settings("logs"))
	window := fmt.Sprintf("start=%d&end=%d", start, end)
	for _, path := range []string{
		"/api/logs/task/" + taskID + "?" + window,
		"/api/logs/request/web-api?" + window,
		"/api/logs/request/web-api/deploy/d1?" + window,
	} {
		if got := sortedKeys(decode[[]logEntry](t, serve(t, h, "GET", path, ""))); !slices.Equal(got, want) {
			t.Errorf("GET %s:\n got %q\nwant %q", path, got, want)
		}
		if got := sortedKeys(decode[[]logEntry](t, serve(t, h, "GET", path+"&excludeMetadata=true", ""))); !slices.Equal(got, wantByKey) {
			t.Errorf("GET %s&excludeMetadata=true:\n got %q\nwant %q", path, got, wantByKey)
		}
	}
	for _, metadata := range []bool{true, false} {
		got, _ := follow(t, h, map[string]any{"taskIds": []string{taskID}, "start": start, "end": end, "excludeMetadata": !metadata, "maxPerPage": 2})
		slices.Sort(got)
		if w := map[bool][]string{true: want, false: wantByKey}[metadata]; !slices.Equal(got, w) {
			t.Errorf("search with metadata %v:\n got %q\nwant %q", metadata, got, w)
		}
	}
}
