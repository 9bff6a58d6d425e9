//go:build integration

package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// s3Event is what these tests read of a delivered event.
type s3Event struct {
	DetailType string `json:"detail-type"`
	Time       string `json:"time"`
	Detail     struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key       string `json:"key"`
			Sequencer string `json:"sequencer"`
		} `json:"object"`
	} `json:"detail"`
}

// testHold is how long the emulator these tests start holds a write for
// its event (MOTOSERVER_EVENT_HOLD; 2 s unless set): long enough that a
// busy machine's delivery is never taken for one that failed, and that a
// write answered before it was not held.
const testHold = 2 * time.Minute

func holdWrites(t *testing.T) {
	t.Helper()
	t.Setenv("MOTOSERVER_EVENT_HOLD", fmt.Sprint(testHold.Seconds()))
}

func TestTheLogBucketsEventsReachTheHandlerInOrderBeforeTheWriteAnswers(t *testing.T) {
	holdWrites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	local, err := Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })

	var mu sync.Mutex
	var got []s3Event
	fail := false
	d, err := local.DeliverLogEvents(ctx, func(_ context.Context, raw json.RawMessage) error {
		var ev s3Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if fail {
			fail = false
			return errors.New("failed on purpose")
		}
		got = append(got, ev)
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	// Routing again changes nothing (make run does it when an emulator
	// comes back).
	if _, err := local.RouteLogEvents(ctx); err != nil {
		t.Fatal(err)
	}
	delivered := func() []s3Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]s3Event(nil), got...)
	}

	bucket := local.LogBuckets[0]
	put := func(key string) {
		t.Helper()
		if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}

	put("a/log")
	if ev := delivered(); len(ev) != 1 || ev[0].DetailType != "Object Created" || ev[0].Detail.Object.Key != "a/log" {
		t.Fatalf("got %+v right after the upload answered, want its Object Created applied", ev)
	}
	if _, err := local.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("a/log")}); err != nil {
		t.Fatal(err)
	}
	put("a/log")
	ev := delivered()
	if len(ev) != 3 || ev[1].DetailType != "Object Deleted" || ev[2].DetailType != "Object Created" {
		t.Fatalf("got %+v, want created, deleted, created", ev)
	}
	for i, e := range ev {
		if _, err := time.Parse(time.RFC3339, e.Time); err != nil || !strings.HasSuffix(e.Time, "Z") {
			t.Errorf("event %d: time %q is not ISO-8601 in UTC", i, e.Time)
		}
		if e.Detail.Bucket.Name != bucket {
			t.Errorf("event %d: bucket %q, want %q", i, e.Detail.Bucket.Name, bucket)
		}
		if i > 0 && !(e.Detail.Object.Sequencer > ev[i-1].Detail.Object.Sequencer) {
			t.Errorf("event %d: sequencer %s, want it after %s", i, e.Detail.Object.Sequencer, ev[i-1].Detail.Object.Sequencer)
		}
	}

	// Objects of other buckets match no rule: answered at once, delivered
	// nowhere.
	other := LocalBucketName("ReportsBucket")
	began := time.Now()
	if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(other), Key: aws.String("r"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if held := time.Since(began); held >= testHold {
		t.Errorf("a write to %s answered after %v, want before the hold of %v ended: not held", other, held, testHold)
	}
	if err := local.WaitLogEvents(ctx); err != nil {
		t.Errorf("WaitLogEvents: %v", err)
	}

	// A failed delivery is left in the queue and comes again a second
	// later (never sooner): applied then, it still answers the write
	// within the hold.
	mu.Lock()
	fail = true
	mu.Unlock()
	began = time.Now()
	put("a/failed-once")
	held := time.Since(began)
	ev = delivered()
	if len(ev) != 4 || ev[3].Detail.Object.Key != "a/failed-once" || held < time.Second || held >= testHold {
		t.Errorf("the write whose event failed once answered after %v with %d events applied, want it applied again a second later, before the answer", held, len(ev))
	}
}

func TestWritesAreNotHeldWhereNothingDeliversEvents(t *testing.T) {
	holdWrites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	local, err := Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	began := time.Now()
	for i := range 20 {
		key := "k" + string(rune('a'+i))
		if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(local.LogBuckets[0]), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took >= testHold {
		t.Errorf("20 uploads took %v, want less than one hold of %v: no hold without a rule", took, testHold)
	}
	if err := local.WaitLogEvents(ctx); !errors.Is(err, ErrNoLogEvents) {
		t.Errorf("WaitLogEvents: got %v, want ErrNoLogEvents", err)
	}
}

// Two deliveries share an emulator, as two make runs on one emulator do.
// When one stops, the other applies the next upload's event within the
// 2 s hold: the stopped one's last poll is not left to take it and hide it
// for the visibility timeout.
func TestAStoppedDeliveryHidesNoEventFromTheOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	local, err := Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	applied := make(chan string, 16)
	deliver := func() *Delivery {
		d, err := local.DeliverLogEvents(ctx, func(_ context.Context, raw json.RawMessage) error {
			var ev s3Event
			if err := json.Unmarshal(raw, &ev); err != nil {
				return err
			}
			applied <- ev.Detail.Object.Key
			return nil
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first, second := deliver(), deliver()
	t.Cleanup(first.Close)
	// A hidden event comes back only after the queue's visibility timeout
	// (the indexer's timeout): one applied before it was not hidden,
	// however slow the machine.
	indexer, err := local.Template.FunctionConfig(IndexerFunction)
	if err != nil {
		t.Fatal(err)
	}
	hidden := indexer.Timeout - time.Second
	bucket := local.LogBuckets[0]
	for i := range 3 {
		// Each time the second stops with a poll under way; the first
		// is left to deliver.
		time.Sleep(300 * time.Millisecond)
		second.Close()
		key := fmt.Sprintf("after-a-stop/%d", i)
		began := time.Now()
		if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-applied:
			if got != key {
				t.Errorf("got the event of %s, want %s's", got, key)
			}
		case <-time.After(time.Until(began.Add(hidden))):
			t.Fatalf("the event of %s was not applied within %v of its upload (the write answered after %v): a stopped delivery hid it",
				key, hidden, time.Since(began))
		}
		second = deliver()
	}
	second.Close()
}

// Many writers at once, as the task uploaders of a busy fleet: every
// upload is answered once its event is applied, and the writers waiting
// on the hold leave the delivery its share of the emulator. When each
// held write polled the queue instead, sixteen of them took the global
// lock thousands of times a second, and under load the delivery applied
// 5 events in 3 minutes while 1,151 waited.
func TestManyWritersLeaveTheDeliveryItsShare(t *testing.T) {
	const writers, each = 16, 25
	holdWrites(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	local, err := Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Close() })
	bucket := local.LogBuckets[0]
	var mu sync.Mutex
	applied := map[string]bool{}
	d, err := local.DeliverLogEvents(ctx, func(ctx context.Context, raw json.RawMessage) error {
		var ev s3Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		// The indexer reads the object back before it writes the index.
		if _, err := local.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(ev.Detail.Object.Key)}); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		applied[ev.Detail.Object.Key] = true
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)

	began := time.Now()
	var wg sync.WaitGroup
	var early atomic.Int64 // writes answered before their event was applied
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("writer-%d/%d", w, i)
				if _, err := local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if !applied[key] {
					early.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	uploaded := time.Since(began)
	if err := local.WaitLogEvents(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != writers*each {
		t.Errorf("%d events applied, want %d", len(applied), writers*each)
	}
	t.Logf("%d uploads by %d writers in %v, all applied after %v; %d answered before their event was applied",
		writers*each, writers, uploaded.Round(time.Millisecond), time.Since(began).Round(time.Millisecond), early.Load())
	if early.Load() > 0 {
		t.Errorf("%d of %d writes answered before their event was applied, want none (the hold is %v)", early.Load(), writers*each, testHold)
	}
}
