package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/fleetops/fleet/shared/publish"
)

// bus answers PutEvents, failing every entry whose detail holds refuse.
// A call with an entry whose detail holds lose is accepted whole, but its
// answer is lost (a timeout): the sender cannot tell what was accepted.
type bus struct {
	calls  int
	sent   []string
	refuse string
	lose   string
}

func (b *bus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls++
	if b.lose != "" && slices.ContainsFunc(in.Entries, func(e ebtypes.PutEventsRequestEntry) bool { return strings.Contains(aws.ToString(e.Detail), b.lose) }) {
		for _, e := range in.Entries {
			b.sent = append(b.sent, aws.ToString(e.Detail))
		}
		return nil, context.DeadlineExceeded
	}
	out := &eventbridge.PutEventsOutput{}
	for _, e := range in.Entries {
		if b.refuse != "" && strings.Contains(aws.ToString(e.Detail), b.refuse) {
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String("InternalFailure")})
			out.FailedEntryCount++
			continue
		}
		b.sent = append(b.sent, aws.ToString(e.Detail))
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String("id")})
	}
	return out, nil
}

// record is the stream record of the feed's entry at (shard, seq) of a
// state change of id, or of a head when seq is 0.
func record(shard, seq int, id string) events.DynamoDBEventRecord {
	image := map[string]events.DynamoDBAttributeValue{
		"shard": events.NewNumberAttribute(fmt.Sprint(shard)), "seq": events.NewNumberAttribute(fmt.Sprint(seq)),
	}
	if seq > 0 {
		image["slaveId"] = events.NewStringAttribute(id)
		image["kind"] = events.NewStringAttribute("stateChanged")
		image["at"] = events.NewNumberAttribute("1764190000000")
		image["writtenAt"] = events.NewNumberAttribute("1764190000000")
		image["previous"] = events.NewStringAttribute("ACTIVE")
		image["expiresAt"] = events.NewNumberAttribute("1764280000")
		image["entry"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"state": events.NewStringAttribute("FROZEN"), "timestamp": events.NewNumberAttribute("1764190000000"),
			"user": events.NewStringAttribute("ops"), "message": events.NewStringAttribute("line\u202e"),
		})
	} else {
		image["head"] = events.NewNumberAttribute("7")
	}
	return events.DynamoDBEventRecord{EventSource: "aws:dynamodb", EventName: "INSERT", EventID: fmt.Sprint("e", seq), Change: events.DynamoDBStreamRecord{
		NewImage: image, SequenceNumber: fmt.Sprintf("%05d", 100+seq),
	}}
}

func TestABatchBecomesOneEventPerEntryInItsOrder(t *testing.T) {
	e := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record(3, 0, "")}}
	for i := 1; i <= 23; i++ {
		e.Records = append(e.Records, record(3, i, fmt.Sprint("S", i)))
	}
	b := &bus{}
	res, err := publish.New(b, "fleet-slaves", slog.New(slog.DiscardHandler)).Handle(context.Background(), e)
	if err != nil || len(res.BatchItemFailures) != 0 {
		t.Fatalf("got %+v, %v, want no failure", res, err)
	}
	if len(b.sent) != 23 || b.calls != 3 {
		t.Fatalf("got %d events in %d calls, want 23 in 3 (10 a call, the head skipped)", len(b.sent), b.calls)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(b.sent[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["slaveId"] != "S1" || first["sequence"] != float64(1) || first["type"] != "stateChanged" || first["previousState"] != "ACTIVE" {
		t.Errorf("got %v, want the feed's body of S1's change at sequence 1", first)
	}
}

func TestAnEntryEventBridgeKeepsRefusingHandsTheBatchAgainFromIt(t *testing.T) {
	e := events.DynamoDBEvent{}
	for i := 1; i <= 15; i++ {
		e.Records = append(e.Records, record(5, i, fmt.Sprint("S", i)))
	}
	b := &bus{refuse: `"slaveId":"S13"`}
	res, err := publish.New(b, "fleet-slaves", slog.New(slog.DiscardHandler)).Handle(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.BatchItemFailures) != 1 || res.BatchItemFailures[0].ItemIdentifier != e.Records[12].Change.SequenceNumber {
		t.Errorf("got failures %+v, want the record of S13 (%s)", res.BatchItemFailures, e.Records[12].Change.SequenceNumber)
	}
	if len(b.sent) != 14 {
		t.Errorf("got %d events sent, want the other 14", len(b.sent))
	}
}

// handedAgain is e from the record a batch item failure names, as Lambda
// hands a batch again.
func handedAgain(t *testing.T, e events.DynamoDBEvent, res events.DynamoDBEventResponse) events.DynamoDBEvent {
	t.Helper()
	if len(res.BatchItemFailures) != 1 {
		t.Fatalf("got failures %+v, want one", res.BatchItemFailures)
	}
	for i, r := range e.Records {
		if r.Change.SequenceNumber == res.BatchItemFailures[0].ItemIdentifier {
			return events.DynamoDBEvent{Records: e.Records[i:]}
		}
	}
	t.Fatalf("failure %q names no record of the batch", res.BatchItemFailures[0].ItemIdentifier)
	return e
}

// counts is how many times each slave's event was sent.
func counts(t *testing.T, sent []string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, d := range sent {
		var c struct{ SlaveID string }
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		n[c.SlaveID]++
	}
	return n
}

func TestABatchHandedAgainSendsOnlyTheEventsEventBridgeDidNotAccept(t *testing.T) {
	e := events.DynamoDBEvent{}
	for i := 1; i <= 25; i++ {
		e.Records = append(e.Records, record(5, i, fmt.Sprint("S", i)))
	}
	b := &bus{refuse: `"slaveId":"S13"`}
	p := publish.New(b, "fleet-slaves", slog.New(slog.DiscardHandler))
	res, err := p.Handle(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	// Refused again: what the first handling skipped stays skipped.
	res, err = p.Handle(context.Background(), handedAgain(t, e, res))
	if err != nil {
		t.Fatal(err)
	}
	b.refuse = ""
	res, err = p.Handle(context.Background(), handedAgain(t, e, res))
	if err != nil || len(res.BatchItemFailures) != 0 {
		t.Fatalf("got %+v, %v, want no failure once EventBridge accepts S13", res, err)
	}
	got := counts(t, b.sent)
	for i := 1; i <= 25; i++ {
		if id := fmt.Sprint("S", i); got[id] != 1 {
			t.Errorf("%s's event was sent %d times, want once (sent: %v)", id, got[id], got)
		}
	}
}

func TestAnAnswerNeverReceivedHasItsEventsSentAgain(t *testing.T) {
	e := events.DynamoDBEvent{}
	for i := 1; i <= 15; i++ {
		e.Records = append(e.Records, record(5, i, fmt.Sprint("S", i)))
	}
	b := &bus{lose: `"slaveId":"S13"`}
	p := publish.New(b, "fleet-slaves", slog.New(slog.DiscardHandler))
	res, err := p.Handle(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	again := handedAgain(t, e, res)
	if first := again.Records[0].Change.SequenceNumber; first != e.Records[10].Change.SequenceNumber {
		t.Fatalf("the batch comes again from %s, want from S11 (%s), the first of the call without an answer", first, e.Records[10].Change.SequenceNumber)
	}
	b.lose = ""
	if res, err := p.Handle(context.Background(), again); err != nil || len(res.BatchItemFailures) != 0 {
		t.Fatalf("got %+v, %v, want no failure", res, err)
	}
	got := counts(t, b.sent)
	for i := 1; i <= 15; i++ {
		id, want := fmt.Sprint("S", i), 1
		if i > 10 {
			want = 2 // at least once: the lost answer may have accepted them
		}
		if got[id] != want {
			t.Errorf("%s's event was sent %d times, want %d", id, got[id], want)
		}
	}
}
