//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// watchLines are the lines of a watch's stdout.
func watchLines(r *running) []string {
	out := r.stdout.String()
	if out == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// interrupt sends SIGINT to a watch and returns the cursor it printed to
// resume from, checking the exit code and the lines on stderr.
func interrupt(t *testing.T, r *running) (result, string) {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGINT)
	res := r.result(t)
	res.want(t, 130)
	lines := strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n")
	n := len(lines)
	if n < 2 || lines[n-1] != "fleetctl: interrupted (interrupt)" || !strings.HasPrefix(lines[n-2], "fleetctl: resume with: fleetctl watch --since ") {
		t.Fatalf("got stderr %q, want the resume line and the interrupt", res.stderr)
	}
	return res, strings.TrimPrefix(lines[n-2], "fleetctl: resume with: fleetctl watch --since ")
}

// change freezes or activates a machine through the API.
func change(t *testing.T, id string, to client.State, message string) {
	t.Helper()
	c, req := api(t), client.ChangeRequest{Message: message}
	var err error
	if to == client.Frozen {
		err = c.FreezeSlave(context.Background(), id, req, client.ChangeOptions{})
	} else {
		err = c.ActivateSlave(context.Background(), id, req, client.ChangeOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// wantChangeLines checks a watch's human lines: one per change, in order,
// as id, change, state and previous state.
func wantChangeLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	var short []string
	for _, l := range got {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("got line %q, want time, id, change, state, previous", l)
		}
		short = append(short, strings.Join(f[2:6], " "))
	}
	if strings.Join(short, "\n") != strings.Join(want, "\n") {
		t.Errorf("got lines\n%s\nwant (id change state previous)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWatchPrintsEachChangeOfTheSelectionOnceAndResumesExactly(t *testing.T) {
	p := fmt.Sprintf("wch%d", time.Now().UnixNano()%1e9)
	one, two, other := p+"-1", p+"-2", p+"-x"
	machines(t, one, two, other)
	_, listed, err := api(t).ListSlavesAt(context.Background(), "")
	if err != nil || listed == "" {
		t.Fatalf("list: cursor %q, %v", listed, err)
	}

	table := start(t, nil, "watch", p+"-[12]", "--state", "active")
	ndjson := start(t, nil, "watch", p+"-[12]", "--state", "active", "-o", "json")
	for _, r := range []*running{table, ndjson} {
		eventually(t, "watching", func() bool { return strings.Contains(r.stderr.String(), "fleetctl: watching 2 machines") })
	}
	// Out of the selection and back in, a change outside it, and one
	// more in it; the message is hostile.
	change(t, one, client.Frozen, "kernel \x1b[31mupgrade\x1b]0;owned\x07")
	change(t, other, client.Frozen, "not selected")
	change(t, one, client.Active, "done")
	change(t, two, client.Frozen, "")
	for _, r := range []*running{table, ndjson} {
		eventually(t, "three changes shown", func() bool { return len(watchLines(r)) >= 3 })
	}
	time.Sleep(time.Second) // nothing more comes
	res, cursor := interrupt(t, table)
	wantChangeLines(t, watchLines(table),
		one+" stateChanged FROZEN ACTIVE", one+" stateChanged ACTIVE FROZEN", two+" stateChanged FROZEN ACTIVE")
	wantNoControl(t, "watch", res.stdout)
	if !strings.Contains(res.stdout, `kernel \x1b[31mupgrade\x1b]0;owned\x07`) {
		t.Errorf("got %q, want the message with its escapes shown", res.stdout)
	}

	// -o json: each change exactly as the feed gives it, one a line.
	interrupt(t, ndjson)
	// The feed read here over plain HTTP, not through the client.
	resp, err := http.Get(servers[apitest.None].URL + "/api/slaves/changes?since=" + url.QueryEscape(listed))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Changes []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, raw := range page.Changes {
		var ch client.SlaveChange
		if err := json.Unmarshal(raw, &ch); err != nil {
			t.Fatal(err)
		}
		if ch.SlaveID == one || ch.SlaveID == two {
			want = append(want, string(raw))
		}
	}
	got := watchLines(ndjson)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got NDJSON\n%s\nwant the feed's changes of the selection\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range got {
		var ch client.SlaveChange
		if err := json.Unmarshal([]byte(l), &ch); err != nil || ch.Type != "stateChanged" {
			t.Errorf("line %q: %v, want a change", l, err)
		}
	}

	// A change made while no watch runs is the one a resumed watch shows
	// first; none before it is shown again.
	change(t, one, client.Frozen, "while away")
	resumed := start(t, nil, "watch", p+"-[12]", "--state", "active", "--since", cursor)
	eventually(t, "the change shown", func() bool { return len(watchLines(resumed)) >= 1 })
	time.Sleep(time.Second)
	interrupt(t, resumed)
	wantChangeLines(t, watchLines(resumed), one+" stateChanged FROZEN ACTIVE")
}

func TestWatchFromAForgedCursorIsAUsageErrorAndAnExpiredOneListsAgain(t *testing.T) {
	_, cursor, err := api(t).ListSlavesAt(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte(cursor)
	forged[len(forged)/2] ^= 1
	fleetctl(t, apitest.None, nil, "watch", "--since", string(forged)).wantError(t, exitUsage, "--since: refused (400)", "not a cursor this service issued")
	fleetctl(t, apitest.None, nil, "watch", "--since", "").wantError(t, exitUsage, "--since")

	// The feed keeps 24 hours; a gateway in front of the real API answers
	// the feed's 410 for one cursor, as the service does for an old one.
	target, _ := url.Parse(servers[apitest.None].URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/slaves/changes" && r.URL.Query().Get("since") == "expired" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			w.Write([]byte(`{"message":"cursor expired; list again"}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer gone.Close()
	p := fmt.Sprintf("wcg%d", time.Now().UnixNano()%1e9)
	machines(t, p+"-1")
	r := start(t, []string{"FLEETCTL_ENDPOINT=" + gone.URL}, "watch", p+"-*", "--since", "expired")
	eventually(t, "listing again", func() bool { return strings.Contains(r.stderr.String(), "fleetctl: watching 1 machine;") })
	change(t, p+"-1", client.Frozen, "")
	eventually(t, "the change shown", func() bool { return len(watchLines(r)) >= 1 })
	res, _ := interrupt(t, r)
	wantChangeLines(t, watchLines(r), p+"-1 stateChanged FROZEN ACTIVE")
	if first, _, _ := strings.Cut(res.stderr, "\n"); !strings.HasPrefix(first, "fleetctl: failed (410): cursor expired; list again: ") || !strings.Contains(first, "listing the machines again") {
		t.Errorf("got stderr %q, want the 410 said in one line first", res.stderr)
	}
}

// The columns of a watch stay where its first line put them: a machine
// added (no previous state), then frozen and decommissioned, as the
// service's feed gives them to the built binary.
func TestAWatchsColumnsStayPut(t *testing.T) {
	settleDrains(t)
	p := fmt.Sprintf("wcol%d", time.Now().UnixNano()%1e9)
	r := start(t, nil, "watch", p+"-*")
	eventually(t, "watching", func() bool { return strings.Contains(r.stderr.String(), "fleetctl: watching 0 machines") })
	machines(t, p+"-1")
	change(t, p+"-1", client.Frozen, "disk check")
	if err := api(t).DecommissionSlave(context.Background(), p+"-1", client.ChangeRequest{Message: "retiring"}, client.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three changes shown", func() bool { return len(watchLines(r)) >= 3 })
	interrupt(t, r)
	lines := watchLines(r)
	wantChangeLines(t, lines, p+"-1 added ACTIVE -", p+"-1 stateChanged FROZEN ACTIVE", p+"-1 stateChanged STARTING_DECOMMISSION FROZEN")
	wantFixedColumns(t, lines)
	report(t, p+"-1", 0) // its drain ends: the service's decommission limit is shared
}
