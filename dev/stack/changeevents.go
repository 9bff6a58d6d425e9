package stack

// Local delivery of the "Slave Changed" events: the changes table's DynamoDB
// stream reaches PublisherFunction's handler as Lambda's event source
// mapping hands it over deployed (in the stream's order, in batches, a
// batch that fails in part handed again from its first failed record), and
// the handler puts its events on the template's bus in the emulator, where
// rules route them (docs/behaviour.md "Events for other systems").

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The names the template gives the publisher, its stream and its bus.
const (
	PublisherFunction = "PublisherFunction"
	ChangesTable      = "ChangesTable"
	SlaveEventsBus    = "SlaveEventsBus"
	// changeBatch is the template's BatchSize of the stream's mapping.
	changeBatch = 100
	// changePoll is how often an idle stream is read again, as Lambda
	// polls a shard about four times a second.
	changePoll = 250 * time.Millisecond
	// changeRetry is the wait before a failed batch is handed again; it
	// doubles with each failure in a row, up to changeRetryMax, so that a
	// busy emulator is not sent the batch again every second.
	changeRetry    = time.Second
	changeRetryMax = 16 * time.Second
	// changeLag is how far behind the changes a batch may start before the
	// delivery says it lags (PublisherLagAlarm's minute, deployed, is for
	// an operator; locally a watcher expects a line within seconds).
	changeLag = 5 * time.Second
)

// SlaveEventsPattern matches the publisher's events on the bus.
const SlaveEventsPattern = `{"source":["fleet.slaves"],"detail-type":["Slave Changed"]}`

// CreateEventBuses creates the template's EventBridge buses, named by
// LocalName, where missing.
func (l *Local) CreateEventBuses(ctx context.Context) error {
	buses := eventBridgeClient(l.Moto.Endpoint)
	for _, id := range l.Template.resourcesOf(eventBus) {
		_, err := buses.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(LocalName(id))})
		var exists *ebtypes.ResourceAlreadyExistsException
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("event bus %s: %w", id, err)
		}
	}
	return nil
}

// RouteSlaveEvents routes the bus's "Slave Changed" events to the queue
// named queue, created if absent, with a rule of the same name, and
// returns the queue's URL: how `make events` and the tests watch them.
func (l *Local) RouteSlaveEvents(ctx context.Context, queue string) (string, error) {
	if err := l.CreateEventBuses(ctx); err != nil {
		return "", err
	}
	return l.routeToQueue(ctx, aws.String(LocalName(SlaveEventsBus)), queue, SlaveEventsPattern, queue, queue, nil)
}

// ChangeDelivery is the local equivalent of the stream's event source
// mapping to PublisherFunction.
type ChangeDelivery struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// DeliverSlaveChanges hands the changes table's stream, from its oldest
// record, to handle, PublisherFunction's handler, until Close; log gets the
// delivery's own errors.
func (l *Local) DeliverSlaveChanges(ctx context.Context, handle func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), log *slog.Logger) (*ChangeDelivery, error) {
	if err := l.CreateEventBuses(ctx); err != nil {
		return nil, err
	}
	table, err := l.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(LocalName(ChangesTable))})
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", ChangesTable, err)
	}
	arn := aws.ToString(table.Table.LatestStreamArn)
	if arn == "" {
		return nil, fmt.Errorf("table %s has no stream: the emulator's table predates its StreamSpecification; restart the emulator", ChangesTable)
	}
	streams := dynamodbstreams.NewFromConfig(localConfig(), func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(l.Moto.Endpoint) })
	stream, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("stream of %s: %w", ChangesTable, err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &ChangeDelivery{cancel: cancel, done: make(chan struct{})}
	var readers sync.WaitGroup
	for _, sh := range stream.StreamDescription.Shards {
		r := shardReader{streams: streams, arn: arn, shard: aws.ToString(sh.ShardId), handle: handle, log: log}
		readers.Go(func() { r.run(ctx) })
	}
	go func() { readers.Wait(); close(d.done) }()
	return d, nil
}

// Close stops the delivery once the batch under way is handled.
func (d *ChangeDelivery) Close() {
	d.cancel()
	<-d.done
}

// shardReader reads one shard of the stream in order.
type shardReader struct {
	streams *dynamodbstreams.Client
	arn     string
	shard   string
	handle  func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	log     *slog.Logger
}

func (r shardReader) run(ctx context.Context) {
	iterator, err := r.iterator(ctx, streamtypes.ShardIteratorTypeTrimHorizon, "")
	retry := changeRetry
	var lag lagReport
	for ctx.Err() == nil {
		if err != nil {
			r.log.Warn("local delivery of the changes stream", "shard", r.shard, "error", err.Error())
			sleep(ctx, changeRetry)
			iterator, err = r.iterator(ctx, streamtypes.ShardIteratorTypeTrimHorizon, "")
			continue
		}
		out, gerr := r.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iterator, Limit: aws.Int32(changeBatch)})
		if gerr != nil {
			r.log.Warn("local delivery of the changes stream: read", "shard", r.shard, "error", gerr.Error())
			sleep(ctx, changeRetry)
			continue
		}
		if len(out.Records) == 0 {
			lag.caughtUp(r, time.Now())
			iterator = out.NextShardIterator
			sleep(ctx, changePoll)
			continue
		}
		event, cerr := lambdaEvent(r.arn, out.Records)
		if cerr != nil {
			r.log.Error("local delivery of the changes stream: records skipped", "shard", r.shard, "error", cerr.Error())
			iterator = out.NextShardIterator
			continue
		}
		lag.observe(r, out.Records, time.Now())
		again := r.deliver(ctx, event)
		if again == "" {
			iterator = out.NextShardIterator
			retry = changeRetry
			continue
		}
		sleep(ctx, retry)
		retry = min(2*retry, changeRetryMax)
		iterator, err = r.iterator(ctx, streamtypes.ShardIteratorTypeAtSequenceNumber, again)
	}
}

// lagReport says once when a shard's delivery falls more than changeLag
// behind the changes, and once when it has caught up again: a line per
// batch would bury the log while it lags.
type lagReport struct {
	since time.Time     // when the delivery began to lag; zero when it does not
	worst time.Duration // the furthest behind it has been since
}

// observe notes a batch of records about to be handed over at now.
func (l *lagReport) observe(r shardReader, records []streamtypes.Record, now time.Time) {
	created := records[0].Dynamodb.ApproximateCreationDateTime
	if created == nil {
		return
	}
	behind := now.Sub(*created).Round(100 * time.Millisecond)
	switch {
	case behind <= changeLag:
		l.caughtUp(r, now)
	case l.since.IsZero():
		l.since, l.worst = now, behind
		r.log.Warn("local delivery of the changes stream runs behind: the events reach the bus late", "shard", r.shard, "behind", behind.String(), "records_in_batch", len(records))
	default:
		l.worst = max(l.worst, behind)
	}
}

// caughtUp notes that the delivery is no more than changeLag behind.
func (l *lagReport) caughtUp(r shardReader, now time.Time) {
	if l.since.IsZero() {
		return
	}
	r.log.Info("local delivery of the changes stream caught up", "shard", r.shard, "lagged_for", now.Sub(l.since).Round(time.Second).String(), "worst", l.worst.String())
	l.since, l.worst = time.Time{}, 0
}

// deliver hands event to the handler and returns the sequence number to
// hand the stream again from, "" when the whole batch is done.
func (r shardReader) deliver(ctx context.Context, event events.DynamoDBEvent) string {
	res, err := r.handle(ctx, event)
	if err != nil {
		r.log.Warn("PublisherFunction failed a batch; it comes again", "shard", r.shard, "error", err.Error())
		return event.Records[0].Change.SequenceNumber
	}
	if len(res.BatchItemFailures) > 0 {
		return res.BatchItemFailures[0].ItemIdentifier
	}
	return ""
}

func (r shardReader) iterator(ctx context.Context, kind streamtypes.ShardIteratorType, at string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(r.shard), ShardIteratorType: kind}
	if at != "" {
		in.SequenceNumber = aws.String(at)
	}
	out, err := r.streams.GetShardIterator(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("iterator of shard %s: %w", r.shard, err)
	}
	return out.ShardIterator, nil
}

// lambdaEvent is records as Lambda hands them to a function.
func lambdaEvent(arn string, records []streamtypes.Record) (events.DynamoDBEvent, error) {
	var e events.DynamoDBEvent
	for _, rec := range records {
		d := rec.Dynamodb
		if d == nil {
			return e, fmt.Errorf("record %s has no dynamodb", aws.ToString(rec.EventID))
		}
		keys, err := streamImage(d.Keys)
		if err != nil {
			return e, err
		}
		newImage, err := streamImage(d.NewImage)
		if err != nil {
			return e, err
		}
		change := events.DynamoDBStreamRecord{
			Keys: keys, NewImage: newImage, SequenceNumber: aws.ToString(d.SequenceNumber),
			SizeBytes: aws.ToInt64(d.SizeBytes), StreamViewType: string(d.StreamViewType),
		}
		if d.ApproximateCreationDateTime != nil {
			change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
		e.Records = append(e.Records, events.DynamoDBEventRecord{
			AWSRegion: LocalRegion, EventID: aws.ToString(rec.EventID), EventName: string(rec.EventName),
			EventSource: "aws:dynamodb", EventVersion: aws.ToString(rec.EventVersion), EventSourceArn: arn, Change: change,
		})
	}
	return e, nil
}

func streamImage(in map[string]streamtypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(in))
	for k, v := range in {
		a, err := streamAttribute(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = a
	}
	return out, nil
}

func streamAttribute(v streamtypes.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value), nil
	case *streamtypes.AttributeValueMemberM:
		m, err := streamImage(v.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewMapAttribute(m), nil
	case *streamtypes.AttributeValueMemberL:
		list := make([]events.DynamoDBAttributeValue, 0, len(v.Value))
		for i, e := range v.Value {
			a, err := streamAttribute(e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("element %d: %w", i, err)
			}
			list = append(list, a)
		}
		return events.NewListAttribute(list), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("unknown attribute type %T", v)
}

// UnrouteSlaveEvents removes what RouteSlaveEvents made for queue.
func (l *Local) UnrouteSlaveEvents(ctx context.Context, queue, url string) error {
	rules := eventBridgeClient(l.Moto.Endpoint)
	bus := aws.String(LocalName(SlaveEventsBus))
	_, err := rules.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(queue), EventBusName: bus, Ids: []string{queue}})
	if err == nil {
		_, err = rules.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(queue), EventBusName: bus})
	}
	if err == nil {
		_, err = sqsClient(l.Moto.Endpoint).DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	}
	return err
}

// SQS is a client of the emulator's queues.
func (l *Local) SQS() *sqs.Client { return sqsClient(l.Moto.Endpoint) }
