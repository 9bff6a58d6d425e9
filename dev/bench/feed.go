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

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// feedFigures measures the change feed against the emulator: how long a
// change takes to reach a follower that holds a waiting request
// (`wait=20`), from the moment the change is applied, and what one change
// and one poll of the feed cost in DynamoDB calls. The monthly cost at
// 100,000 machines is computed from those calls (docs/decisions.md "A
// change feed positioned in the change's own transaction").
func feedFigures(ctx context.Context, e *env) ([]row, error) {
	changes := 20
	if e.quick {
		changes = 5
	}
	cfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, stack.DynamoDBAttemptTimeout)
	if err != nil {
		return nil, err
	}
	c := newCalls()
	c.count(&cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg), stack.Tables, 0)
	h := web.Wrap(slaves.New(store, access.Policy{}, machine.Limits{}), web.Options{Logger: e.quiet})
	get := func(path string) (*httptest.ResponseRecorder, error) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec, nil
	}
	id := "feed-bench-S1"
	now := time.Now().UnixMilli()
	if err := store.Apply(ctx, id, machine.Observe(machine.Observation{ID: id, Host: "h", At: now}, now)); err != nil {
		return nil, err
	}
	rec, err := get("/api/slaves/?state=FROZEN")
	if err != nil {
		return nil, err
	}
	cursor := rec.Header().Get(slaves.CursorHeader)

	var lags []time.Duration
	var changeCalls, pollCalls string
	for i := range changes {
		target := machine.Frozen
		if i%2 == 1 {
			target = machine.Active
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
		ch := machine.Change{SlaveID: id, Target: target, User: "bench@example.com", Now: func() int64 { return time.Now().UnixMilli() }}
		if err := store.Apply(ctx, id, machine.UserChange(ch, machine.Limits{})); err != nil {
			return nil, err
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
