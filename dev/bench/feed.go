package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"time"

	"github.com/fleetops/fleet/shared/slaves"
)

// feedFigures measures the change feed against the emulator: how long a
// change takes to reach a follower that holds a waiting request
// (`wait=20`), from the moment the change is applied, and what one change
// and one poll of the feed cost in DynamoDB calls. The monthly cost at
// 100,000 machines is computed from those calls (docs/decisions.md "A
// change feed positioned in the change's own transaction").
func feedFigures(ctx context.Context, e *env) ([]row, error) {
	changes := e.size(20, 5, 2)
	f, err := newSlaveFunctions(ctx, e)
	if err != nil {
		return nil, err
	}
	c, h, report := f.calls, f.routes, f.report
	get := func(path string) (*httptest.ResponseRecorder, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec, nil
	}
	id := fmt.Sprintf("feed-bench-%d-S1", time.Now().UnixMilli())
	if _, err := report(ctx, json.RawMessage(fmt.Sprintf(`{"machines":[{"id":%q,"host":"h"}]}`, id))); err != nil {
		return nil, fmt.Errorf("report the slave: %w", err)
	}
	defer serve(context.WithoutCancel(ctx), h, "DELETE", "/api/slaves/slave/"+id, "")
	rec, err := get("/api/slaves/?state=FROZEN")
	if err != nil {
		return nil, err
	}
	cursor := rec.Header().Get(slaves.CursorHeader)

	var lags []time.Duration
	var changeCalls, pollCalls string
	for i := range changes {
		action := "freeze"
		if i%2 == 1 {
			action = "activate"
		}
		type seen struct {
			at     time.Time
			cursor string
			err    error
		}
		got := make(chan seen, 1)
		go func() {
			rec, err := get("/api/slaves/changes?wait=20&since=" + url.QueryEscape(cursor))
			if err != nil {
				got <- seen{err: err}
				return
			}
			var p struct {
				Changes []json.RawMessage `json:"changes"`
				Cursor  string            `json:"cursor"`
			}
			err = json.Unmarshal(rec.Body.Bytes(), &p)
			if err == nil && len(p.Changes) != 1 {
				err = fmt.Errorf("got %d changes, want 1", len(p.Changes))
			}
			got <- seen{at: time.Now(), cursor: p.Cursor, err: err}
		}()
		time.Sleep(700 * time.Millisecond) // the follower is waiting
		c.take()
		applied := time.Now()
		if status, body := serve(ctx, h, "POST", "/api/slaves/slave/"+id+"/"+action, ""); status != http.StatusOK {
			return nil, fmt.Errorf("%s %s: got %d %s, want 200", action, id, status, body)
		}
		_, changeCalls = c.take()
		s := <-got
		if s.err != nil {
			return nil, s.err
		}
		lags = append(lags, s.at.Sub(applied))
		cursor = s.cursor
	}
	c.take()
	if _, err := get("/api/slaves/changes?since=" + url.QueryEscape(cursor)); err != nil {
		return nil, err
	}
	_, pollCalls = c.take()
	slices.Sort(lags)
	median, worst := lags[len(lags)/2], lags[len(lags)-1]

	// At 100,000 machines with 1% changing a minute, on-demand prices: each
	// change adds 4 write units (the head's update and the ~1 KB entry, in
	// a transaction) and 2 read units (the head in the transactional read).
	const (
		perMonth   = 1_000 * 60 * 24 * 30 // changes
		writePrice = 0.625 / 1e6          // $ a write unit
		readPrice  = 0.125 / 1e6          // $ a read unit
		gbSecond   = 0.0000133334         // $ a GB-second of arm64 Lambda
	)
	writes := perMonth * 4 * writePrice
	reads := perMonth * 2 * readPrice
	// A follower holding wait=20 all month: the heads (16 strongly
	// consistent reads) twice a second, and a 1 GB function held 20 s three
	// times a minute.
	followerReads := 2 * 16 * 3600 * 24 * 30 * readPrice
	followerLambda := 3 * 20 * 60 * 24 * 30 * gbSecond
	return []row{
		{figure: fmt.Sprintf("change → waiting follower, median of %d (emulator)", changes), value: fmt.Sprintf("%d ms", median.Milliseconds()),
			target: "< 2 s", met: verdict(median < 2*time.Second)},
		{figure: "change → waiting follower, slowest", value: fmt.Sprintf("%d ms", worst.Milliseconds())},
		{figure: "calls of one user change", value: changeCalls},
		{figure: "calls of one poll of the feed with nothing new", value: pollCalls},
		{figure: "feed writes and reads a month, 100,000 machines, 1% changing a minute (computed)", value: fmt.Sprintf("$%.0f + $%.0f", writes, reads)},
		{figure: "one follower holding wait=20 all month (computed)", value: fmt.Sprintf("$%.0f of reads + $%.0f of Lambda", followerReads, followerLambda)},
	}, nil
}
