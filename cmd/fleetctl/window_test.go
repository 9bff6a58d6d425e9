package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
)

// The service filters logs to the window exactly, so the window fleetctl
// sends is the one the user asked for, to the millisecond: a duration
// before now, or an instant in its own zone.
func TestLogWindowsAreSentToTheMillisecond(t *testing.T) {
	now := time.Date(2026, 11, 24, 3, 41, 16, 789e6, time.UTC)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	for _, tt := range []struct {
		since, until string
		start, end   int64
	}{
		{"15m", "", ms(now.Add(-15 * time.Minute)), 0},
		{"90m", "", ms(now.Add(-90 * time.Minute)), 0},
		{"1h30m", "30m", ms(now.Add(-90 * time.Minute)), ms(now.Add(-30 * time.Minute))},
		{"1h", "", ms(now.Add(-time.Hour)), 0},
		{"2026-11-24T01:15:30+02:00", "2026-11-24T03:15:30+02:00", ms(time.Date(2026, 11, 23, 23, 15, 30, 0, time.UTC)), ms(time.Date(2026, 11, 24, 1, 15, 30, 0, time.UTC))},
		{"2026-11-23T23:15:30.250Z", "", ms(time.Date(2026, 11, 23, 23, 15, 30, 250e6, time.UTC)), 0},
		{"2026-11-24T01:15", "2026-11-24 02:45", ms(time.Date(2026, 11, 24, 1, 15, 0, 0, time.Local)), ms(time.Date(2026, 11, 24, 2, 45, 0, 0, time.Local))},
	} {
		t.Run(tt.since+" to "+tt.until, func(t *testing.T) {
			s := selection{requests: []string{"web-api"}, since: tt.since, until: tt.until}
			req, err := s.request(now)
			if err != nil {
				t.Fatal(err)
			}
			if req.Start != tt.start || req.End != tt.end {
				t.Errorf("got [%d, %d), want [%d, %d)", req.Start, req.End, tt.start, tt.end)
			}
		})
	}
}

// TestFollowPrintsEachLogOnce plays a service that answers wider than
// asked (a log that landed two days ago), with a late upload (landed a
// minute ago, its span ended 20 minutes ago), and whose index shows one log
// only from the second lookup, seconds after its upload. follow asks for
// what landed since, with no window, prints every log that landed since
// --since, the late upload and the late indexed one included, each once,
// and each lookup reaches a minute before the previous one.
func TestFollowPrintsEachLogOnce(t *testing.T) {
	first := time.Now()
	logs := []client.Log{
		{Key: "web-api/2026/11/old", LastModified: first.Add(-48 * time.Hour).UnixMilli(), Size: 1},
		{Key: "web-api/2026/11/ended", LastModified: first.Add(-time.Minute).UnixMilli(), EndTime: first.Add(-20 * time.Minute).UnixMilli(), Size: 1},
		{Key: "web-api/2026/11/early", LastModified: first.Add(-5 * time.Minute).UnixMilli(), Size: 1},
	}
	late := client.Log{Key: "web-api/2026/11/late", LastModified: first.Add(-3 * time.Second).UnixMilli(), Size: 1}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var starts, asked []int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		q := r.URL.Query()
		if q.Has("start") || q.Has("end") {
			t.Errorf("got a window %q, want landedSince alone", r.URL.RawQuery)
		}
		start, _ := strconv.ParseInt(q.Get("landedSince"), 10, 64)
		starts, asked = append(starts, start), append(asked, time.Now().UnixMilli())
		answer := logs
		if len(starts) > 1 {
			answer = append(answer, late)
		}
		if len(starts) == 4 {
			cancel()
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer)
	}))
	defer srv.Close()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("FLEETCTL_ENDPOINT", srv.URL)

	var stdout, stderr bytes.Buffer
	run(ctx, []string{"logs", "follow", "--request", "web-api", "--poll", "10ms"}, strings.NewReader(""), &stdout, &stderr)
	if want := "web-api/2026/11/early\nweb-api/2026/11/ended\nweb-api/2026/11/late\n"; stdout.String() != want {
		t.Errorf("got\n%s\nwant\n%s(stderr %q)", stdout.String(), want, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := starts[0], first.Add(-10*time.Minute).UnixMilli(); got < want || got > want+1000 {
		t.Errorf("got the first lookup from %d, want 10 minutes before now (%d)", got, want)
	}
	for i := 1; i < len(starts); i++ {
		if reach := asked[i-1] - starts[i]; reach < followOverlap.Milliseconds() || reach > followOverlap.Milliseconds()+1000 {
			t.Errorf("lookup %d starts %d ms before the previous one was asked, want %s", i+1, reach, followOverlap)
		}
	}
}
