package logkey

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

// FuzzParseTaskID checks that a parse either refuses the id with the
// message of docs/behaviour.md "Task logs" or splits it exactly: the parts, joined with '-' in
// the order of the id, give the id back, the numbers are the decimal digits
// found there, and each part is a valid id of its kind, so that the prefixes
// built from them cannot escape their request.
func FuzzParseTaskID(f *testing.F) {
	for _, id := range []string{
		taskID,
		"web-api-d1-1793397600000-0-node1-rack1",
		"foo-bar-D2-007-00-h-r",
		"a-b-9223372036854775807-9223372036854775807-h-r",
		"a-b-9223372036854775808-0-h-r",
		"a-b-+1-0-h-r",
		"a-b--1-0-h-r",
		"-b-1-0-h-r",
		"a-b-1-0-h-",
		"a-b-1-0-h",
		"web/..-d1-1-0-h-r",
		"r%Y-d-1-0-h-r",
		"r\u00e9q-d-1-0-h\u00f4te-r",
		"r\x00-d-1-0-h-r",
		"r\xff-d-1-0-h-r",
		strings.Repeat("r", maxIDLen-13) + "-d-1-0-h-r",
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		task, err := ParseTaskID(id)
		if err != nil {
			if fault.KindOf(err) != fault.KindInvalid || fault.Message(err) != id+" is not a valid task id" {
				t.Fatalf("ParseTaskID(%q): got %v, want invalid %q", id, err, id+" is not a valid task id")
			}
			return
		}
		if task.ID != id {
			t.Errorf("ID: got %q, want the id as given %q", task.ID, id)
		}
		head := task.RequestID + "-" + task.DeployID + "-"
		tail := "-" + task.Host + "-" + task.RackID
		numbers, ok := strings.CutPrefix(id, head)
		if ok {
			numbers, ok = strings.CutSuffix(numbers, tail)
		}
		started, instance, cut := strings.Cut(numbers, "-")
		if !ok || !cut {
			t.Fatalf("ParseTaskID(%q): got %+v, whose parts do not join into the id", id, task)
		}
		if n, err := strconv.ParseInt(started, 10, 64); err != nil || n != task.StartedAt || !allDigits(started) {
			t.Errorf("StartedAt: got %d, want the digits %q", task.StartedAt, started)
		}
		if n, err := strconv.Atoi(instance); err != nil || n != task.InstanceNo || !allDigits(instance) {
			t.Errorf("InstanceNo: got %d, want the digits %q", task.InstanceNo, instance)
		}
		for name, part := range map[string]string{"deploy": task.DeployID, "host": task.Host, "rack": task.RackID} {
			if part == "" || strings.Contains(part, "-") {
				t.Errorf("%s: got %q, want a non-empty part without '-'", name, part)
			}
		}
		if err := CheckRequestID(task.RequestID); err != nil {
			t.Errorf("request id %q of a valid task id: got %v, want valid", task.RequestID, err)
		}
		if err := CheckDeployID(task.DeployID); err != nil {
			t.Errorf("deploy id %q of a valid task id: got %v, want valid", task.DeployID, err)
		}
		if again, err := ParseTaskID(task.ID); err != nil || again != task {
			t.Errorf("parsing the parsed id again: got %+v, %v, want %+v", again, err, task)
		}
	})
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// FuzzFormat generalizes TestKeysAreFoundByTheirLookupsOnly: whatever the
// format and the ids, ParseFormat and Key never panic, and when the ids make
// a valid task id, the key of each of its files is listed by the prefixes
// of its task, its deploy and its request, over any window holding the
// file's time, and never through more than MaxPrefixes prefixes.
func FuzzFormat(f *testing.F) {
	start := ms(2026, 1, 31, 23, 0)
	for _, format := range []string{
		DefaultFormat,
		"%requestId/%Y/%m/%d/%H/%taskId-%index-%s-%filename",
		"%group/%requestId/%taskId/%host/%Y/%m/%d/%index%fileext",
		"%requestId/%deployId/%Y/%m/%taskId/%index-%filename",
		"logs/%requestId/%taskId/%guid-%filename",
		"%requestId/%tag/%H/%m/%taskId",
		"%Y%taskId%d",
		"%deployId/%requestId",
		"%requestId%%",
		"%",
		"",
	} {
		f.Add(format, "foo-bar", "D2", "h1", "", "", "/mnt/sandbox/service.log", start, int64(49*time.Hour/time.Millisecond), 3)
	}
	f.Add(DefaultFormat, "web-api", "d1", "node1", "web", "blue", "a/b.tar.gz", int64(0), int64(0), -1)
	f.Add("%requestId/%Y/%m/%d/%H/%taskId", "r", "d", "h", "", "", "", int64(-62135596800000), int64(1), 0)
	f.Add("%requestId/%Y/%taskId", "r", "d", "h", "", "", "x", int64(math.MaxInt64-1), int64(0), math.MaxInt)
	f.Add("%taskId/%Y", "r%Y", "d", "h", "g", "t", "%filename", start, int64(-1), 0)
	f.Fuzz(func(t *testing.T, format, requestID, deployID, host, group, tag, filename string, started, after int64, index int) {
		kf, err := ParseFormat(format)
		if err != nil {
			return
		}
		if kf.String() != format {
			t.Errorf("String: got %q, want the format as configured %q", kf.String(), format)
		}
		id := taskIDOf(requestID, deployID, started, index, host)
		file := File{Task: Task{ID: id, RequestID: requestID, DeployID: deployID, Host: host}, Group: group, Tag: tag,
			Filename: filename, GUID: deployID, Index: index, Modified: time.UnixMilli(started + after)}
		_ = kf.Key(file) // ids an uploader was given are not validated: Key writes them as they are
		task, err := ParseTaskID(id)
		if err != nil || (group != "" && !validID(group)) || (tag != "" && !validID(tag)) {
			return // no lookup could name this file
		}
		// The file is written a little after its task started: at most a
		// year, so that its task's window stays within MaxPrefixes for the
		// coarser time units.
		at := task.StartedAt + nonNegative(after)%(366*24*3_600_000)
		if at < task.StartedAt || at == math.MaxInt64 {
			return // no window [start, at+1) can hold it
		}
		file.Task, file.Modified = task, time.UnixMilli(at)
		key := kf.Key(file)
		const day = 24 * 3_600_000
		scopes := []struct {
			name  string
			scope Scope
			w     Window
		}{
			{"task, file's own millisecond", TaskScope(task), Window{Start: at, End: at + 1}},
			{"task, from its start", TaskScope(task), TaskWindow(task, nil, new(at+1), at+1)},
			{"deploy, file's own millisecond", DeployScope(task.RequestID, task.DeployID), Window{Start: at, End: at + 1}},
			{"deploy, the day up to it", DeployScope(task.RequestID, task.DeployID), Window{Start: at - day, End: at + 1}},
			{"request, file's own millisecond", RequestScope(task.RequestID), Window{Start: at, End: at + 1}},
		}
		for _, s := range scopes {
			s.scope.Group, s.scope.Tag = group, tag
			if s.scope.level == requestLevel {
				s.scope.Tag = "" // a request lookup never knows a tag
			}
			prefixes, err := kf.Prefixes(s.scope, s.w, MaxPrefixes)
			if err != nil {
				if fault.Message(err) == fault.Message(TooManyPrefixes()) {
					continue // a fine time unit over a long window: refused, never truncated
				}
				t.Fatalf("%s %+v: got %v, want prefixes", s.name, s.w, err)
			}
			if len(prefixes) > MaxPrefixes {
				t.Errorf("%s: got %d prefixes, want at most %d", s.name, len(prefixes), MaxPrefixes)
			}
			if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) }) {
				t.Errorf("%s %+v: key %q is listed by none of %q", s.name, s.w, key, prefixes)
			}
		}
	})
}

// taskIDOf writes a task id the way the scheduler does.
func taskIDOf(requestID, deployID string, started int64, instance int, host string) string {
	return fmt.Sprintf("%s-%s-%d-%d-%s-rack1", requestID, deployID, started, instance, host)
}

// nonNegative maps n onto 0..MaxInt64 without overflow.
func nonNegative(n int64) int64 {
	if n < 0 {
		return -(n + 1) // never overflows
	}
	return n
}
