//go:build integration

package logindex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// truth is one object as S3 itself tells it: a listing with
// EncodingType=url and a HEAD.
type truth struct {
	key        string
	modified   int64
	start, end *int64
}

// s3Truth lists the whole bucket and reads every object's metadata, the
// way a careful operator would, without the service's code.
func s3Truth(t *testing.T, bucket string) []truth {
	t.Helper()
	ctx := context.Background()
	var out []truth
	in := &s3.ListObjectsV2Input{Bucket: &bucket, EncodingType: types.EncodingTypeUrl}
	for {
		page, err := local.S3.ListObjectsV2(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			key, err := url.QueryUnescape(aws.ToString(o.Key))
			if err != nil {
				t.Fatal(err)
			}
			head, err := local.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
			if err != nil {
				t.Fatalf("head %q: %v", key, err)
			}
			millis := func(v string) *int64 {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil
				}
				return &n
			}
			out = append(out, truth{key: key, modified: o.LastModified.UnixMilli(),
				start: millis(head.Metadata["starttime"]), end: millis(head.Metadata["endtime"])})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// want is the ground truth of one lookup: the keys of the bucket that
// parse to a log of of (a task when of.ID is set, else a deploy when
// of.DeployID is, else a request), whose month (the default format's
// prefixes) is one the window reached to now names, and whose span
// overlaps [start, end): from starttime, else the key's %s time, else the
// last modification, to endtime, else the last modification, turned
// around when backwards; without metadata when plain.
func want(objects []truth, of logkey.Task, start, end, now int64, plain bool) []string {
	var out []string
	month := func(ms int64) time.Time {
		at := time.UnixMilli(ms).UTC()
		return time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	for _, o := range objects {
		p, ok := (logkey.Format{}).Parse(o.key)
		switch {
		case !ok, p.RequestID != of.RequestID,
			of.DeployID != "" && p.DeployID != of.DeployID,
			of.ID != "" && p.TaskID != of.ID:
			continue
		}
		// The default format's key starts <requestId>/<Y>/<m>/.
		parts := strings.SplitN(o.key, "/", 4)
		y, _ := strconv.Atoi(parts[1])
		m, _ := strconv.Atoi(parts[2])
		keyed := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
		if keyed.Before(month(start)) || !keyed.Before(time.UnixMilli(max(end, now))) {
			continue
		}
		from, until := o.modified, o.modified
		if p.Time != nil {
			from = *p.Time
		}
		if !plain && o.start != nil {
			from = *o.start
		}
		if !plain && o.end != nil {
			until = *o.end
		}
		from, until = min(from, until), max(from, until)
		if from < end && until >= start {
			out = append(out, o.key)
		}
	}
	slices.Sort(out)
	return out
}

// landed is the ground truth of a lookup of what landed since: the keys
// of of, under the prefixes its default window (reach) reads, last
// modified at or after since, whatever their span.
func landed(objects []truth, of logkey.Task, reach logkey.Window, since int64) []string {
	var out []string
	for _, k := range want(objects, of, reach.Start, reach.End, reach.End, true) {
		// want with the reach as window keeps every key of the reach
		// whose plain span ends in it; landed ones end at the upload.
		i := slices.IndexFunc(objects, func(o truth) bool { return o.key == k })
		if objects[i].modified >= since {
			out = append(out, k)
		}
	}
	return out
}

// TestEveryPathAnswersWhatS3Holds is the differential test of the window
// rule (docs/behaviour.md "Task logs"): it uploads, overwrites, deletes and
// re-creates logs with odd keys and metadata spans, hands the indexer each
// event, and then asks every lookup kind and the search (through all its
// pages), for many windows, with and without excludeMetadata, of the
// listing and of the index; every answer must be the ground truth computed
// from S3 itself.
func TestEveryPathAnswersWhatS3Holds(t *testing.T) {
	ctx := context.Background()
	bucket := "task-logs-differential"
	if err := stack.CreateBuckets(ctx, local.S3, bucket); err != nil {
		t.Fatal(err)
	}
	objects := logstore.New(local.S3, s3.NewPresignClient(local.S3))
	table := logindex.NewTable(local.DynamoDB, stack.LocalName("LogIndexTable"))
	indexer := logindex.NewIndexer(logstore.Buckets{Store: objects, Notifications: logstore.Notifications{API: local.S3}}, table, logkey.Format{}, []string{bucket}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	r := rig{indexer: indexer, table: table, bucket: bucket, logged: &bytes.Buffer{}}

	now := time.Now()
	day := 24 * time.Hour
	started := now.Add(-60 * day).UnixMilli()
	rk := task(t, fmt.Sprintf("dif-d1-%d-0-h1-rk", started))
	rkb := task(t, fmt.Sprintf("dif-d1-%d-0-h1-rk_b", started)) // extends rk's prefix
	other := task(t, fmt.Sprintf("dif-d2-%d-1-h2-r1", started))
	longer := task(t, fmt.Sprintf("dif-x-d1-%d-0-h1-r1", started)) // a request extending dif
	tasks := []logkey.Task{rk, rkb, other, longer}

	seq := 0
	event := func(kind, key string) {
		seq++
		r.send(t, kind, key, fmt.Sprintf("0055AED6DCD9%08X", seq))
	}
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	put := func(key string, meta map[string]string) {
		t.Helper()
		_, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("log\n"), Metadata: meta})
		if err != nil {
			t.Fatalf("put %q: %v", key, err)
		}
		event("Object Created", key)
	}
	del := func(key string) {
		t.Helper()
		if _, err := local.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
			t.Fatal(err)
		}
		event("Object Deleted", key)
	}
	// keyOf is the key of tk's file name at at. An uploader writes a base
	// name (logkey.Format.Key keeps what follows the last '/'); the file
	// part here is written whole, so that it may hold '/'.
	keyOf := func(tk logkey.Task, name string, at int64) string {
		key := (logkey.Format{}).Key(logkey.File{Task: tk, Filename: "\uFFFF", Modified: time.UnixMilli(at)})
		return strings.Replace(key, "\uFFFF", name, 1)
	}
	span := func(start, end *int64) map[string]string {
		m := map[string]string{}
		if start != nil {
			m["starttime"] = strconv.FormatInt(*start, 10)
		}
		if end != nil {
			m["endtime"] = strconv.FormatInt(*end, 10)
		}
		return m
	}
	at := func(d time.Duration) *int64 { v := ms(d); return &v }

	names := []string{"plain.log", "a b.log", "日本語.log", "100%.log", "%41.log", "a+b.log", "ctl\x01.log", "cr\r.log",
		"tab\tx.log", "x/y.log", "x//y.log", "x/./y.log", "x/../y.log", "../y.log", "..y.log"}
	for _, tk := range tasks {
		for i, name := range names {
			put(keyOf(tk, name, ms(-time.Duration(i)*day)), span(at(-time.Duration(i)*day-time.Hour), nil))
		}
	}
	// Four keys of one task that differ only by "//", "/./" or "..".
	for _, name := range []string{"a/b.log", "a//b.log", "a/./b.log", "a/../a/b.log"} {
		put(keyOf(rk, name, ms(-2*time.Hour)), nil)
	}
	// The longest key S3 takes, 1,024 bytes.
	base := keyOf(rk, "", ms(-time.Hour))
	put(base+strings.Repeat("z", 1024-len(base)), nil)
	// Started 40 days ago, keyed now: a window 39 days ago holds it.
	put(keyOf(rk, "started-long-ago.log", ms(0)), span(at(-40*day), nil))
	// A late upload: its span ended in the previous month, keyed now.
	put(keyOf(rkb, "late.log", ms(0)), span(at(-35*day), at(-34*day)))
	// Keyed 40 days ago without metadata: its span runs to its upload.
	put(keyOf(other, "keyed-long-ago.log", ms(-40*day)), nil)
	// Keyed 40 days ahead: no prefix up to now holds it.
	put(keyOf(other, "future.log", ms(40*day)), span(at(-time.Hour), nil))
	// An end ahead of its upload: it reaches past every instant it landed
	// before.
	put(keyOf(other, "ends-ahead.log", ms(-time.Hour)), span(at(-2*time.Hour), at(day)))
	// Metadata backwards, unreadable, or an end alone.
	put(keyOf(longer, "backwards.log", ms(-2*day)), span(at(-day), at(-3*day)))
	put(keyOf(longer, "unreadable.log", ms(-2*day)), map[string]string{"starttime": "soon", "endtime": "-"})
	put(keyOf(rk, "end-only.log", ms(-5*day)), span(nil, at(-4*day)))
	// Keys under the tasks' prefixes that no uploader wrote.
	month := "dif/" + now.UTC().Format("2006/01") + "/"
	for _, stray := range []string{month + rk.ID + "_garbage", month + rk.ID, month + "dif-junk", month + rk.ID + "_x-1-y.log"} {
		put(stray, nil)
	}
	// What lands from here on landed at mid or later: S3 keeps last
	// modifications to the second.
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next))
	mid := next.UnixMilli()
	// Overwritten with other times, deleted, deleted and re-created.
	rewritten := keyOf(rk, "rewritten.log", ms(-3*day))
	put(rewritten, span(at(-50*day), at(-49*day)))
	put(rewritten, span(at(-3*day), nil))
	gone := keyOf(rkb, "gone.log", ms(-day))
	put(gone, nil)
	del(gone)
	back := keyOf(other, "back.log", ms(-day))
	put(back, span(at(-20*day), nil))
	del(back)
	put(back, span(at(-2*day), nil))

	truths := s3Truth(t, bucket)
	// The ground truth itself holds the cases the rule is about.
	longAgo := keyOf(rk, "started-long-ago.log", ms(0))
	if w := want(truths, rk, ms(-39*day), ms(-39*day+time.Hour), now.UnixMilli(), false); !slices.Equal(w, []string{longAgo}) {
		t.Fatalf("ground truth of a window 39 days ago: got %q, want the log started 40 days ago", w)
	}
	if w := want(truths, rk, ms(-39*day), ms(-39*day+time.Hour), now.UnixMilli(), true); len(w) != 0 {
		t.Fatalf("ground truth without metadata of a window 39 days ago: got %q, want none", w)
	}
	if w := landed(truths, rk, logkey.Window{Start: started, End: ms(day)}, mid); len(w) != 1 {
		t.Fatalf("ground truth of what landed after the overwrites began: got %q, want the rewritten log", w)
	}
	if w := want(truths, rk, started, ms(day), now.UnixMilli(), false); len(w) != len(names)+8 || !slices.Contains(w, keyOf(rk, "a/./b.log", ms(-2*time.Hour))) {
		t.Fatalf("ground truth of the whole task: got %d logs %q, want %d", len(w), w, len(names)+8)
	}
	cfg := logs.Config{Buckets: []string{bucket}, URLTTL: time.Hour, Lookback: 30 * day,
		ListTimeout: routeDeadline, LinkTimeout: routeDeadline}
	var logged bytes.Buffer
	quiet := web.Options{Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelError}))}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("errors logged:\n%s", logged.String())
		}
	})
	paths := map[string]http.Handler{
		"listing": web.Wrap(logs.New(objects, cfg), quiet),
		"index":   web.Wrap(logs.New(objects, cfg).ReadsIndex(table), quiet),
	}
	scopes := []logkey.Task{rk, rkb, other, longer, {RequestID: "dif"}, {RequestID: "dif-x"}, {RequestID: "dif", DeployID: "d1"}, {RequestID: "dif", DeployID: "d2"}}
	windows := [][2]time.Duration{
		{-39 * day, -39*day + time.Hour}, {-45 * day, -35 * day}, {-34*day - time.Hour, -34 * day}, {-10 * day, 0},
		{-time.Hour, time.Hour}, {-61 * day, day}, {-20 * day, -19 * day}, {-3*day - 30*time.Minute, -3 * day},
		{10 * day, 11 * day}, {-30 * day, 50 * day}, {-2 * day, -day},
	}
	for _, of := range scopes {
		for _, since := range []int64{ms(-time.Hour), mid, ms(time.Hour)} {
			// The index's own answer: every log of of that landed since,
			// whatever its span or prefix.
			var w []string
			for _, o := range truths {
				if p, ok := (logkey.Format{}).Parse(o.key); ok && o.modified >= since && p.RequestID == of.RequestID &&
					(of.DeployID == "" || p.DeployID == of.DeployID) && (of.ID == "" || p.TaskID == of.ID) {
					w = append(w, o.key)
				}
			}
			slices.Sort(w)
			entries, err := table.Landed(ctx, of, since)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Key)
			}
			if slices.Sort(got); !slices.Equal(got, w) {
				t.Errorf("%s/%s/%s landed since %d: the index's Landed: got %q, want %q", of.RequestID, of.DeployID, of.ID, since, got, w)
			}
			for path, h := range paths {
				tnow := time.Now().UnixMilli()
				reach := logkey.Window{Start: tnow - cfg.Lookback.Milliseconds(), End: tnow + 1}
				if of.ID != "" {
					reach.Start = of.StartedAt
				}
				w := landed(truths, of, reach, since)
				if got := landedKeys(t, h, of, since); !slices.Equal(got, w) {
					t.Errorf("%s/%s/%s landed since %d: GET on the %s: got %q, want %q", of.RequestID, of.DeployID, of.ID, since, path, got, w)
				}
			}
		}
		for _, win := range windows {
			for _, plain := range []bool{false, true} {
				start, end := ms(win[0]), ms(win[1])
				name := fmt.Sprintf("%s/%s/%s [%v, %v) plain %v", of.RequestID, of.DeployID, of.ID, win[0], win[1], plain)
				for path, h := range paths {
					from := start
					if of.ID != "" {
						from = max(start, of.StartedAt) // the task window
					}
					w := want(truths, of, from, end, time.Now().UnixMilli(), plain)
					if got := lookupKeys(t, h, of, start, end, plain); !slices.Equal(got, w) {
						t.Errorf("%s: GET on the %s: got %q, want %q", name, path, got, w)
					}
					if got := searchKeys(t, h, of, start, end, plain); !slices.Equal(got, w) {
						t.Errorf("%s: search on the %s: got %q, want %q", name, path, got, w)
					}
				}
			}
		}
	}
}

// lookupKeys asks h's GET lookup of of over [start, end) for its keys.
func lookupKeys(t *testing.T, h http.Handler, of logkey.Task, start, end int64, plain bool) []string {
	t.Helper()
	return getKeys(t, h, lookupPath(of)+fmt.Sprintf("?list=true&start=%d&end=%d&excludeMetadata=%v", start, end, plain))
}

// searchKeys follows h's search of of over [start, end) through all its
// pages of at most 3 logs, and returns every key once, or fails.
func searchKeys(t *testing.T, h http.Handler, of logkey.Task, start, end int64, plain bool) []string {
	t.Helper()
	body := map[string]any{"start": start, "end": end, "excludeMetadata": plain, "listOnly": true, "maxPerPage": 3}
	switch {
	case of.ID != "":
		body["taskIds"] = []string{of.ID}
	case of.DeployID != "":
		body["requestsAndDeploys"] = map[string][]string{of.RequestID: {of.DeployID}}
	default:
		body["requestsAndDeploys"] = map[string][]string{of.RequestID: {}}
	}
	seen := map[string]bool{}
	var keys []string
	for pages := 0; ; pages++ {
		p := post(t, h, body)
		if len(p.Results) > 3 {
			t.Fatalf("page %d: got %d results, want at most 3", pages, len(p.Results))
		}
		for _, l := range p.Results {
			if seen[l.Key] {
				t.Fatalf("page %d: %q again", pages, l.Key)
			}
			seen[l.Key] = true
			keys = append(keys, l.Key)
		}
		if p.LastPage {
			break
		}
		if pages > 500 {
			t.Fatal("the search never ends")
		}
		body["continuationTokens"] = p.ContinuationTokens
	}
	slices.Sort(keys)
	return keys
}

// landedKeys asks h's GET lookup of of for the keys that landed since.
func landedKeys(t *testing.T, h http.Handler, of logkey.Task, since int64) []string {
	t.Helper()
	return getKeys(t, h, lookupPath(of)+fmt.Sprintf("?list=true&landedSince=%d", since))
}

// lookupPath is the GET lookup of of: its task, its request and deploy, or
// its request.
func lookupPath(of logkey.Task) string {
	switch {
	case of.ID != "":
		return "/api/logs/task/" + of.ID
	case of.DeployID != "":
		return "/api/logs/request/" + of.RequestID + "/deploy/" + of.DeployID
	}
	return "/api/logs/request/" + of.RequestID
}

// getKeys answers the keys of h's GET of path, sorted.
func getKeys(t *testing.T, h http.Handler, path string) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: got %d %s", path, rec.Code, rec.Body)
	}
	var got []wireLog
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range got {
		keys = append(keys, l.Key)
	}
	slices.Sort(keys)
	return keys
}
