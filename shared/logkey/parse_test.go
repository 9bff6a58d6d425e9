package logkey

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseReadsBackTheIDsOfEveryKeyAnUploaderWrites renders keys the way an
// uploader does, in several formats, and parses them back.
func TestParseReadsBackTheIDsOfEveryKeyAnUploaderWrites(t *testing.T) {
	formats := []string{
		DefaultFormat,
		"%requestId/%Y/%m/%d/%H/%taskId-%index-%s-%filename",
		"%group/%requestId/%taskId/%host/%Y/%m/%d/%index%fileext",
		"%requestId/%deployId/%Y/%m/%taskId/%index-%filename",
		"logs/%requestId/%taskId/%guid-%filename",
		"%requestId/%deployId/%host/%Y/%filename",
	}
	ids := []string{
		fmt.Sprintf("foo-D-%d-0-h1-r1", ms(2025, 12, 31, 22, 0)),
		fmt.Sprintf("foo-bar-D2-%d-3-h_2-r_1", ms(2026, 2, 1, 0, 0)),
	}
	names := []string{"service.log", "a_b-c-1-2.log.gz", "noext"}
	for _, src := range formats {
		f, err := ParseFormat(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			task := mustTask(t, id)
			for i, name := range names {
				key := f.Key(File{Task: task, Filename: name, GUID: "g-1", Index: i, Modified: time.UnixMilli(task.StartedAt + 1000)})
				t.Run(key, func(t *testing.T) {
					got, ok := f.Parse(key)
					want := Parsed{TaskID: id, RequestID: task.RequestID, DeployID: task.DeployID}
					if !strings.Contains(src, "%taskId") {
						want.TaskID = ""
					}
					if strings.Contains(src, "%group") {
						want.Group = DefaultGroup
					}
					if strings.Contains(src, "%s") {
						modified := task.StartedAt + 1000
						want.Time = &modified
					}
					if !ok || !reflect.DeepEqual(withoutTimes(got), want) {
						t.Errorf("got %+v, %v, want %+v", got, ok, want)
					}
				})
			}
		}
	}
}

func TestParseRefusesKeysTheFormatDidNotWrite(t *testing.T) {
	for _, key := range []string{
		"",
		"web-api/2026/11/not-a-task_0-1-x",
		"web-api/2026/1/web-api-v1-1-0-h-r_0-1-x",
		"other/2026/11/web-api-v1-1-0-h-r_0-1-x", // request and task disagree
		"web-api/2026/11/web-api-v1-1-0-h-r_x-1-x",
		"web-api/2026/11/web-api-v1-1-0-h-r_0-1-",
		"web-api/2026/11/" + strings.Repeat("a-", 500),
	} {
		t.Run(key, func(t *testing.T) {
			if got, ok := (Format{}).Parse(key); ok {
				t.Errorf("got %+v, want no match", got)
			}
		})
	}
}

// FuzzParseReadsBackWhatKeyWrites checks that every key the uploader writes
// in the default format, for a valid task id and any base name, parses
// back to the task that wrote it.
func FuzzParseReadsBackWhatKeyWrites(f *testing.F) {
	f.Add("web-api-v42-1793491200000-0-node17-us_east_1a", "stdout", 0, int64(1793494800000))
	f.Add("a-b-1-0-h-r_5", "x_0-1-y.log", 12, int64(0))
	f.Add("r\u00e9q-d-1-0-h-r", "-", 3, int64(253402300799999))
	f.Fuzz(func(t *testing.T, id, name string, index int, modified int64) {
		task, err := ParseTaskID(id)
		if err != nil || name == "" || strings.Contains(name, "/") || index < 0 || modified < 0 || modified > 253402300799999 {
			return
		}
		key := (Format{}).Key(File{Task: task, Filename: name, Index: index, Modified: time.UnixMilli(modified)})
		got, ok := (Format{}).Parse(key)
		want := Parsed{TaskID: id, RequestID: task.RequestID, DeployID: task.DeployID, Time: &modified}
		if !ok || !reflect.DeepEqual(withoutTimes(got), want) {
			t.Errorf("Parse(%q): got %+v, %v, want %+v", key, got, ok, want)
		}
	})
}

// withoutTimes is p without the time tokens Listed reads, which the tests of
// Listed check.
func withoutTimes(p Parsed) Parsed {
	p.written = [4]int{}
	return p
}

func TestAFileNameMayHoldSlashesAndDotSegments(t *testing.T) {
	task := "web-api-v1-1-0-h-r"
	for _, name := range []string{"a/b", "a//b", "a/./b", "a/../b", "../b", "/b", "b/"} {
		key := "web-api/2026/11/" + task + "_0-1-" + name
		if got, ok := (Format{}).Parse(key); !ok || got.TaskID != task {
			t.Errorf("Parse(%q): got %+v, %v, want a log of %s", key, got, ok, task)
		}
	}
}
