package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/fleetops/fleet/app/publisherapp"
	"github.com/fleetops/fleet/shared/slaves"
)

// feedFigures measures the change feed against the emulator: how long a
// change takes to reach a follower that holds a waiting request
// (`wait=20`), from the moment the change is applied; what one change and
// one poll of the feed cost in DynamoDB calls; what a follower costs while
// the fleet changes, at two rates of change (follow); and what
// PublisherFunction makes of a batch of the feed's entries
// (publishBatch). The monthly cost is computed from them (monthlyCost).
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
	// Slaves in several shards of the feed: the first for the lag, the
	// others for the follower.
	run := time.Now().UnixMilli()
	var ids, machines []string
	for n := range 16 {
		ids = append(ids, fmt.Sprintf("feed-bench-%d-S%d", run, n))
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"h%d"}`, ids[n], n))
	}
	if _, err := report(ctx, json.RawMessage(`{"machines":[`+strings.Join(machines, ",")+`]}`)); err != nil {
		return nil, fmt.Errorf("report the slaves: %w", err)
	}
	for _, id := range ids {
		defer serve(context.WithoutCancel(ctx), h, "DELETE", "/api/slaves/slave/"+id, "")
	}
	id := ids[0]
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
	c.got.Store(0)
	if _, err := get("/api/slaves/changes?since=" + url.QueryEscape(cursor)); err != nil {
		return nil, err
	}
	_, pollCalls = c.take()
	heads := c.got.Swap(0)
	slices.Sort(lags)
	median, worst := lags[len(lags)/2], lags[len(lags)-1]
	streamed, err := streamLags(ctx, h, id, changes, changes%2 == 1) // the loop above left id FROZEN after an odd count
	if err != nil {
		return nil, err
	}

	// A follower while the fleet changes, at two rates, for the slope of
	// what it costs a change (the monthly cost's 1% a minute is more than
	// the emulator serves).
	var rates []followed
	frozen := map[string]bool{}
	span := time.Duration(e.size(10, 4, 2)) * time.Second
	for _, rate := range []float64{2, 6} {
		fw, err := follow(ctx, e, h, ids[1:], frozen, rate, span, "")
		if err != nil {
			return nil, err
		}
		rates = append(rates, fw)
	}
	// The same follower with a selector that picks one of the 15 machines
	// changing: what the service sends it, against all of the changes.
	picked, err := follow(ctx, e, h, ids[1:], frozen, 6, span, "id="+url.QueryEscape(ids[1]))
	if err != nil {
		return nil, err
	}
	quiet, err := get("/api/slaves/changes?id=none&since=" + url.QueryEscape(cursor))
	if err != nil {
		return nil, err
	}
	all := rates[len(rates)-1]
	perChange := all.bytes / all.rate // bytes of one change as the feed sends it
	unfiltered := deployedChangesPerSecond * 60 * perChange
	// Filtered to 1% of the fleet: 1% of the changes, and a bookmark per
	// 20 s wait (about 3 a minute when nothing else answers sooner).
	filtered := deployedChangesPerSecond*60*0.01*perChange + 3*float64(quiet.Body.Len())
	e.costs.follower = rates
	published, err := publishBatch(ctx, e)
	if err != nil {
		return nil, err
	}
	e.costs.publisher = &published
	rows := []row{
		{figure: fmt.Sprintf("change → waiting follower, median of %d (emulator)", changes), value: fmt.Sprintf("%d ms", median.Milliseconds()),
			target: "< 2 s", met: verdict(median < 2*time.Second)},
		{figure: "change → waiting follower, slowest", value: fmt.Sprintf("%d ms", worst.Milliseconds())},
		{figure: fmt.Sprintf("change → its line on a stream (stream=true, id= the machine), median and slowest of %d (emulator)", changes),
			value: fmt.Sprintf("%d ms, %d ms", streamed[len(streamed)/2].Milliseconds(), streamed[len(streamed)-1].Milliseconds()), target: "< 2 s",
			met: verdict(streamed[len(streamed)/2] < 2*time.Second)},
		{figure: "calls of one user change", value: changeCalls},
		{figure: "calls of one poll of the feed with nothing new", value: fmt.Sprintf("%s (%d heads read)", pollCalls, heads)},
	}
	for _, r := range rates {
		rows = append(rows, row{figure: fmt.Sprintf("a follower holding wait=20 while %.0f changes a second are applied (emulator), a second", r.rate),
			value: fmt.Sprintf("%.2f requests of %s each; %.1f heads and %.1f entries read, %.2f Query", r.requests, ms(time.Duration(r.busy/r.requests*float64(time.Second))), r.heads, r.entries, r.queries)})
	}
	return append(rows,
		row{figure: fmt.Sprintf("same: requests a second at %.1f changes a second (1%% of %s machines a minute)", deployedChangesPerSecond, thousands(scaleMachines)),
			value: followerLine(rates, func(r followed) float64 { return r.requests }).extrapolated(deployedChangesPerSecond, count)},
		row{figure: "a follower at 6 changes a second (emulator): bytes a second with every change, and with a selector of 1 of the 15 machines",
			value: fmt.Sprintf("%.0f B/s (%.0f B a change); %.0f B/s", all.bytes, perChange, picked.bytes)},
		row{figure: fmt.Sprintf("same, a minute at 1%% of %s machines changing a minute (computed): every change, against a follower selecting 1%% of the fleet", thousands(scaleMachines)),
			value: fmt.Sprintf("%.0f KB against %.1f KB (%.0f×)", unfiltered/1000, filtered/1000, unfiltered/filtered)},
		row{figure: fmt.Sprintf("PublisherFunction, a batch of %d of the feed's entries: PutEvents calls, entries, handler time (EventBridge answering at once)", published.records),
			value: fmt.Sprintf("%d calls, %d entries (%.0f bytes an entry), %s", published.calls, published.entries, published.entryBytes, ms(published.took))},
	), nil
}

// streamLags is, for n changes of id (FROZEN at first when frozen), the
// time from the change applied to its line on a stream of id's changes
// (sorted), read as a client reads it.
func streamLags(ctx context.Context, h http.Handler, id string, n int, frozen bool) ([]time.Duration, error) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/api/slaves/changes?stream=true&id="+url.QueryEscape(id), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open the stream: %w", err)
	}
	defer resp.Body.Close()
	arrived := make(chan time.Time, n)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"type":"bookmark"`) {
				arrived <- time.Now()
			}
		}
	}()
	var lags []time.Duration
	for range n {
		action := "freeze"
		if frozen {
			action = "activate"
		}
		frozen = !frozen
		applied := time.Now()
		if status, body := serve(ctx, h, "POST", "/api/slaves/slave/"+id+"/"+action, ""); status != http.StatusOK {
			return nil, fmt.Errorf("%s %s: got %d %s, want 200", action, id, status, body)
		}
		select {
		case at := <-arrived:
			lags = append(lags, at.Sub(applied))
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("no line on the stream 30 s after %s %s", action, id)
		}
	}
	slices.Sort(lags)
	return lags, nil
}

// followed is what one follower cost a second while rate changes a second
// were applied: its requests, the seconds they were held (Lambda's
// duration), the feed's heads and entries they read and their Queries.
type followed struct {
	rate                                           float64
	requests, busy, heads, entries, queries, bytes float64
}

// followerLine is the line of one of followed's figures against the rate
// of change.
func followerLine(rates []followed, value func(followed) float64) line {
	var points []point
	for _, r := range rates {
		points = append(points, point{r.rate, value(r)})
	}
	return fit(points...)
}

// follow applies rate changes a second to ids, round-robin (freeze, then
// activate; frozen holds which are FROZEN), for d, while one follower asks the feed for what is new
// (wait=20), one request after another, through SlavesFunction's routes
// of its own over a counted client, with the selector query when not "".
func follow(ctx context.Context, e *env, h http.Handler, ids []string, frozen map[string]bool, rate float64, d time.Duration, query string) (followed, error) {
	f, err := newSlaveFunctions(ctx, e)
	if err != nil {
		return followed{}, err
	}
	rec := httptest.NewRecorder()
	f.routes.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/slaves/?state=DEAD", nil))
	cursor := rec.Header().Get(slaves.CursorHeader)
	f.calls.take()
	f.calls.got.Store(0)
	f.calls.scanned.Store(0)

	// Stopping cancels the request the follower holds.
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	type answer struct {
		requests, bytes int
		busy            time.Duration
		err             error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		for {
			began := time.Now()
			rec := httptest.NewRecorder()
			f.routes.ServeHTTP(rec, httptest.NewRequestWithContext(fctx, http.MethodGet, "/api/slaves/changes?wait=20&"+query+"&since="+url.QueryEscape(cursor), nil))
			a.busy += time.Since(began)
			a.requests++
			a.bytes += rec.Body.Len()
			if fctx.Err() != nil {
				done <- a
				return
			}
			var p struct {
				Cursor string `json:"cursor"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &p); rec.Code != http.StatusOK || err != nil {
				a.err = fmt.Errorf("the follower's request: %d %.200s", rec.Code, rec.Body)
				done <- a
				return
			}
			cursor = p.Cursor
		}
	}()
	began := time.Now()
	for i := 0; time.Since(began) < d; i++ {
		id := ids[i%len(ids)]
		action := "freeze"
		if frozen[id] {
			action = "activate"
		}
		if status, body := serve(ctx, h, "POST", "/api/slaves/slave/"+id+"/"+action, ""); status != http.StatusOK {
			return followed{}, fmt.Errorf("%s %s: got %d %s, want 200", action, id, status, body)
		}
		frozen[id] = !frozen[id]
		time.Sleep(time.Until(began.Add(time.Duration(float64(i+1) / rate * float64(time.Second)))))
	}
	stop()
	a := <-done
	if a.err != nil {
		return followed{}, a.err
	}
	// The last request ends when the next change or its wait does:
	// the seconds are those of the requests.
	span := a.busy.Seconds()
	byOp, _ := f.calls.take()
	return followed{rate: rate, requests: float64(a.requests) / span, busy: a.busy.Seconds() / span, bytes: float64(a.bytes) / span,
		heads: float64(f.calls.got.Load()) / span, entries: float64(f.calls.scanned.Load()) / span, queries: float64(byOp["Query"]) / span}, nil
}

// publishBatch runs PublisherFunction's handler, built by its composition
// root, over the batch the stream hands it in the deployment of the
// monthly cost: the changes of one batching window, at most the
// template's BatchSize, each the sample stream record of events/ under a
// sequence of its own; EventBridge answers at once and counts.
func publishBatch(ctx context.Context, e *env) (publishedBatch, error) {
	tpl := e.local.Template
	window, err := eventSeconds(tpl, "PublisherFunction", "Changes", "MaximumBatchingWindowInSeconds")
	if err != nil {
		return publishedBatch{}, err
	}
	size, err := eventSeconds(tpl, "PublisherFunction", "Changes", "BatchSize")
	if err != nil {
		return publishedBatch{}, err
	}
	records := int(math.Ceil(min(size, deployedChangesPerSecond*window)))
	raw, err := os.ReadFile(filepath.Join(e.root, "events", "publisher-stream-records.json"))
	if err != nil {
		return publishedBatch{}, err
	}
	var sample events.DynamoDBEvent
	if err := json.Unmarshal(raw, &sample); err != nil || len(sample.Records) == 0 {
		return publishedBatch{}, fmt.Errorf("events/publisher-stream-records.json: %v", err)
	}
	var batch events.DynamoDBEvent
	for i := range records {
		r := sample.Records[0]
		r.EventID = fmt.Sprintf("%s-%d", r.EventID, i)
		r.Change.SequenceNumber = fmt.Sprintf("%s%04d", r.Change.SequenceNumber, i)
		batch.Records = append(batch.Records, r)
	}
	bus := &countedBus{}
	publisherEnv, err := functionEnv(e, "PublisherFunction", nil)
	if err != nil {
		return publishedBatch{}, err
	}
	publish, err := publisherapp.New(ctx, publisherEnv, publisherapp.Options{Log: e.quiet, EventBridge: bus})
	if err != nil {
		return publishedBatch{}, err
	}
	began := time.Now()
	res, err := publish(ctx, batch)
	took := time.Since(began)
	if err != nil || len(res.BatchItemFailures) > 0 {
		return publishedBatch{}, fmt.Errorf("PublisherFunction over %d records: %v, %d failed", records, err, len(res.BatchItemFailures))
	}
	if bus.entries != records {
		return publishedBatch{}, fmt.Errorf("PublisherFunction over %d records: got %d events, want one a record", records, bus.entries)
	}
	return publishedBatch{records: records, calls: bus.calls, entries: bus.entries, entryBytes: float64(bus.bytes) / float64(bus.entries), took: took}, nil
}

// countedBus is EventBridge accepting every entry at once, counting the
// calls, the entries and their bytes (as EventBridge bills them: source,
// detail type, detail and resources).
type countedBus struct {
	calls, entries, bytes int
}

func (b *countedBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls++
	out := &eventbridge.PutEventsOutput{}
	for _, entry := range in.Entries {
		b.entries++
		b.bytes += len(aws.ToString(entry.Source)) + len(aws.ToString(entry.DetailType)) + len(aws.ToString(entry.Detail))
		for _, r := range entry.Resources {
			b.bytes += len(r)
		}
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(fmt.Sprint("event-", b.entries))})
	}
	return out, nil
}
