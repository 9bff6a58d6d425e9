package stack

// Local S3 event delivery: the log buckets' S3 events reach the task-log
// indexer locally along the path a deployment gives them, S3 → EventBridge →
// IndexerFunction, with an SQS queue standing in for the rule's Lambda
// target and a loop draining it in place of Lambda's invocations
// (docs/behaviour.md "Task-log index").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The indexer's rule is its function's EventBridgeRule event in the
// template; locally it keeps the function and event names, on the
// emulator's default bus, and its target is a queue named as what it
// stands in for.
const (
	IndexerFunction = "IndexerFunction"
	logObjectsEvent = "LogObjects"
	LogEventsRule   = IndexerFunction + logObjectsEvent
	LogEventsQueue  = LogEventsRule + "-lambda-target"
	// logEventsWait is the seconds of a long poll: short, since a delivery
	// that stops lets its poll end rather than abandon it (Delivery.run).
	logEventsWait = 1
	// logEventsCall bounds one call of the delivery to the emulator.
	logEventsCall      = 30 * time.Second
	logEventsRetryWait = time.Second
	// logEventsRetry is the seconds after which an event the handler
	// failed comes again. Deployed, Lambda retries a failed asynchronous
	// invocation after a minute or two; locally a failure is most often
	// the emulator too busy to answer in time, and an event held for the
	// queue's visibility timeout (the function's, 30 s) was a log missing
	// from the index for that long.
	logEventsRetry = 1
)

// EventPattern returns the pattern of function's EventBridgeRule event
// named event, as the template declares it (intrinsics resolved), in JSON.
func (t *Template) EventPattern(function, event string) (string, error) {
	props, err := t.functionProperties(function)
	if err != nil {
		return "", err
	}
	ev := mapOf(mapOf(props["Events"])[event])
	if stringOf(ev["Type"]) != "EventBridgeRule" {
		return "", fmt.Errorf("function %s has no EventBridgeRule event %s", function, event)
	}
	pattern, err := t.resolve(mapOf(ev["Properties"])["Pattern"], LocalName)
	if err != nil {
		return "", fmt.Errorf("function %s: event %s: pattern: %w", function, event, err)
	}
	raw, err := json.Marshal(pattern)
	if err != nil {
		return "", fmt.Errorf("function %s: event %s: pattern: %w", function, event, err)
	}
	return string(raw), nil
}

// RouteLogEvents routes the log buckets' S3 events into LogEventsQueue as a
// deployment routes them to IndexerFunction: EventBridge notifications on
// (what the operator does to each log bucket), the template's rule of
// IndexerFunction on the default bus, its target the queue. It is
// idempotent, and returns the queue's URL.
func (l *Local) RouteLogEvents(ctx context.Context) (string, error) {
	for _, b := range l.LogBuckets {
		_, err := l.S3.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{
			Bucket:                    aws.String(b),
			NotificationConfiguration: &s3types.NotificationConfiguration{EventBridgeConfiguration: &s3types.EventBridgeConfiguration{}},
		})
		if err != nil {
			return "", fmt.Errorf("eventbridge notifications of bucket %s: %w", b, err)
		}
	}
	pattern, err := l.Template.EventPattern(IndexerFunction, logObjectsEvent)
	if err != nil {
		return "", err
	}
	fn, err := l.Template.FunctionConfig(IndexerFunction)
	if err != nil {
		return "", err
	}
	// A message in flight stays invisible while the handler may still run
	// (the function's timeout); a failed one is delivered again after that.
	visibility := map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(fn.Timeout.Seconds()))}
	return l.routeToQueue(ctx, nil, LogEventsRule, pattern, IndexerFunction, LogEventsQueue, visibility)
}

// routeToQueue routes the events of bus (nil: the default bus) that match
// pattern to the queue named queue, created with attributes if absent, by
// the rule named rule with one target of id target, and returns the
// queue's URL. It is idempotent.
func (l *Local) routeToQueue(ctx context.Context, bus *string, rule, pattern, target, queue string, attributes map[string]string) (string, error) {
	queues := sqsClient(l.Moto.Endpoint)
	q, err := queues.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queue), Attributes: attributes})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", queue, err)
	}
	attrs, err := queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", queue, err)
	}
	rules := eventBridgeClient(l.Moto.Endpoint)
	if _, err := rules.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: bus, EventPattern: aws.String(pattern)}); err != nil {
		return "", fmt.Errorf("rule %s: %w", rule, err)
	}
	_, err = rules.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: aws.String(rule), EventBusName: bus,
		Targets: []ebtypes.Target{{Id: aws.String(target), Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}},
	})
	if err != nil {
		return "", fmt.Errorf("rule %s: target: %w", rule, err)
	}
	return aws.ToString(q.QueueUrl), nil
}

// Delivery is the local equivalent of EventBridge's delivery to
// IndexerFunction: a loop that long-polls LogEventsQueue and hands each
// event, its body unchanged, to the handler.
type Delivery struct {
	queueURL string
	sqs      *sqs.Client
	cancel   context.CancelFunc
	done     chan struct{}
}

// DeliverLogEvents routes the log buckets' S3 events (RouteLogEvents) and
// delivers them to handle, IndexerFunction's handler, until Close. An event
// handle applied is deleted; one it failed is left in the queue, delivered
// again a second later, as Lambda retries a failed invocation. handle logs
// its own outcome; log gets the delivery's errors. The emulator answers an
// S3 write once its event is applied, at most 2 s later (dev/motoserver.py).
func (l *Local) DeliverLogEvents(ctx context.Context, handle func(context.Context, json.RawMessage) error, log *slog.Logger) (*Delivery, error) {
	url, err := l.RouteLogEvents(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &Delivery{queueURL: url, sqs: sqsClient(l.Moto.Endpoint), cancel: cancel, done: make(chan struct{})}
	go d.run(ctx, handle, log)
	return d, nil
}

func (d *Delivery) run(stop context.Context, handle func(context.Context, json.RawMessage) error, log *slog.Logger) {
	defer close(d.done)
	// A poll is never abandoned: the emulator answers a receive whose
	// client went away all the same, and hides what it took from every
	// other delivery for the visibility timeout (a second make run that
	// stopped hid an event for 30 s). So a stop lets the poll under way
	// end, within logEventsWait, and applies and deletes what it took.
	ctx := context.WithoutCancel(stop)
	for stop.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, logEventsCall)
		out, err := d.sqs.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(d.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: logEventsWait,
		})
		cancel()
		if err != nil {
			if stop.Err() == nil {
				// The emulator may have stopped; make run recreates the queue
				// when one runs there again.
				log.Warn("local S3 event delivery: receive", "queue", LogEventsQueue, "error", err.Error())
				sleep(stop, logEventsRetryWait)
			}
			continue
		}
		for _, m := range out.Messages {
			d.apply(ctx, m, handle, log)
		}
	}
}

// apply hands one event to handle and deletes it once applied; one that
// failed is left in the queue, as Lambda retries a failed invocation, and
// comes again after logEventsRetry.
func (d *Delivery) apply(ctx context.Context, m sqstypes.Message, handle func(context.Context, json.RawMessage) error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, logEventsCall)
	defer cancel()
	if handle(ctx, json.RawMessage(aws.ToString(m.Body))) != nil {
		_, err := d.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(d.queueURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: logEventsRetry,
		})
		if err != nil {
			log.Warn("local S3 event delivery: retry", "queue", LogEventsQueue, "error", err.Error())
		}
		return
	}
	if _, err := d.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		log.Warn("local S3 event delivery: delete", "queue", LogEventsQueue, "error", err.Error())
	}
}

// Close stops the delivery and waits for its loop to end: for the poll
// under way to end (at most logEventsWait) and its events to be applied.
func (d *Delivery) Close() {
	d.cancel()
	<-d.done
}

// ErrNoLogEvents is WaitLogEvents' error when nothing routes the log
// buckets' S3 events on the emulator.
var ErrNoLogEvents = errors.New("no " + LogEventsQueue + " queue: nothing delivers the log buckets' S3 events here (make run does)")

// WaitLogEvents waits until LogEventsQueue holds no visible and no
// in-flight message, that is until every S3 event sent so far is applied
// (or failed), polling every 50 ms until ctx ends.
func (l *Local) WaitLogEvents(ctx context.Context) error {
	queues := sqsClient(l.Moto.Endpoint)
	q, err := queues.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(LogEventsQueue)})
	var missing *sqstypes.QueueDoesNotExist
	if errors.As(err, &missing) {
		return ErrNoLogEvents
	}
	if err != nil {
		return err
	}
	for {
		attrs, err := queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: q.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			},
		})
		if err != nil {
			return err
		}
		if attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" &&
			attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] == "0" {
			return nil
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("S3 events still queued in %s: %w", LogEventsQueue, ctx.Err())
		}
	}
}

// sleep waits d, or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func localConfig() aws.Config {
	return aws.Config{
		Region:      LocalRegion,
		Credentials: credentials.NewStaticCredentialsProvider(localAccessKey, localSecretKey, ""),
	}
}

func sqsClient(endpoint string) *sqs.Client {
	return sqs.NewFromConfig(localConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

func eventBridgeClient(endpoint string) *eventbridge.Client {
	return eventbridge.NewFromConfig(localConfig(), func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(endpoint) })
}
