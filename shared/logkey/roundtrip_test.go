package logkey

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// lookup is one task, deploy or request lookup and the tasks it should find.
type lookup struct {
	name   string
	scope  Scope
	window Window
	finds  func(Task) bool
}

// TestKeysAreFoundByTheirLookupsOnly writes keys the way an uploader does and
// checks that every key is listed by the lookups of its task, deploy and
// request, and by no other lookup, whatever the format.
func TestKeysAreFoundByTheirLookupsOnly(t *testing.T) {
	formats := []string{
		DefaultFormat,
		"%requestId/%Y/%m/%d/%H/%taskId-%index-%s-%filename",
		"%group/%requestId/%taskId/%host/%Y/%m/%d/%index%fileext",
		"%requestId/%deployId/%Y/%m/%taskId/%index-%filename",
		"logs/%requestId/%taskId/%guid-%filename",
	}
	// Requests foo, foo-bar and foobar share letters; deploys D and D2 share
	// a start; tasks run across the new year and the end of January.
	var tasks []Task
	for _, id := range []string{
		fmt.Sprintf("foo-D-%d-0-h1-r1", ms(2025, 12, 31, 22, 0)),
		fmt.Sprintf("foo-D-%d-1-h2-r1", ms(2026, 1, 15, 8, 0)),
		fmt.Sprintf("foo-D2-%d-0-h1-r2", ms(2026, 1, 31, 23, 0)),
		fmt.Sprintf("foo-bar-D-%d-0-h3-r1", ms(2025, 12, 31, 23, 30)),
		fmt.Sprintf("foo-bar-D2-%d-0-h1-r1", ms(2026, 2, 1, 0, 0)),
		fmt.Sprintf("foobar-D-%d-0-h2-r1", ms(2026, 1, 10, 12, 0)),
	} {
		tasks = append(tasks, mustTask(t, id))
	}
	var files []File
	for _, task := range tasks {
		for i, after := range []time.Duration{10 * time.Minute, 3 * time.Hour, 49 * time.Hour} {
			files = append(files, File{
				Task:     task,
				Filename: "/mnt/sandbox/service.log",
				GUID:     fmt.Sprintf("guid%d", i),
				Index:    i,
				Modified: time.UnixMilli(task.StartedAt).Add(after),
			})
		}
	}

	now := ms(2026, 2, 5, 0, 0)
	lookback := 40 * 24 * time.Hour
	var lookups []lookup
	for _, task := range tasks {
		lookups = append(lookups, lookup{
			name:   "task " + task.ID,
			scope:  TaskScope(task),
			window: TaskWindow(task, nil, nil, now),
			finds:  func(o Task) bool { return o.ID == task.ID },
		})
	}
	for _, rd := range [][2]string{{"foo", "D"}, {"foo", "D2"}, {"foo-bar", "D"}, {"foo-bar", "D2"}, {"foobar", "D"}} {
		lookups = append(lookups, lookup{
			name:   "deploy " + rd[0] + " " + rd[1],
			scope:  DeployScope(rd[0], rd[1]),
			window: LookbackWindow(nil, nil, lookback, now),
			finds:  func(o Task) bool { return o.RequestID == rd[0] && o.DeployID == rd[1] },
		})
	}
	for _, r := range []string{"foo", "foo-bar", "foobar"} {
		lookups = append(lookups, lookup{
			name:   "request " + r,
			scope:  RequestScope(r),
			window: LookbackWindow(nil, nil, lookback, now),
			finds:  func(o Task) bool { return o.RequestID == r },
		})
	}

	for _, format := range formats {
		t.Run("with "+format+" every key is found by its own lookups only", func(t *testing.T) {
			f := mustParse(t, format)
			for _, l := range lookups {
				prefixes, err := f.Prefixes(l.scope, l.window, MaxPrefixes)
				if err != nil {
					t.Fatalf("%s: got %v, want no error", l.name, err)
				}
				for _, file := range files {
					key := f.Key(file)
					found := slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
					if want := l.finds(file.Task); found != want {
						t.Errorf("%s, key %s: got found %v, want %v (prefixes %q)", l.name, key, found, want, prefixes)
					}
				}
			}
		})
	}
}
