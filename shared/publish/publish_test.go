package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/fleetops/fleet/shared/publish"
)

// bus answers PutEvents, failing every entry whose detail holds refuse.
type bus struct {
	calls  int
	sent   []string
	refuse string
}

func (b *bus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls++
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
		t.Errorf("got %d events sent, want the other 14 (S14 and S15 again with the retry)", len(b.sent))
	}
}
