//go:build integration

package logindex_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/logkey"
)

// pageRig writes logs straight into the index, as the indexer would.
type pageRig struct {
	rig
	seq int
}

// put indexes bucket/key for of (a request, deploy or task, as Page names
// them) with the span [from, until].
func (r *pageRig) put(t *testing.T, of logkey.Task, bucket, key string, from, until int64) {
	t.Helper()
	r.seq++
	p := logkey.Parsed{TaskID: of.ID, RequestID: of.RequestID, DeployID: of.DeployID}
	e := logkey.Entry{Object: logkey.Object{Bucket: bucket, Key: key, LastModified: until, Size: 1}, Start: &from, End: &until}
	if err := r.table.Put(context.Background(), p, e, "", fmt.Sprintf("%064d", r.seq)); err != nil {
		t.Fatal(err)
	}
}

// pages follows Page from the start with limit, as a search follows its
// tokens, and returns the keys of every page.
func (r *pageRig) pages(t *testing.T, of logkey.Task, bucket, prefix string, limit int, w logkey.Window) [][]string {
	t.Helper()
	var out [][]string
	after := ""
	for range 1000 {
		entries, done, err := r.table.Page(context.Background(), of, bucket, prefix, after, limit, w)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > limit {
			t.Fatalf("got %d logs, want at most %d", len(entries), limit)
		}
		var keys []string
		for _, e := range entries {
			keys = append(keys, e.Key)
		}
		out = append(out, keys)
		if done {
			return out
		}
		if len(entries) == 0 {
			t.Fatal("got an empty page that is not the last")
		}
		after = entries[len(entries)-1].Key
	}
	t.Fatal("the pages never end")
	return nil
}

func TestAPrefixPagesInKeyOrderExactlyOnce(t *testing.T) {
	r := &pageRig{rig: newRig(t)}
	web := logkey.Task{RequestID: "pg"}
	var all []string
	for i := range 20 {
		key := fmt.Sprintf("pg/2026/11/pg-d1-1793491200000-%d-h1-r1_0-1793491200000-stdout", 19-i)
		r.put(t, web, r.bucket, key, 1000, 2000)
		all = append(all, key)
	}
	slices.Sort(all)
	for _, limit := range []int{1, 2, 7, 20, 1000} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			pages := r.pages(t, web, r.bucket, "pg/2026/11/pg-", limit, always)
			if got := slices.Concat(pages...); !slices.Equal(got, all) {
				t.Errorf("got %q, want every key once, in key order %q", got, all)
			}
			if want := (20 + limit - 1) / limit; len(pages) != want {
				t.Errorf("got %d pages, want %d: the page that reaches the end says so", len(pages), want)
			}
		})
	}
}

func TestAPageAnswersOnlyItsPrefixPartitionBucketAndWindow(t *testing.T) {
	r := &pageRig{rig: newRig(t)}
	web, api := logkey.Task{RequestID: "bd"}, logkey.Task{RequestID: "bd-api"}
	prefix := "2026/11/bd-"
	in := []string{
		prefix + "d1-1793491200000-0-h1-r1_a",
		prefix + "\x00",
		prefix + "\x01tab\there",
		prefix + "é",
		prefix + "日本",
		prefix + "😀",
		prefix + "\U0010FFFF\U0010FFFFend",
		prefix + strings.Repeat("z", 1024-len(prefix)),
	}
	for _, k := range in {
		r.put(t, web, r.bucket, k, 1000, 2000)
	}
	for _, k := range []string{"2026/11/bd", "2026/11/bd.", "2026/10/bd-x", "2026/12/bd-x", "2026/11/bd" + string(rune('-'+1)) + "x"} {
		r.put(t, web, r.bucket, k, 1000, 2000) // same partition, not under the prefix
	}
	r.put(t, api, r.bucket, prefix+"api-d1-1793491200000-0-h1-r1_a", 1000, 2000) // under the prefix, another request
	r.put(t, web, "another-bucket", prefix+"elsewhere", 1000, 2000)
	early := prefix + "early"
	r.put(t, web, r.bucket, early, 100, 200)
	gone := prefix + "gone"
	r.put(t, web, r.bucket, gone, 1000, 2000)
	if err := r.table.Remove(context.Background(), logkey.Parsed{RequestID: "bd"}, r.bucket, gone, fmt.Sprintf("%064d", 1000)); err != nil {
		t.Fatal(err)
	}
	if err := r.table.Remove(context.Background(), logkey.Parsed{RequestID: "bd"}, r.bucket, prefix+"never", fmt.Sprintf("%064d", 1000)); err != nil {
		t.Fatal(err)
	}

	want := slices.Sorted(slices.Values(in))
	w := logkey.Window{Start: 500, End: 5000}
	for _, limit := range []int{1, 3, 100} {
		if got := slices.Concat(r.pages(t, web, r.bucket, prefix, limit, w)...); !slices.Equal(got, want) {
			t.Errorf("limit %d: got %q, want %q: the prefix's logs of the request, bucket and window, in byte order, and no tombstone", limit, got, want)
		}
	}
	t.Run("the window filters exactly", func(t *testing.T) {
		if got := slices.Concat(r.pages(t, web, r.bucket, prefix, 1, logkey.Window{Start: 200, End: 1000})...); !slices.Equal(got, []string{early}) {
			t.Errorf("got %q, want %q: ends at the start, and the others start at the end", got, early)
		}
	})
	t.Run("another bucket answers its own logs", func(t *testing.T) {
		if got := slices.Concat(r.pages(t, web, "another-bucket", prefix, 10, always)...); !slices.Equal(got, []string{prefix + "elsewhere"}) {
			t.Errorf("got %q, want only that bucket's log", got)
		}
	})
	t.Run("a token past the prefix, or before it, or as long as a key", func(t *testing.T) {
		for _, c := range []struct {
			after string
			want  []string
		}{
			{"zzz", nil},
			{"", want},
			{"2026/11/bd", want},
			{want[len(want)-2], want[len(want)-1:]},
			{strings.Repeat("\U0010FFFF", 256), nil},
		} {
			got, done, err := r.table.Page(context.Background(), web, r.bucket, prefix, c.after, 100, w)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, e := range got {
				keys = append(keys, e.Key)
			}
			if !done || !slices.Equal(keys, c.want) {
				t.Errorf("after %.30q: got %q, %v, want %q, true", c.after, keys, done, c.want)
			}
		}
	})
	t.Run("a key of 1,024 bytes resumes after itself", func(t *testing.T) {
		long := prefix + strings.Repeat("y", 1024-len(prefix))
		next := prefix + strings.Repeat("z", 1024-len(prefix))
		r.put(t, web, r.bucket, long, 1000, 2000)
		got, _, err := r.table.Page(context.Background(), web, r.bucket, prefix, long, 1, w)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Key != next {
			t.Errorf("got %+v, want the next key %.40q", got, next)
		}
	})
}

func TestAPageReadsTheTaskAndDeployPartitions(t *testing.T) {
	r := &pageRig{rig: newRig(t)}
	tk := task(t, "pt-d1-1793491200000-0-h1-r1")
	other := task(t, "pt-d2-1793491200000-0-h1-r1")
	mine := "pt/2026/11/" + tk.ID + "_0"
	r.put(t, logkey.Task{ID: tk.ID, RequestID: tk.RequestID, DeployID: tk.DeployID}, r.bucket, mine, 1000, 2000)
	r.put(t, logkey.Task{ID: other.ID, RequestID: other.RequestID, DeployID: other.DeployID}, r.bucket, "pt/2026/11/"+other.ID+"_0", 1000, 2000)
	for _, c := range []struct {
		of   logkey.Task
		want int
	}{
		{logkey.Task{ID: tk.ID, RequestID: "pt", DeployID: "d1"}, 1},
		{logkey.Task{RequestID: "pt", DeployID: "d1"}, 1},
		{logkey.Task{RequestID: "pt"}, 2},
		{logkey.Task{RequestID: "pt", DeployID: "d3"}, 0},
	} {
		got, _, err := r.table.Page(context.Background(), c.of, r.bucket, "pt/", "", 10, always)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want || c.want == 1 && got[0].Key != mine {
			t.Errorf("%+v: got %+v, want %d logs", c.of, got, c.want)
		}
	}
}
