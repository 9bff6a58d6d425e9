package logkey

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// ms returns the epoch ms of a UTC instant.
func ms(y int, m time.Month, d, h, minute int) int64 {
	return time.Date(y, m, d, h, minute, 0, 0, time.UTC).UnixMilli()
}

func ptr(v int64) *int64 { return &v }

const taskID = "foo-D-1767225600000-0-h1-r1" // started 2026-01-01T00:00Z

// withTag and withGroup return s with its tag or group set.
func withTag(s Scope, tag string) Scope     { s.Tag = tag; return s }
func withGroup(s Scope, group string) Scope { s.Group = group; return s }

func TestPrefixesCutTheFormatAtTheFirstTokenTheScopeCannotFill(t *testing.T) {
	task := mustTask(t, taskID)
	january := Window{Start: ms(2026, 1, 5, 0, 0), End: ms(2026, 1, 6, 0, 0)}
	tests := []struct {
		name   string
		format string
		scope  Scope
		want   string
	}{
		{"a task fills the default format up to %index", DefaultFormat, TaskScope(task), "foo/2026/01/" + taskID + "_"},
		{"a deploy ends the default format with its task-id start", DefaultFormat, DeployScope("foo", "D"), "foo/2026/01/foo-D-"},
		{"a request ends the default format with its task-id start", DefaultFormat, RequestScope("foo"), "foo/2026/01/foo-"},
		{"a task fills %deployId and %host", "%requestId/%deployId/%host/%taskId/%Y/", TaskScope(task), "foo/D/h1/" + taskID + "/2026/"},
		{"a deploy stops at %host", "%requestId/%deployId/%host/%taskId/%Y/", DeployScope("foo", "D"), "foo/D/"},
		{"a request stops at %deployId", "%requestId/%deployId/%host/%taskId/%Y/", RequestScope("foo"), "foo/"},
		{"a task stops at %guid", "%requestId/%taskId/%guid/%Y/", TaskScope(task), "foo/" + taskID + "/"},
		{"a task stops at %index", "%requestId/%taskId%index/%Y", TaskScope(task), "foo/" + taskID},
		{"a task stops at %s", "%requestId/%taskId/%s", TaskScope(task), "foo/" + taskID + "/"},
		{"a task stops at %filename", "%requestId/%taskId/%filename", TaskScope(task), "foo/" + taskID + "/"},
		{"a task stops at %fileext", "%requestId/%taskId/x%fileext", TaskScope(task), "foo/" + taskID + "/x"},
		{"a task with a tag fills %tag", "%requestId/%tag/%taskId", withTag(TaskScope(task), "blue"), "foo/blue/" + taskID},
		{"a task without a tag stops at %tag", "%requestId/%tag/%taskId", TaskScope(task), "foo/"},
		{"a deploy with a tag fills %tag", "%requestId/%tag/%taskId", withTag(DeployScope("foo", "D"), "blue"), "foo/blue/foo-D-"},
		{"a request never fills %tag", "%requestId/%tag/%taskId", withTag(RequestScope("foo"), "blue"), "foo/"},
		{"a scope without a group fills the default group", "%group/%requestId/%taskId", RequestScope("foo"), "default/foo/foo-"},
		{"a scope with a group fills it", "%group/%requestId/%taskId", withGroup(RequestScope("foo"), "web"), "web/foo/foo-"},
		{"a format without time tokens gives one prefix", "logs/%requestId/%taskId/%filename", RequestScope("foo-bar"), "logs/foo-bar/foo-bar-"},
		{"a request's dashes stay in its task-id start", "%taskId", RequestScope("foo-bar"), "foo-bar-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustParse(t, tt.format).Prefixes(tt.scope, january, MaxPrefixes)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if want := []string{tt.want}; !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestPrefixesWalkTheFinestTimeUnit(t *testing.T) {
	foo := RequestScope("foo")
	tests := []struct {
		name   string
		format string
		window Window
		want   []string
	}{
		{"months run from December into January", "%requestId/%Y/%m/",
			Window{Start: ms(2025, 12, 15, 10, 0), End: ms(2026, 2, 1, 0, 0)},
			[]string{"foo/2025/12/", "foo/2026/01/"}},
		{"a window starting on January 31 covers February", "%requestId/%Y/%m/",
			Window{Start: ms(2026, 1, 31, 10, 0), End: ms(2026, 3, 1, 0, 1)},
			[]string{"foo/2026/01/", "foo/2026/02/", "foo/2026/03/"}},
		{"a window from January 31 to February 1 covers both months", "%requestId/%Y/%m/",
			Window{Start: ms(2026, 1, 31, 23, 0), End: ms(2026, 2, 1, 1, 0)},
			[]string{"foo/2026/01/", "foo/2026/02/"}},
		{"days run across the new year", "%requestId/%Y/%m/%d/",
			Window{Start: ms(2025, 12, 30, 12, 0), End: ms(2026, 1, 2, 0, 0)},
			[]string{"foo/2025/12/30/", "foo/2025/12/31/", "foo/2026/01/01/"}},
		{"days run across February in a leap year", "%requestId/%Y/%m/%d/",
			Window{Start: ms(2028, 2, 28, 0, 0), End: ms(2028, 3, 1, 0, 1)},
			[]string{"foo/2028/02/28/", "foo/2028/02/29/", "foo/2028/03/01/"}},
		{"a window shorter than a day gives its day", "%requestId/%Y/%m/%d/",
			Window{Start: ms(2026, 3, 4, 10, 0), End: ms(2026, 3, 4, 10, 30)},
			[]string{"foo/2026/03/04/"}},
		{"a window of one millisecond gives its month", DefaultFormat,
			Window{Start: ms(2026, 3, 4, 10, 0), End: ms(2026, 3, 4, 10, 0) + 1},
			[]string{"foo/2026/03/foo-"}},
		{"years run while before the end", "%requestId/%Y/",
			Window{Start: ms(2024, 6, 1, 0, 0), End: ms(2026, 1, 1, 0, 0) + 1},
			[]string{"foo/2024/", "foo/2025/", "foo/2026/"}},
		{"a year ending exactly at the end is left out", "%requestId/%Y/",
			Window{Start: ms(2024, 6, 1, 0, 0), End: ms(2026, 1, 1, 0, 0)},
			[]string{"foo/2024/", "foo/2025/"}},
		{"a month without a year repeats once", "%requestId/%m/",
			Window{Start: ms(2024, 11, 1, 0, 0), End: ms(2025, 12, 1, 0, 0)},
			[]string{"foo/01/", "foo/02/", "foo/03/", "foo/04/", "foo/05/", "foo/06/", "foo/07/", "foo/08/", "foo/09/", "foo/10/", "foo/11/", "foo/12/"}},
		{"time tokens after the cut are not walked", "%requestId/%deployId/%Y/",
			Window{Start: ms(2020, 1, 1, 0, 0), End: ms(2026, 1, 1, 0, 0)},
			[]string{"foo/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustParse(t, tt.format).Prefixes(foo, tt.window, MaxPrefixes)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrefixesWalkHoursFromMidnightOfTheStartDay(t *testing.T) {
	f := mustParse(t, "%requestId/%Y%m%d%H/")
	tests := []struct {
		name         string
		window       Window
		first, last  string
		wantPrefixes int
	}{
		{"a window shorter than a day", Window{Start: ms(2026, 3, 4, 22, 30), End: ms(2026, 3, 5, 1, 15)}, "foo/2026030400/", "foo/2026030501/", 26},
		{"a window across the new year", Window{Start: ms(2025, 12, 31, 23, 0), End: ms(2026, 1, 1, 1, 0)}, "foo/2025123100/", "foo/2026010100/", 25},
	}
	for _, tt := range tests {
		t.Run(tt.name+fmt.Sprintf(" gives %d hours", tt.wantPrefixes), func(t *testing.T) {
			got, err := f.Prefixes(RequestScope("foo"), tt.window, MaxPrefixes)
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if len(got) != tt.wantPrefixes || got[0] != tt.first || got[len(got)-1] != tt.last {
				t.Errorf("got %d prefixes %q..%q, want %d %q..%q", len(got), got[0], got[len(got)-1], tt.wantPrefixes, tt.first, tt.last)
			}
		})
	}
}

func TestPrefixesOfAnEmptyWindow(t *testing.T) {
	start := ms(2026, 1, 1, 0, 0)
	for _, w := range []Window{{Start: start, End: start}, {Start: start, End: start - 1}, {Start: math.MaxInt64, End: math.MinInt64}} {
		for _, format := range []string{DefaultFormat, "%taskId"} {
			t.Run(fmt.Sprintf("%s over [%d, %d) is empty", format, w.Start, w.End), func(t *testing.T) {
				got, err := mustParse(t, format).Prefixes(RequestScope("foo"), w, 0)
				if err != nil || got != nil {
					t.Errorf("got %q, %v, want no prefixes and no error", got, err)
				}
			})
		}
	}
}

func TestPrefixesStopAtTheLimit(t *testing.T) {
	hourly := mustParse(t, "%requestId/%Y/%m/%d/%H/")
	yearly := mustParse(t, "%requestId/%Y/")
	untimed := mustParse(t, "%requestId/%taskId")
	start := ms(2026, 1, 1, 0, 0)
	hours := func(n int64) Window { return Window{Start: start, End: start + n*time.Hour.Milliseconds()} }
	msgTooMany := "A lookup may cover at most 2000 prefixes; narrow the time window or name fewer tasks and requests"
	tests := []struct {
		name   string
		format Format
		window Window
		max    int
		want   int // prefixes; -1 for the error
	}{
		{"2000 hours fit", hourly, hours(2000), MaxPrefixes, 2000},
		{"2001 hours do not", hourly, hours(2001), MaxPrefixes, -1},
		{"a smaller budget counts", hourly, hours(11), 10, -1},
		{"all of int64 from 1970 stops early", hourly, Window{Start: 0, End: math.MaxInt64}, MaxPrefixes, -1},
		{"all of int64 by years stops early", yearly, Window{Start: math.MinInt64, End: math.MaxInt64}, MaxPrefixes, -1},
		{"the last millisecond of int64 is one year", yearly, Window{Start: math.MaxInt64 - 1, End: math.MaxInt64}, MaxPrefixes, 1},
		{"the first millisecond of int64 is one year", yearly, Window{Start: math.MinInt64, End: math.MinInt64 + 1}, MaxPrefixes, 1},
		{"one prefix needs a budget of one", untimed, hours(1), 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.format.Prefixes(RequestScope("foo"), tt.window, tt.max)
			if tt.want < 0 {
				wantInvalid(t, err, msgTooMany)
				return
			}
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if len(got) != tt.want {
				t.Errorf("got %d prefixes, want %d", len(got), tt.want)
			}
		})
	}
}

func TestPrefixesRefuseScopesThatCouldWidenAPrefix(t *testing.T) {
	day := Window{Start: ms(2026, 1, 1, 0, 0), End: ms(2026, 1, 2, 0, 0)}
	tests := []struct {
		name  string
		scope Scope
		msg   string
	}{
		{"a request id with a slash", RequestScope("foo/"), "foo/ is not a valid request id"},
		{"a request id that looks like a token", RequestScope("%Y"), "%Y is not a valid request id"},
		{"an empty request id", RequestScope(""), " is not a valid request id"},
		{"the zero scope", Scope{}, " is not a valid request id"},
		{"a deploy of a bad request", DeployScope("..", "D"), ".. is not a valid request id"},
		{"a deploy id with a dash", DeployScope("foo", "D-1"), "D-1 is not a valid deploy id"},
		{"an empty deploy id", DeployScope("foo", ""), " is not a valid deploy id"},
		{"a task whose id does not parse", TaskScope(Task{ID: "foo-D-1", RequestID: "foo", DeployID: "D"}), "foo-D-1 is not a valid task id"},
		{"a group with a slash", withGroup(RequestScope("foo"), "a/b"), "a/b is not a valid group"},
		{"a tag with a percent sign", withTag(DeployScope("foo", "D"), "%taskId"), "%taskId is not a valid tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := Format{}.Prefixes(tt.scope, day, MaxPrefixes)
			wantInvalid(t, err, tt.msg)
		})
	}
	t.Run("a task scope trusts only the task id", func(t *testing.T) {
		forged := mustTask(t, taskID)
		forged.RequestID, forged.DeployID = "", "../x"
		got, err := Format{}.Prefixes(TaskScope(forged), day, MaxPrefixes)
		if want := []string{"foo/2026/01/" + taskID + "_"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("got %q, %v, want %q", got, err, want)
		}
	})
}

func TestTaskWindow(t *testing.T) {
	task := mustTask(t, taskID)
	started, now := task.StartedAt, ms(2026, 3, 1, 0, 0)
	tests := []struct {
		name       string
		start, end *int64
		want       Window
	}{
		{"without bounds it runs from the task's start to now", nil, nil, Window{Start: started, End: now}},
		{"a start before the task's start is raised to it", ptr(started - 1000), nil, Window{Start: started, End: now}},
		{"a start after the task's start is kept", ptr(started + 1000), nil, Window{Start: started + 1000, End: now}},
		{"an end is kept", nil, ptr(started + 5), Window{Start: started, End: started + 5}},
		{"an end before the start is kept, leaving the window empty", ptr(started + 10), ptr(started + 5), Window{Start: started + 10, End: started + 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TaskWindow(task, tt.start, tt.end, now); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLookbackWindow(t *testing.T) {
	now := ms(2026, 3, 1, 0, 0)
	month := 30 * 24 * time.Hour
	tests := []struct {
		name       string
		start, end *int64
		lookback   time.Duration
		now        int64
		want       Window
	}{
		{"without bounds it looks back from now", nil, nil, month, now, Window{Start: now - month.Milliseconds(), End: now}},
		{"a start replaces the lookback", ptr(5), nil, month, now, Window{Start: 5, End: now}},
		{"an end replaces now", nil, ptr(now - 1), month, now, Window{Start: now - month.Milliseconds(), End: now - 1}},
		{"a lookback past the minimum int64 stops there", nil, nil, time.Duration(math.MaxInt64), math.MinInt64 + 5, Window{Start: math.MinInt64, End: math.MinInt64 + 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LookbackWindow(tt.start, tt.end, tt.lookback, tt.now); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCompact(t *testing.T) {
	tests := []struct {
		name    string
		in, out []string
	}{
		{"nothing stays nothing", nil, nil},
		{"prefixes are sorted", []string{"b/", "a/"}, []string{"a/", "b/"}},
		{"duplicates are dropped", []string{"a/", "b/", "a/"}, []string{"a/", "b/"}},
		{"a prefix extending another is dropped", []string{"foo/2026/01/foo-D-", "foo/2026/01/foo-"}, []string{"foo/2026/01/foo-"}},
		{"a prefix is dropped even with others sorted between", []string{"a/", "a/b/", "a-", "a/c"}, []string{"a-", "a/"}},
		{"a prefix sharing only letters is kept", []string{"foo-", "foo-bar-", "foobar-"}, []string{"foo-", "foobar-"}},
		{"the empty prefix covers everything", []string{"x", "", "y"}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compact(slices.Clone(tt.in)); !slices.Equal(got, tt.out) {
				t.Errorf("got %q, want %q", got, tt.out)
			}
		})
	}
	t.Run("the input is left alone", func(t *testing.T) {
		in := []string{"b", "a", "a"}
		Compact(in)
		if want := []string{"b", "a", "a"}; !slices.Equal(in, want) {
			t.Errorf("got %q, want %q", in, want)
		}
	})
}

func TestAllow(t *testing.T) {
	prefixes := []string{"foo/2026/01/foo-D-1-0-h-r_", "foo/2026/02/foo-D-1-0-h-r_"}
	tests := []struct {
		name      string
		allowlist []string
		want      []string
	}{
		{"an empty allowlist keeps every prefix", nil, prefixes},
		{"an entry keeps the prefixes starting with it", []string{"foo/2026/02/"}, prefixes[1:]},
		{"any entry may match", []string{"bar/", "foo/2026/01"}, prefixes[:1]},
		{"an entry longer than a prefix does not keep it", []string{"foo/2026/01/foo-D-1-0-h-r_0"}, nil},
		{"an empty entry keeps everything", []string{""}, prefixes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Allow(prefixes, tt.allowlist); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOwnsKeepsTheScopesOwnLogsOnly(t *testing.T) {
	f := Format{}
	parse := func(key string) Parsed {
		t.Helper()
		p, ok := f.Parse(key)
		if !ok {
			t.Fatalf("%q does not parse", key)
		}
		return p
	}
	rk, rkb := "web-d1-1-0-h-rk", "web-d1-1-0-h-rk_b"
	own := parse("web/2026/11/" + rk + "_0-1-x.log")
	longer := parse("web/2026/11/" + rkb + "_0-1-x.log")
	otherDeploy := parse("web/2026/11/web-d10-1-0-h-rk_0-1-x.log")
	task := mustTask(t, rk)
	for _, c := range []struct {
		name string
		s    Scope
		p    Parsed
		want bool
	}{
		{"a task owns its log", TaskScope(task), own, true},
		{"a task does not own the log of a task whose id extends its own", TaskScope(task), longer, false},
		{"a deploy owns its tasks' logs", DeployScope("web", "d1"), longer, true},
		{"a deploy does not own another deploy's", DeployScope("web", "d1"), otherDeploy, false},
		{"a request owns every deploy's", RequestScope("web"), otherDeploy, true},
		{"a request does not own another request's", RequestScope("we"), own, false},
	} {
		if got := c.s.Owns(c.p); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestListedIsWhetherTheReachedWindowsPrefixesHoldTheKey(t *testing.T) {
	f := Format{}
	task := mustTask(t, "web-d1-1-0-h-r")
	day := func(y int, m time.Month, d int) int64 { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixMilli() }
	keyOf := func(at int64) Parsed {
		p, _ := f.Parse(f.Key(File{Task: task, Filename: "x", Modified: time.UnixMilli(at)}))
		return p
	}
	reach := Window{Start: day(2026, 10, 15) + 5, End: day(2026, 12, 2)}
	for _, c := range []struct {
		name string
		at   int64
		want bool
	}{
		{"the month before the window's start", day(2026, 9, 30), false},
		{"the window's first month, before its start", day(2026, 10, 1), true},
		{"the month the window reaches", day(2026, 12, 20), true},
		{"the month after", day(2027, 1, 1), false},
	} {
		for _, s := range []Scope{TaskScope(task), RequestScope("web")} {
			if got := f.Listed(s, keyOf(c.at), reach); got != c.want {
				t.Errorf("%s: got %v, want %v", c.name, got, c.want)
			}
		}
	}
}
