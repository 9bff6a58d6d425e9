package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// changes renders compareJSON's answer as path: old → new, one a line.
func changes(cs []delta) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s: %s → %s\n", c.path, shown(c.old), shown(c.new))
	}
	return b.String()
}

func TestCompareJSONFindsEveryPlaceTwoAnswersDiffer(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		ignore         []string
		want           string
	}{
		{"equal answers have no difference", `{"a":1,"b":[1,{"c":"x"}]}`, `{"b":[1,{"c":"x"}],"a":1}`, nil, ""},
		{"a nested field", `{"currentState":{"user":"a@x","state":"ACTIVE"}}`, `{"currentState":{"user":"b@x","state":"ACTIVE"}}`, nil,
			`currentState.user: "a@x" → "b@x"` + "\n"},
		{"a field only the new side has", `{"id":"s1"}`, `{"id":"s1","extra":{"k":[1]}}`, nil, `extra: (absent) → {"k":[1]}` + "\n"},
		{"a field only the old side has, null kept apart from absent", `{"id":"s1","user":null}`, `{"id":"s1"}`, nil, "user: null → (absent)\n"},
		{"arrays of different length, entry by entry", `[{"m":"a"},{"m":"b"}]`, `[{"m":"a"},{"m":"c"},{"m":"d"}]`, nil,
			"[1].m: \"b\" → \"c\"\n[2]: (absent) → {\"m\":\"d\"}\n"},
		{"an array inside an object", `{"h":[1,2,3]}`, `{"h":[1,2]}`, nil, "h[2]: 3 → (absent)\n"},
		{"values of different kinds are one difference", `{"r":{"cpus":16}}`, `{"r":[16]}`, nil, `r: {"cpus":16} → [16]` + "\n"},
		{"a number and its string differ", `{"n":16}`, `{"n":"16"}`, nil, `n: 16 → "16"` + "\n"},
		{"numbers compare by value", `{"n":16,"m":1e3,"big":1793491200000123456}`, `{"n":16.0,"m":1000,"big":1793491200000123456}`, nil, ""},
		{"numbers beyond float64's precision still differ", `{"big":1793491200000123456}`, `{"big":1793491200000123457}`, nil,
			"big: 1793491200000123456 → 1793491200000123457\n"},
		{"ignored fields are not compared, whether changed or missing", `{"id":"s1","sequence":41,"getUrl":"u"}`, `{"id":"s1","sequence":57}`,
			[]string{"sequence", "getUrl"}, ""},
		{"an ignored name is ignored only where it is named", `{"sequence":1,"x":{"sequence":1}}`, `{"sequence":2,"x":{"sequence":2}}`,
			[]string{"sequence"}, "x.sequence: 1 → 2\n"},
		{"odd field names are quoted", `{"a.b":1,"":1}`, `{"a.b":2,"":2}`, nil, "[\"\"]: 1 → 2\n[\"a.b\"]: 1 → 2\n"},
		{"a record one side lacks", `{"id":"s1"}`, ``, nil, ": {\"id\":\"s1\"} → (absent)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, new := mustDecode(t, tc.old), absent
			if tc.new != "" {
				new = mustDecode(t, tc.new)
			}
			if got := changes(compareJSON(old, new, tc.ignore...)); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestRecordsAreMatchedByTheirKeyNotTheirPosition(t *testing.T) {
	old := mustDecode(t, `[{"id":"s1","host":"a"},{"id":"s2","host":"b"},{"id":"s3","host":"c","sequence":1}]`)
	new := mustDecode(t, `[{"id":"s0","host":"z"},{"id":"s1","host":"a"},{"id":"s3","host":"C","sequence":2}]`)
	diffs, shared, keys := compareRecords("list state=FROZEN", "id", old, new, "sequence")
	var lines []string
	for _, d := range diffs {
		lines = append(lines, d.line())
	}
	want := []string{"list state=FROZEN: s0 only in new", "list state=FROZEN: s2 only in old", `list state=FROZEN: s3: host: old "c" new "C"`}
	if !slices.Equal(lines, want) || !slices.Equal(shared, []string{"s1", "s3"}) || keys != 4 {
		t.Errorf("got %q, shared %q, %d keys; want %q, s1 and s3, 4", lines, shared, keys, want)
	}
	// Two records with one id are no set: the answers are compared
	// entry by entry instead, each entry as a record.
	dup := mustDecode(t, `[{"id":"s1","sequence":1,"a b":1},{"id":"s1","sequence":2}]`)
	diffs, _, _ = compareRecords("list", "id", dup, mustDecode(t, `[{"id":"s1","sequence":3,"a b":2}]`), "sequence")
	lines = nil
	for _, d := range diffs {
		lines = append(lines, d.line())
	}
	if want := []string{`list[0]["a b"]: old 1 new 2`, `list[1]: old {"id":"s1","sequence":2} new (absent)`}; !slices.Equal(lines, want) {
		t.Errorf("got %q, want %q", lines, want)
	}
}

func TestADifferenceIsOneVisibleLineWhateverTheAPIsSend(t *testing.T) {
	hostile := "evil\x1b]0;pwned\x07\n\u009b2J\u202e"
	for _, tc := range []struct {
		name string
		d    difference
		want string
	}{
		{"details", difference{"details", "S1", delta{"currentState.user", "a@x", "b@x"}}, `slave S1 details: currentState.user: old "a@x" new "b@x"`},
		{"a history entry", difference{"history", "S1", delta{"[0].message", "a", absent}}, `history S1[0].message: old "a" new (absent)`},
		{"a slave only in the list of one side", difference{"list", "S9", delta{"", map[string]any{"id": "S9"}, absent}}, "slave S9: only in old"},
		{"a slave gone from one side's details", difference{"details", "S9", delta{"", absent, map[string]any{}}}, "slave S9 details: only in new"},
		{"a log of one side", difference{"logs task T", "K", delta{"", absent, map[string]any{}}}, "logs task T: K only in new"},
		{"an expiring change's field", difference{"expiring", "S4", delta{"startMillis", json.Number("1"), json.Number("2")}}, "expiring S4: startMillis: old 1 new 2"},
		{"a hostile value", difference{"details", "S1", delta{"currentState.message", hostile, "ok"}},
			`slave S1 details: currentState.message: old "evil\u001b]0;pwned\u0007\n\u009b2J\u202e" new "ok"`},
		{"a hostile id and field name", difference{"list", hostile, delta{field("", "a\nb\x1b[2J"), "x", "y"}},
			`list: evil\x1b]0;pwned\x07\n\u009b2J\u202e["a\nb\u001b[2J"]: old "x" new "y"`},
		{"a hostile question", difference{"logs task " + hostile, "K\r", delta{"", map[string]any{}, absent}},
			`logs task evil\x1b]0;pwned\x07\n\u009b2J\u202e: K\r only in old`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.d.line()
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			for _, r := range got {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
					t.Errorf("got %q, holding %U", got, r)
				}
			}
		})
	}
}

func TestTheSampleIsTheSameOnEveryRunAndKeepsItsSlavesAsTheFleetGrows(t *testing.T) {
	var ids []string
	for i := range 1000 {
		ids = append(ids, fmt.Sprintf("20261121-051400-16777343-5050-1234-S%d", i))
	}
	picked := sample(ids, 50, "week-48")
	if len(picked) != 50 || !slices.IsSorted(picked) {
		t.Fatalf("got %d slaves (sorted: %v), want 50 sorted", len(picked), slices.IsSorted(picked))
	}
	shuffled := slices.Clone(ids)
	slices.Reverse(shuffled)
	if again := sample(shuffled, 50, "week-48"); !slices.Equal(again, picked) {
		t.Errorf("the same seed drew another sample: got %q…, want %q…", again[:3], picked[:3])
	}
	if other := sample(ids, 50, "week-49"); slices.Equal(other, picked) {
		t.Errorf("another seed drew the same sample %q…", other[:3])
	}
	// The sample is no run of neighbours: the ids drawn are spread.
	if strings.HasSuffix(picked[0], "-S0") && strings.HasSuffix(picked[1], "-S1") && strings.HasSuffix(picked[2], "-S10") {
		t.Errorf("got %q, the first ids in order", picked[:3])
	}
	// New slaves take places in the sample only from slaves that were
	// in it: none of the old ones drawn now was left out before.
	grown := append(slices.Clone(ids), "new-1", "new-2", "new-3", "new-4")
	for _, id := range sample(grown, 50, "week-48") {
		if !strings.HasPrefix(id, "new-") && !slices.Contains(picked, id) {
			t.Errorf("%s is drawn from the grown fleet but was not before", id)
		}
	}
	if all := sample(ids[:10], 50, ""); len(all) != 10 {
		t.Errorf("a sample larger than the fleet: got %d, want every one of 10", len(all))
	}
	if all := sample(ids, 0, ""); len(all) != len(ids) {
		t.Errorf("--sample 0: got %d, want every slave", len(all))
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// serveStore serves the slave routes over store, as the service does.
func serveStore(t *testing.T, store *memstore.Store) string {
	t.Helper()
	h := web.Wrap(slaves.New(store, access.Policy{Mode: access.ModeNone}, defaultLimits), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// twoFleets serves two stores holding the same slaves, but that the new
// one numbers its sequences apart (which the diff ignores) and lacks
// n-gone; change edits the new store's copy of each slave.
func twoFleets(t *testing.T, change func(s *machine.Slave, history []machine.Update)) (oldURL, newURL string) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	at := time.Now().Add(-time.Hour).UnixMilli()
	oldStore, newStore := memstore.New(0), memstore.New(0)
	for i, id := range []string{"n-1", "n-2", "n-3", "n-gone"} {
		history := []machine.Update{
			{SlaveID: id, State: machine.Active, Timestamp: at, Message: "New machine reported"},
			{SlaveID: id, State: machine.Frozen, Timestamp: at + 1000, User: "a@x", Message: "kernel upgrade"},
		}
		s := machine.Slave{ID: id, FirstSeenAt: at, Host: id + ".example.com", RackID: "rack-1", Current: history[1],
			Resources: json.RawMessage(`{"cpus":16}`), Sequence: int64(i)}
		oldStore.Put(s, history...)
		if id == "n-gone" {
			continue
		}
		s.Sequence += 1000
		newHistory := slices.Clone(history)
		change(&s, newHistory)
		newStore.Put(s, newHistory...)
	}
	return serveStore(t, oldStore), serveStore(t, newStore)
}

func diffRun(args ...string) ctlResult {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"diff"}, args...), strings.NewReader(""), &stdout, &stderr)
	return ctlResult{code, stdout.String(), stderr.String()}
}

func TestDiffNamesEachDifferenceOfTwoServicesAndExitsOne(t *testing.T) {
	oldURL, newURL := twoFleets(t, func(s *machine.Slave, history []machine.Update) {
		if s.ID == "n-2" {
			history[1].User = "b@x"
			s.Current.User = "b@x"
			s.Resources = json.RawMessage(`{"cpus":16.0,"gpus":1}`)
		}
	})
	r := diffRun("--old", oldURL, "--new", newURL)
	want := `list: n-2: currentState.user: old "a@x" new "b@x"
list: n-2: resources.gpus: old (absent) new 1
slave n-gone: only in old
list state=FROZEN: n-2: currentState.user: old "a@x" new "b@x"
list state=FROZEN: n-2: resources.gpus: old (absent) new 1
list state=FROZEN: n-gone only in old
slave n-2 details: currentState.user: old "a@x" new "b@x"
slave n-2 details: resources.gpus: old (absent) new 1
history n-2[0].user: old "a@x" new "b@x"
compared 3 slaves (details, history), 8 lists, 0 expiring changes, 0 log lookups: 9 differences
`
	if r.code != exitDifferent || r.stdout != want || r.stderr != "" {
		t.Errorf("got exit %d, stdout\n%s\nstderr %q\nwant exit 1 and\n%s", r.code, r.stdout, r.stderr, want)
	}

	same := diffRun("--old", oldURL, "--new", oldURL)
	if same.code != exitOK || same.stdout != "compared 4 slaves (details, history), 8 lists, 0 expiring changes, 0 log lookups: 0 differences\n" {
		t.Errorf("one API twice: got %d %q %q, want 0 and no difference", same.code, same.stdout, same.stderr)
	}
}

func TestDiffCapsEachQuestionAndPrintsJSONExactly(t *testing.T) {
	oldURL, newURL := twoFleets(t, func(s *machine.Slave, history []machine.Update) {
		s.Host = "moved\x1b[2J.example.com"
	})
	r := diffRun("--old", oldURL, "--new", newURL, "--max-diffs", "1", "--sample", "2")
	want := `list: n-1: host: old "n-1.example.com" new "moved\u001b[2J.example.com"
list: … and 3 more
list state=FROZEN: n-1: host: old "n-1.example.com" new "moved\u001b[2J.example.com"
list state=FROZEN: … and 3 more
slave `
	if r.code != exitDifferent || !strings.HasPrefix(r.stdout, want) ||
		!strings.HasSuffix(r.stdout, "compared 2 of 3 slaves (details, history), 8 lists, 0 expiring changes, 0 log lookups: 10 differences\n") {
		t.Errorf("got exit %d\n%s\nwant exit 1, one line per question and the number left out, starting\n%s", r.code, r.stdout, want)
	}

	r = diffRun("--old", oldURL, "--new", newURL, "-o", "json")
	var doc struct {
		Total       int
		Differences []struct {
			Question, ID, Path string
			Old, New           json.RawMessage
		}
		Compared struct{ Slaves, Lists int }
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != exitDifferent {
		t.Fatalf("got %d %s (%v), want exit 1 and a JSON document", r.code, r.stdout, err)
	}
	for i := range doc.Differences {
		for _, v := range []*json.RawMessage{&doc.Differences[i].Old, &doc.Differences[i].New} {
			var b bytes.Buffer
			if *v != nil && json.Compact(&b, *v) == nil {
				*v = b.Bytes()
			}
		}
	}
	d := doc.Differences[0]
	if doc.Total != 11 || len(doc.Differences) != 11 || doc.Compared.Slaves != 3 || doc.Compared.Lists != 8 ||
		d.Question != "list" || d.ID != "n-1" || d.Path != "host" || string(d.Old) != `"n-1.example.com"` || string(d.New) != `"moved\u001b[2J.example.com"` {
		t.Errorf("got %+v", doc)
	}
	if first := doc.Differences[3]; first.ID != "n-gone" || first.Path != "" || first.New != nil || !strings.Contains(string(first.Old), `"host":"n-gone.example.com"`) {
		t.Errorf("got %+v fourth, want n-gone only in old, whole", first)
	}
}

func TestDiffCommandLinesRefusedBeforeAnyCall(t *testing.T) {
	for _, args := range [][]string{
		{"--old", "http://127.0.0.1:9"},
		{"--old", "http://127.0.0.1:9", "--new", "http://127.0.0.1:9", "--concurrency", "0"},
		{"--old", "http://127.0.0.1:9", "--new", "http://127.0.0.1:9", "--sample", "-1"},
		{"--old", "http://127.0.0.1:9", "--new", "http://127.0.0.1:9", "--deploy", "web-api"},
		{"--old", "http://127.0.0.1:9", "--new", "http://127.0.0.1:9", "--log-sample", "5"},
		{"--old", "http://127.0.0.1:9", "--new", "http://127.0.0.1:9", "-o", "yaml"},
		{"--old", "http://127.0.0.1:9", "--new", "no-such-profile"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(t.TempDir(), ".config"))
			if r := diffRun(args...); r.code != exitUsage || r.stdout != "" {
				t.Errorf("got %d %q %q, want %d", r.code, r.stdout, r.stderr, exitUsage)
			}
		})
	}
}

// A slave caught moving differs on its first read; --settle reads it once
// more and reports what it finds then.
func TestSettleAsksADifferingQuestionAgainAndReportsTheSecondAnswer(t *testing.T) {
	oldURL, newURL := twoFleets(t, func(*machine.Slave, []machine.Update) {})
	target, err := url.Parse(newURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var reads atomic.Int32
	moving := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// n-2 is away on the new side for its first read only.
		if r.URL.Path == "/api/slaves/slave/n-2/details" && reads.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"code":404,"message":"no slave n-2"}`+"\n")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer moving.Close()

	r := diffRun("--old", oldURL, "--new", moving.URL)
	if r.code != exitDifferent || !strings.Contains(r.stdout, "slave n-2 details: only in old\n") {
		t.Errorf("without --settle: got %d\n%s\nwant n-2 named as only in old", r.code, r.stdout)
	}
	reads.Store(0)
	r = diffRun("--old", oldURL, "--new", moving.URL, "--settle", "10ms")
	if r.code != exitDifferent || strings.Contains(r.stdout, "n-2 details") || !strings.Contains(r.stdout, "slave n-gone: only in old\n") || reads.Load() != 2 {
		t.Errorf("with --settle: got %d after %d reads of n-2\n%s\nwant n-2 read twice and the same, n-gone still only in old", r.code, reads.Load(), r.stdout)
	}
}

// A read that fails on one side is a failure, not a difference: named on
// stderr, counted in the summary, and the exit code is the failure's.
func TestAFailedReadIsAFailureNotADifference(t *testing.T) {
	oldURL, newURL := twoFleets(t, func(*machine.Slave, []machine.Update) {})
	target, err := url.Parse(newURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/slaves/slave/n-1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"code":403,"message":"not for you"}`+"\n")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer failing.Close()
	r := diffRun("--old", oldURL, "--new", failing.URL)
	if r.code != exitAuth || r.stderr != "fleetctl: history n-1: new: not allowed (403): not for you\n" ||
		!strings.HasSuffix(r.stdout, ": 2 differences, 1 failed read\n") || strings.Contains(r.stdout, "history n-1") {
		t.Errorf("got %d\nstdout %s\nstderr %q\nwant exit %d, n-1's history named on stderr only", r.code, r.stdout, r.stderr, exitAuth)
	}

	// The list failing stops the diff: the slaves to read come from it.
	t.Setenv("FLEETCTL_TIMEOUT", "2s")
	r = diffRun("--old", oldURL, "--new", "http://127.0.0.1:9")
	if r.code != exitUnavailable || r.stdout != "" || !strings.HasPrefix(r.stderr, "fleetctl: ") || !strings.Contains(r.stderr, "fleetctl: list: new: unavailable") {
		t.Errorf("an unreachable new API: got %d %q %q, want %d and the list's failure", r.code, r.stdout, r.stderr, exitUnavailable)
	}
}
