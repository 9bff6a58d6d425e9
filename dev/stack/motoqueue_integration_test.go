//go:build integration

package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The launcher reads queues without walking them (queues_read_cheaply in
// dev/motoserver.py): a receive, a delete and the counts must answer as
// moto's own do. A local watcher (make events) receives, deletes what it
// received, sometimes twice after a retry, and its lag is the counts.
func TestMotoQueuesDeleteWhatWasReceivedAndCountTheRest(t *testing.T) {
	ctx := context.Background()
	client := sqsClient(emptyMoto(t).Endpoint)
	queue, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("watcher")})
	if err != nil {
		t.Fatal(err)
	}
	url := queue.QueueUrl
	for _, body := range []string{"m1", "m2", "m3", "m4", "m5"} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(n int32) []sqstypes.Message {
		t.Helper()
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: n, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		return out.Messages
	}
	counts := func() (visible, inFlight string) {
		t.Helper()
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
	}

	first := receive(3)
	if got := bodies(first); got != "m1 m2 m3" {
		t.Fatalf("first receive of 3: got %q, want the three sent first", got)
	}
	for range 2 { // deleting again what was deleted is accepted, as SQS does
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: first[1].ReceiptHandle}); err != nil {
			t.Fatalf("delete m2: %v", err)
		}
	}
	if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: aws.String("never-given")}); err == nil ||
		!strings.Contains(err.Error(), "ReceiptHandleIsInvalid") {
		t.Errorf("delete with a handle never given: got %v, want ReceiptHandleIsInvalid", err)
	}
	if visible, inFlight := counts(); visible != "2" || inFlight != "2" {
		t.Errorf("after receiving 3 of 5 and deleting 1: got %s visible, %s in flight, want 2 and 2", visible, inFlight)
	}
	if got := bodies(receive(10)); got != "m4 m5" {
		t.Errorf("second receive: got %q, want the two never received", got)
	}
	if visible, inFlight := counts(); visible != "0" || inFlight != "4" {
		t.Errorf("after receiving all: got %s visible, %s in flight, want 0 and 4", visible, inFlight)
	}
}

func bodies(messages []sqstypes.Message) string {
	var b []string
	for _, m := range messages {
		b = append(b, aws.ToString(m.Body))
	}
	return strings.Join(b, " ")
}
