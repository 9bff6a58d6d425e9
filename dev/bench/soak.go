package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// soakLine is what the soak reads of a feed's change or a stream's line.
type soakLine struct {
	SlaveID   string `json:"slaveId"`
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp"`
	Sequence  int64  `json:"sequence"`
	Cursor    string `json:"cursor"`
	StreamEnd bool   `json:"streamEnd"`
	Message   string `json:"message"`
}

// feedPage is a long poll's answer.
type feedPage struct {
	Changes []soakLine `json:"changes"`
	Cursor  string     `json:"cursor"`
}

// seen is a change as a follower received it.
type seen struct {
	SlaveID  string
	Type     string
	Sequence int64
	lag      time.Duration // from the change's time to its arrival
}

// streamSoak follows the feed for e.soak (seconds in the smoke run) while
// the fleet changes as fast as the emulator takes it, in two ways from the
// same cursor: streams (stream=true), each resumed from the cursor of its
// last line, and the 20 s long poll. Both must receive the same changes in
// the same order (else it fails); the figures are the stream's change-to-line latency and
// what each way cost in requests and bytes. It runs only when asked
// (make soak, which holds each stream for StreamHold as deployed) and, in
// its smallest form, in make test, where each stream is held 2 s so that
// several resume within the run.
func streamSoak(ctx context.Context, e *env) ([]row, error) {
	d, hold := e.soak, time.Duration(0)
	if e.smoke {
		d, hold = 8*time.Second, 2*time.Second
	}
	if d == 0 {
		return nil, nil // not asked: make soak
	}
	f, err := newSlaveFunctions(ctx, e)
	if err != nil {
		return nil, err
	}
	h := f.routes
	run := time.Now().UnixMilli()
	var ids, machines []string
	for n := range 12 {
		ids = append(ids, fmt.Sprintf("soak-%d-S%d", run, n))
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"soak-%d"}`, ids[n], n))
	}
	if _, err := f.report(ctx, json.RawMessage(`{"machines":[`+strings.Join(machines, ",")+`]}`)); err != nil {
		return nil, fmt.Errorf("report the slaves: %w", err)
	}
	for _, id := range ids {
		defer serve(context.WithoutCancel(ctx), h, "DELETE", "/api/slaves/slave/"+id, "")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold > 0 && r.URL.Query().Get("stream") == "true" {
			// A stream ends a second before its deadline, as it does in Lambda.
			ctx, cancel := context.WithTimeout(r.Context(), hold+time.Second)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	sel := "id=" + strings.Join(ids, "&id=")
	var start feedPage
	if _, err := getJSON(ctx, srv.URL+"/api/slaves/changes?"+sel, &start); err != nil {
		return nil, err
	}

	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	var wg sync.WaitGroup
	var streamed, polled follower
	wg.Add(2)
	go func() { defer wg.Done(); streamed.stream(followCtx, srv.URL, sel, start.Cursor) }()
	go func() { defer wg.Done(); polled.poll(followCtx, srv.URL, sel, start.Cursor) }()

	// Freeze and activate round the slaves, one in five a freeze for an
	// hour (an expiringSet, and an expiringDeleted when it is activated).
	began, made := time.Now(), 0
	frozen := map[string]bool{}
	for time.Since(began) < d {
		id := ids[made%len(ids)]
		action, body := "freeze", ""
		if frozen[id] {
			action = "activate"
		} else if made%5 == 0 {
			body = `{"durationMillis":3600000,"revertToState":"ACTIVE"}`
		}
		if status, answer := serve(ctx, h, "POST", "/api/slaves/slave/"+id+"/"+action, body); status != http.StatusOK {
			return nil, fmt.Errorf("%s %s: got %d %s, want 200", action, id, status, answer)
		}
		frozen[id] = !frozen[id]
		made++
	}
	wrote := time.Since(began)
	// Caught up: both have received every change made (and the expiring
	// changes' own), and as many, twice in a row.
	caughtUp := func() bool { return polled.count() >= made && streamed.count() == polled.count() }
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && cmp.Or(streamed.failed(), polled.failed()) == nil; {
		if caughtUp() {
			time.Sleep(time.Second)
			if caughtUp() {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopFollowing()
	wg.Wait()
	if err := cmp.Or(streamed.failed(), polled.failed()); err != nil {
		return nil, err
	}

	same := slices.EqualFunc(streamed.got, polled.got, func(a, b seen) bool {
		return a.SlaveID == b.SlaveID && a.Type == b.Type && a.Sequence == b.Sequence
	})
	if !same || polled.count() < made {
		return nil, fmt.Errorf("%d changes made: the streams received %d, the long poll %d, not the same (first streamed %v, first polled %v)",
			made, len(streamed.got), len(polled.got), streamed.got[:min(3, len(streamed.got))], polled.got[:min(3, len(polled.got))])
	}
	var lags []time.Duration
	for _, s := range streamed.got {
		lags = append(lags, s.lag)
	}
	slices.Sort(lags)
	if len(lags) == 0 {
		return nil, errors.New("the stream received no change")
	}
	rate := float64(made) / wrote.Seconds()
	return []row{
		{figure: fmt.Sprintf("%v of %d changes (%.1f a second) to 12 slaves, followed from one cursor by streams and by the long poll", d.Round(time.Second), made, rate),
			value: fmt.Sprintf("streamed %d, long-polled %d, the same", len(streamed.got), len(polled.got)), target: "the same, every change", met: "yes"},
		{figure: "streams opened (each resumed from its last bookmark), and long polls, in that time",
			value: fmt.Sprintf("%d streams (%d ended with their cursor), %d polls", streamed.requests, streamed.ends, polled.requests)},
		{figure: "bytes received: streams against long polls",
			value: fmt.Sprintf("%.1f KB, %.1f KB (%.2f×)", float64(streamed.bytes)/1e3, float64(polled.bytes)/1e3, float64(streamed.bytes)/float64(max(1, polled.bytes)))},
		{figure: fmt.Sprintf("change's time → its line on the stream, median and 99th percentile of %d", len(lags)),
			value:  fmt.Sprintf("%d ms, %d ms", lags[len(lags)/2].Milliseconds(), lags[len(lags)*99/100].Milliseconds()),
			target: "< 2 s", met: verdict(lags[len(lags)/2] < 2*time.Second)},
	}, nil
}

// follower is one way of following the feed: what it received and what it
// cost.
type follower struct {
	mu                    sync.Mutex
	got                   []seen
	err                   error
	requests, ends, bytes int
}

func (f *follower) add(l soakLine) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, seen{SlaveID: l.SlaveID, Type: l.Type, Sequence: l.Sequence, lag: time.Since(time.UnixMilli(l.Timestamp))})
}

func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

func (f *follower) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *follower) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // stopped
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// stream reads streams one after the other, each from the cursor of the
// last line of the one before, until ctx ends.
func (f *follower) stream(ctx context.Context, base, sel, cursor string) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/slaves/changes?stream=true&"+sel+"&since="+url.QueryEscape(cursor), nil)
		if err != nil {
			f.fail(ctx, err)
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			f.fail(ctx, fmt.Errorf("open a stream: %w", err))
			return
		}
		f.requests++
		if resp.StatusCode != http.StatusOK {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			f.fail(ctx, fmt.Errorf("a stream: got %d %s", resp.StatusCode, raw))
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		ended := false
		for sc.Scan() {
			f.bytes += len(sc.Bytes()) + 1
			var l soakLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				f.fail(ctx, fmt.Errorf("a stream's line %q: %v", sc.Text(), err))
				resp.Body.Close()
				return
			}
			switch l.Type {
			case "bookmark":
				cursor, ended = l.Cursor, l.StreamEnd
			case "error":
				f.fail(ctx, fmt.Errorf("a stream's error line: %s", l.Message))
			default:
				f.add(l)
			}
		}
		resp.Body.Close()
		if ended {
			f.ends++
		} else if ctx.Err() == nil {
			f.fail(ctx, fmt.Errorf("a stream ended without its last bookmark: %v", sc.Err()))
			return
		}
	}
}

// poll follows with the 20 s long poll until ctx ends.
func (f *follower) poll(ctx context.Context, base, sel, cursor string) {
	for ctx.Err() == nil {
		var page feedPage
		n, err := getJSON(ctx, base+"/api/slaves/changes?wait=20&"+sel+"&since="+url.QueryEscape(cursor), &page)
		if err != nil {
			f.fail(ctx, err)
			return
		}
		f.requests++
		f.bytes += n
		for _, l := range page.Changes {
			f.add(l)
		}
		cursor = page.Cursor
	}
}

// getJSON decodes the 200 answer of a GET into v and returns its size.
func getJSON(ctx context.Context, target string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: got %d %s", target, resp.StatusCode, raw)
	}
	return len(raw), json.Unmarshal(raw, v)
}
