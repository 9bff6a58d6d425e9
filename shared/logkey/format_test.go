package logkey

import (
	"strings"
	"testing"
	"time"
)

// mustParse parses a format that a test knows to be valid.
func mustParse(t *testing.T, s string) Format {
	t.Helper()
	f, err := ParseFormat(s)
	if err != nil {
		t.Fatalf("ParseFormat(%q): got %v, want no error", s, err)
	}
	return f
}

// mustTask parses a task id that a test knows to be valid.
func mustTask(t *testing.T, id string) Task {
	t.Helper()
	task, err := ParseTaskID(id)
	if err != nil {
		t.Fatalf("ParseTaskID(%q): got %v, want no error", id, err)
	}
	return task
}

func TestParseFormatKeepsTheFormatAsConfigured(t *testing.T) {
	for _, s := range []string{
		DefaultFormat,
		"%requestId/%Y/%m/%d/%H/%taskId-%index-%filename",
		"logs/%group/%requestId/%taskId/%host/%guid%fileext",
		"%Y/%taskId",
	} {
		t.Run(s+" reads back unchanged", func(t *testing.T) {
			if got := mustParse(t, s).String(); got != s {
				t.Errorf("got %q, want %q", got, s)
			}
		})
	}
	t.Run("the zero format is the default one", func(t *testing.T) {
		if got := (Format{}).String(); got != DefaultFormat {
			t.Errorf("got %q, want %q", got, DefaultFormat)
		}
	})
}

func TestParseFormatRefusesBadFormats(t *testing.T) {
	tests := []struct {
		name, format, mention string
	}{
		{"an empty format", "", "empty"},
		{"an unknown token", "%requestId/%foo/%taskId", `"%foo"`},
		{"a token in the wrong case", "%requestId/%TaskId", `"%TaskId"`},
		{"a lone percent sign at the end", "%requestId/%", `"%"`},
		{"a percent sign before punctuation", "%requestId/%/x", `"%/"`},
		{"a doubled percent sign", "%%requestId", `"%%"`},
		{"a format without any id", "logs/%group/%Y/%m", "needs %requestId or %taskId"},
		{"a format with %host before the ids", "%host/%taskId", "must come before %host"},
		{"a format with %deployId before the ids", "%deployId/%requestId", "must come before %deployId"},
		{"a format with %filename before the ids", "%filename-%taskId", "must come before %filename"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := ParseFormat(tt.format)
			if err == nil {
				t.Fatalf("got no error, want one mentioning %s", tt.mention)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("got %q, want it to mention %s", err, tt.mention)
			}
		})
	}
}

func TestKeyRendersEveryToken(t *testing.T) {
	file := File{
		Task:     Task{ID: "my-app-D1-1767225600000-3-host_1-rack2", RequestID: "my-app", DeployID: "D1", StartedAt: 1767225600000, InstanceNo: 3, Host: "host_1", RackID: "rack2"},
		Group:    "web",
		Tag:      "blue",
		Filename: "var/log/service.log",
		GUID:     "0f8fad5b-d9cb-469f-a165-70867728950e",
		Index:    7,
		Modified: time.Date(2026, 2, 3, 4, 5, 6, 7_000_000, time.UTC),
	}
	tests := []struct{ token, want string }{
		{"%requestId", "my-app"},
		{"%deployId", "D1"},
		{"%taskId", "my-app-D1-1767225600000-3-host_1-rack2"},
		{"%host", "host_1"},
		{"%group", "web"},
		{"%tag", "blue"},
		{"%filename", "service.log"},
		{"%fileext", ".log"},
		{"%guid", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"%index", "7"},
		{"%s", "1770091506007"},
		{"%Y", "2026"},
		{"%m", "02"},
		{"%d", "03"},
		{"%H", "04"},
	}
	for _, tt := range tests {
		t.Run(tt.token+" is "+tt.want, func(t *testing.T) {
			f := mustParse(t, "%requestId:"+tt.token+":")
			if got, want := f.Key(file), "my-app:"+tt.want+":"; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestKeyMatchesTokensLongestFirstAndCaseSensitively(t *testing.T) {
	file := File{
		Task:     Task{ID: "r-D-1-0-h-k", RequestID: "r", DeployID: "D", Host: "h"},
		Filename: "f.txt",
		Modified: time.Date(2026, 9, 8, 7, 0, 0, 0, time.UTC),
	}
	tests := []struct{ format, want string }{
		{"%requestId%deployId%d", "rD08"},
		{"%requestId%host%H", "rh07"},
		{"%requestId%hostname", "rhname"},
		{"%requestId%Hour", "r07our"},
		{"%requestId%date", "r08ate"},
		{"%requestId%tag%taskId", "rr-D-1-0-h-k"},
		{"%requestId%filename%fileext", "rf.txt.txt"},
		{"%requestId%s%Y", "r17888508000002026"},
	}
	for _, tt := range tests {
		t.Run(tt.format+" renders "+tt.want, func(t *testing.T) {
			if got := mustParse(t, tt.format).Key(file); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyFileDetails(t *testing.T) {
	f := mustParse(t, "%requestId/%group/%Y-%m-%d-%H/%filename|%fileext")
	base := File{Task: Task{RequestID: "r"}, Modified: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	east := time.FixedZone("UTC+5", 5*3600)
	tests := []struct {
		name string
		edit func(*File)
		want string
	}{
		{"a name without an extension has an empty %fileext", func(f *File) { f.Filename = "stdout" }, "r/default/2026-01-01-00/stdout|"},
		{"only the last extension is %fileext", func(f *File) { f.Filename = "logs.tar.gz" }, "r/default/2026-01-01-00/logs.tar.gz|.gz"},
		{"a dot file is all extension", func(f *File) { f.Filename = ".bashrc" }, "r/default/2026-01-01-00/.bashrc|.bashrc"},
		{"%filename is the base name", func(f *File) { f.Filename = "/mnt/sandbox/service.log" }, "r/default/2026-01-01-00/service.log|.log"},
		{"an empty group is the default group", func(f *File) { f.Filename = "x" }, "r/default/2026-01-01-00/x|"},
		{"time tokens are in UTC", func(f *File) {
			f.Filename = "x"
			f.Modified = time.Date(2026, 1, 1, 2, 0, 0, 0, east)
		}, "r/default/2025-12-31-21/x|"},
		{"years are padded to four digits", func(f *File) {
			f.Filename = "x"
			f.Modified = time.Date(987, 6, 5, 4, 0, 0, 0, time.UTC)
		}, "r/default/0987-06-05-04/x|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := base
			tt.edit(&file)
			if got := f.Key(file); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyWritesIDsThatLookLikeTokensLiterally(t *testing.T) {
	// Key does not validate ids (an uploader writes what it was given), so
	// this shows that rendering never reads a value as a format.
	file := File{
		Task:     Task{ID: "a%taskId-D-1-0-%Y-r", RequestID: "a%taskId", DeployID: "D", Host: "%Y"},
		Filename: "%H%index.log",
		Modified: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC),
	}
	f := mustParse(t, "%requestId/%Y/%host/%taskId/%filename")
	want := "a%taskId/2026/%Y/a%taskId-D-1-0-%Y-r/%H%index.log"
	if got := f.Key(file); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
