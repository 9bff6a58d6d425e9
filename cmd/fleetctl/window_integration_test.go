//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// windowLog is a log placed in time: its key's time (%s and the month of
// its prefix) and its starttime and endtime metadata, zero for none. Its
// last modification is when the test uploads it, now.
type windowLog struct {
	name               string
	keyTime            time.Time
	starttime, endtime time.Time
}

// putWindowLog uploads l as one task of request, its body "log <name>",
// and returns its key.
func putWindowLog(t *testing.T, request string, i int, l windowLog) string {
	t.Helper()
	task := fmt.Sprintf("%s-d1-%d-%d-node%d-us_east_1a", request, l.keyTime.Add(-time.Hour).UnixMilli(), i, i)
	key, err := local.Key(apitest.Log{TaskID: task, Filename: l.name, Modified: l.keyTime})
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	if !l.starttime.IsZero() {
		meta["starttime"] = strconv.FormatInt(l.starttime.UnixMilli(), 10)
	}
	if !l.endtime.IsZero() {
		meta["endtime"] = strconv.FormatInt(l.endtime.UnixMilli(), 10)
	}
	_, err = local.S3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(apitest.LogBucket), Key: aws.String(key),
		Body: strings.NewReader("log " + l.name + "\n"), Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestLogWindowsNarrowerThanAMonth puts logs of one request at several
// times of the last days, most in the same month (the finest time of the
// key format), and lists them with windows an hour or two wide: fleetctl
// lists exactly the logs whose span overlaps the window, to the edges (a
// log that ends at --since is in, one that starts at --until is not).
func TestLogWindowsNarrowerThanAMonth(t *testing.T) {
	const request = "e2ewindow"
	now := time.Now()
	from := now.Add(-4 * time.Hour).Truncate(time.Second) // the absolute window [from, to)
	to := from.Add(2 * time.Hour)
	m := func(d time.Duration) time.Time { return now.Add(-d) }
	logs := []windowLog{
		{"recent", m(45 * time.Minute), m(50 * time.Minute), m(40 * time.Minute)},
		{"across-the-hour", m(70 * time.Minute), m(70 * time.Minute), m(55 * time.Minute)},
		{"before-the-hour", m(100 * time.Minute), m(100 * time.Minute), m(65 * time.Minute)},
		{"in-the-pair", m(3 * time.Hour), m(3 * time.Hour), m(150 * time.Minute)},
		{"key-time-only", from.Add(20 * time.Minute), time.Time{}, from.Add(30 * time.Minute)},
		{"starts-at-until", to, to, to.Add(10 * time.Minute)},
		{"ends-at-since", from.Add(-30 * time.Minute), from.Add(-30 * time.Minute), from},
		{"long-running", m(6 * time.Hour), m(6 * time.Hour), m(10 * time.Minute)},
		{"no-metadata", m(190 * time.Minute), time.Time{}, time.Time{}},
		{"days-ago", m(5 * 24 * time.Hour), m(5*24*time.Hour + time.Hour), m(5 * 24 * time.Hour)},
		{"earlier-today", m(20 * time.Hour), m(21 * time.Hour), m(20 * time.Hour)},
	}
	keys := map[string]string{}
	for i, l := range logs {
		keys[l.name] = putWindowLog(t, request, i, l)
	}
	pick := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, keys[n])
		}
		slices.Sort(out)
		return out
	}
	lastHour := pick("recent", "across-the-hour", "long-running", "no-metadata")
	pair := pick("in-the-pair", "key-time-only", "ends-at-since", "long-running", "no-metadata")
	zone := time.FixedZone("", 2*3600)
	pairArgs := []string{"--since", from.In(zone).Format(time.RFC3339), "--until", to.In(zone).Format(time.RFC3339)}

	for _, tc := range []struct {
		name   string
		window []string
		want   []string
	}{
		{"the last hour", []string{"--since", "1h"}, lastHour},
		{"two hours given as instants with a zone", pairArgs, pair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"logs", "ls", "--request", request}, tc.window...)
			table := fleetctl(t, apitest.None, nil, args...).want(t, 0)
			lines := strings.Split(strings.TrimSuffix(table.stdout, "\n"), "\n")
			var listed []string
			for _, line := range lines[1:] {
				f := strings.Fields(line)
				listed = append(listed, f[len(f)-1])
			}
			slices.Sort(listed)
			if !strings.HasPrefix(lines[0], "MODIFIED") || !slices.Equal(listed, tc.want) || table.stderr != "" {
				t.Errorf("got\n%s(stderr %q)\nwant a header and\n%s", table.stdout, table.stderr, strings.Join(tc.want, "\n"))
			}

			var asJSON []client.Log
			out := fleetctl(t, apitest.None, nil, append(args, "-o", "json")...).want(t, 0).stdout
			if err := json.Unmarshal([]byte(out), &asJSON); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range asJSON {
				got = append(got, l.Key)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("-o json: got %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("fetch, cat and grep read the same window", func(t *testing.T) {
		fetched := fleetctl(t, apitest.None, nil, append([]string{"logs", "fetch", "--request", request, "--print"}, pairArgs...)...).want(t, 0).stdout
		var paths []string
		for _, p := range strings.Split(strings.TrimSuffix(fetched, "\n"), "\n") {
			_, key, _ := strings.Cut(p, "/"+request+"/")
			paths = append(paths, request+"/"+key)
		}
		slices.Sort(paths)
		if !slices.Equal(paths, pair) {
			t.Errorf("fetch --print: got\n%s\nwant the paths of %q", fetched, pair)
		}

		cat := fleetctl(t, apitest.None, nil, append([]string{"logs", "cat", "--request", request}, pairArgs...)...).want(t, 0).stdout
		printed := strings.Split(strings.TrimSuffix(cat, "\n"), "\n")
		slices.Sort(printed)
		var want []string
		for _, n := range []string{"in-the-pair", "key-time-only", "ends-at-since", "long-running", "no-metadata"} {
			want = append(want, "log "+n)
		}
		slices.Sort(want)
		if !slices.Equal(printed, want) {
			t.Errorf("cat: got %q, want %q", printed, want)
		}
		grep := fleetctl(t, apitest.None, nil, "logs", "grep", "--request", request, "--since", "1h", "-l", "log").want(t, 0).stdout
		files := strings.Split(strings.TrimSuffix(grep, "\n"), "\n")
		slices.Sort(files)
		if !slices.Equal(files, lastHour) {
			t.Errorf("grep -l: got %q, want %q", files, lastHour)
		}
	})

	t.Run("follow prints every log that landed since, and a late upload landing later, each once", func(t *testing.T) {
		g := newGateway(t, false)
		r := start(t, g.env(), "logs", "follow", "--request", request, "--since", "1h", "--poll", "200ms")
		lines := func() []string { return strings.Fields(r.stdout.String()) }
		// Every log above landed in the last minutes, whatever its span.
		eventually(t, "printing the logs that landed", func() bool { return len(lines()) >= len(logs) })
		// A late upload: its span ended two hours ago, outside any window
		// a poll could ask for.
		late := putWindowLog(t, request, len(logs), windowLog{name: "late", keyTime: m(2 * time.Hour), starttime: m(3 * time.Hour), endtime: m(2 * time.Hour)})
		eventually(t, "printing the late upload", func() bool { return len(lines()) > len(logs) })
		g.polled(t, 5) // five more lookups, which must print nothing
		r.cmd.Process.Signal(syscall.SIGINT)
		r.result(t).want(t, 130)
		got := lines()
		if got[len(got)-1] != late {
			t.Errorf("got %q, want %s last", got, late)
		}
		slices.Sort(got)
		var want []string
		for _, k := range keys {
			want = append(want, k)
		}
		want = slices.Sorted(slices.Values(append(want, late)))
		if !slices.Equal(got, want) {
			t.Errorf("got\n%s\nwant each of\n%s\nonce", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
