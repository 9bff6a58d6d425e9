//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetops/fleet/app/inventoryapp"
	"github.com/fleetops/fleet/app/publisherapp"
	"github.com/fleetops/fleet/dev/stack"
)

// TestEveryChangeBecomesOneEventWithASequenceThatNeverGoesBack drives the
// fleet through make run's API and reports while the changes table's
// stream reaches PublisherFunction's handler as make run delivers it, and
// compares what the bus delivers with the feed: every change of the feed
// is an event with the feed's body, a slave's sequences only grow, and the
// batch the handler fails in part (after publishing it: a timeout after
// the fact) comes again from its failed record, so its events arrive twice
// and are told apart by (slaveId, sequence).
func TestEveryChangeBecomesOneEventWithASequenceThatNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	quiet := slog.New(slog.DiscardHandler)
	h, err := api(ctx, local, quiet)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := local.RouteSlaveEvents(ctx, "events-test")
	if err != nil {
		t.Fatal(err)
	}
	env, err := localEnv(local, stack.PublisherFunction)
	if err != nil {
		t.Fatal(err)
	}
	publish, err := publisherapp.New(ctx, env, publisherapp.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	batches, failedOnce := 0, false
	delivery, err := local.DeliverSlaveChanges(ctx, func(ctx context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		res, err := publish(ctx, e)
		mu.Lock()
		defer mu.Unlock()
		batches++
		if err == nil && !failedOnce && len(res.BatchItemFailures) == 0 && len(e.Records) >= 4 {
			failedOnce = true
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: e.Records[len(e.Records)/2].Change.SequenceNumber}}}, nil
		}
		return res, err
	}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer delivery.Close()

	start := feedPage(t, h, "")
	// Slaves come from a report; users then change them at once, and one
	// is deleted.
	ids := make([]string, 12)
	var machines []string
	for i := range ids {
		ids[i] = fmt.Sprintf("events-S%d", i)
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"h%d","runningTasks":0}`, ids[i], i))
	}
	envInv, err := localEnv(local, "InventoryFunction")
	if err != nil {
		t.Fatal(err)
	}
	report, err := inventoryapp.New(ctx, envInv, inventoryapp.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := report(ctx, json.RawMessage(`{"detail-type":"Machine Report","detail":{"machines":[`+strings.Join(machines, ",")+`]}}`)); err != nil || res.Failed > 0 {
		t.Fatalf("report: %+v, %v", res, err)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for _, action := range []string{"freeze", "activate", "freeze"} {
				change(t, h, http.MethodPost, "/api/slaves/slave/"+id+"/"+action, `{"user":"ops","message":"event test"}`)
			}
		})
	}
	wg.Wait()
	change(t, h, http.MethodPost, "/api/slaves/slave/"+ids[0]+"/decommission", `{"user":"ops"}`)

	// The feed's changes since the start, in its order.
	var feed []map[string]any
	for cursor := start.Cursor; ; {
		page := feedPage(t, h, cursor)
		for _, c := range page.Changes {
			var m map[string]any
			json.Unmarshal(c, &m)
			feed = append(feed, m)
		}
		if len(page.Changes) == 0 {
			break
		}
		cursor = page.Cursor
	}
	if want := len(ids)*4 + 1; len(feed) != want {
		t.Fatalf("got %d changes in the feed, want %d", len(feed), want)
	}

	// The events, until every change of the feed has come.
	got := map[string]map[string]any{}
	duplicates := 0
	// A bound on a stalled delivery, not a figure: the loop ends when every
	// change has come, seconds after the last on a quiet machine. On two
	// CPUs loaded by the rest of make test (load 10), a minute was not
	// always enough.
	deadline := time.Now().Add(3 * time.Minute)
	for len(got) < len(feed) && time.Now().Before(deadline) {
		out, err := local.SQS().ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var e struct {
				Source     string         `json:"source"`
				DetailType string         `json:"detail-type"`
				Detail     map[string]any `json:"detail"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
				t.Fatal(err)
			}
			if e.Source != "fleet.slaves" || e.DetailType != "Slave Changed" {
				t.Errorf("got source %q, detail-type %q", e.Source, e.DetailType)
			}
			key := fmt.Sprint(e.Detail["slaveId"], "/", e.Detail["sequence"])
			if seen, ok := got[key]; ok {
				duplicates++
				if fmt.Sprint(seen) != fmt.Sprint(e.Detail) {
					t.Errorf("duplicate %s differs: %v and %v", key, seen, e.Detail)
				}
			} else {
				got[key] = e.Detail
			}
			local.SQS().DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queue), ReceiptHandle: m.ReceiptHandle})
		}
	}
	last := map[any]float64{}
	for _, c := range feed {
		key := fmt.Sprint(c["slaveId"], "/", c["sequence"])
		e, ok := got[key]
		if !ok {
			t.Errorf("change %s of the feed (%v) has no event", key, c["type"])
			continue
		}
		if want, _ := json.Marshal(c); string(want) != mustJSON(e) {
			t.Errorf("event %s: got %s, want the feed's %s", key, mustJSON(e), want)
		}
		seq := c["sequence"].(float64)
		if seq <= last[c["slaveId"]] {
			t.Errorf("slave %v: sequence %v after %v", c["slaveId"], seq, last[c["slaveId"]])
		}
		last[c["slaveId"]] = seq
	}
	if len(got) != len(feed) {
		t.Errorf("got %d distinct events, want the feed's %d", len(got), len(feed))
	}
	mu.Lock()
	defer mu.Unlock()
	if !failedOnce || duplicates == 0 {
		t.Errorf("got a batch failed in part %v and %d duplicates, want the failed part delivered again", failedOnce, duplicates)
	}
	t.Logf("%d changes, %d events and %d duplicates in %d batches", len(feed), len(got)+duplicates, duplicates, batches)
}

type changesPage struct {
	Changes []json.RawMessage `json:"changes"`
	Cursor  string            `json:"cursor"`
}

func feedPage(t *testing.T, h http.Handler, since string) changesPage {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/slaves/changes?since="+since, nil))
	var p changesPage
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
		t.Fatalf("GET the feed: %d %s", rec.Code, rec.Body)
	}
	return p
}

func change(t *testing.T, h http.Handler, method, target, body string) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("%s %s: got %d %s", method, target, rec.Code, rec.Body)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
