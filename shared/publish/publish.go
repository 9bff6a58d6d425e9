// Package publish publishes the change feed to other systems: each entry of
// the changes table, as the table's DynamoDB stream hands it to
// PublisherFunction, becomes one "Slave Changed" event on the fleet's
// EventBridge bus, its detail the change as the feed answers it
// (docs/behaviour.md "Events for other systems").
//
// Delivery is at least once: a batch that fails in part is handed again
// from its first failed record. The events of that batch that EventBridge
// accepted are remembered, and not sent again when the batch comes back to
// the same publisher; a send whose answer never came (a timeout) may have
// been accepted, so its events are sent again, and a consumer may see an
// event twice. The change's sequence only grows from one change of a slave
// to the next, so a consumer drops an event whose (slaveId, sequence) it has
// seen, and orders a slave's events by it (EventBridge itself keeps no
// order).
package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/slaves"
)

// The event's source and detail type: rules match them.
const (
	Source     = "fleet.slaves"
	DetailType = "Slave Changed"
)

// maxDetail is the largest detail sent whole. An EventBridge entry holds
// 256 KB in all; a change whose slave description makes it larger is sent
// without the description (`slave` absent), which a consumer reads from
// the slave's details.
const maxDetail = 200 << 10

// batch is how many entries one PutEvents call takes at most.
const batch = 10

// maxAccepted bounds what a publisher remembers of the batches handed again
// (ten times the stream mapping's batch): a batch that comes back to
// another instance leaves its records here, and they are forgotten.
const maxAccepted = 1000

// API is what the publisher needs of EventBridge.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Publisher is PublisherFunction's handler. Build it with New.
type Publisher struct {
	events API
	bus    string
	log    *slog.Logger

	mu sync.Mutex // Handle runs for several shards at once
	// accepted holds the event IDs of the records whose events EventBridge
	// accepted in a batch that is handed again from an earlier record.
	accepted map[string]bool
}

// New returns the publisher of the feed's entries to bus.
func New(events API, bus string, log *slog.Logger) *Publisher {
	return &Publisher{events: events, bus: bus, log: log, accepted: map[string]bool{}}
}

// pending is a record's event waiting to be sent.
type pending struct {
	id       string // the stream record's event ID
	sequence string // the stream record's, which a batch item failure names
	entry    ebtypes.PutEventsRequestEntry
}

// Handle publishes the entries among a batch of stream records, in the
// records' order. Records of other items (shard heads, the cursors' key)
// are skipped; the template's filter keeps them from invoking the function
// at all, and a local delivery hands them over. A record that cannot be
// sent is answered as a batch item failure, so that Lambda hands the batch
// again from it; one that cannot be decoded is logged and skipped, since
// no retry would decode it.
func (p *Publisher) Handle(ctx context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	if len(e.Records) == 0 {
		return events.DynamoDBEventResponse{}, errors.New("not a DynamoDB stream event: no Records (PublisherFunction runs on the changes table's stream)")
	}
	var queue []pending
	var skipped []string
	for _, r := range e.Records {
		if r.EventSource != "aws:dynamodb" {
			return events.DynamoDBEventResponse{}, fmt.Errorf("not a DynamoDB stream event: a record from %q (PublisherFunction runs on the changes table's stream)", r.EventSource)
		}
		if p.sent(r.EventID) {
			skipped = append(skipped, r.EventID)
			continue
		}
		entry, ok, err := p.entry(r)
		if err != nil {
			p.log.ErrorContext(ctx, "stream record not published", "event_id", r.EventID, "sequence", r.Change.SequenceNumber, "error", err.Error())
			continue
		}
		if ok {
			queue = append(queue, pending{id: r.EventID, sequence: r.Change.SequenceNumber, entry: entry})
		}
	}
	for start := 0; start < len(queue); start += batch {
		chunk := queue[start:min(start+batch, len(queue))]
		failed, accepted, err := p.send(ctx, chunk)
		if err != nil {
			// The batch may come again more than once: what it skipped stays skipped.
			p.remember(append(accepted, skipped...))
			p.log.WarnContext(ctx, "events not published; the batch comes again from its first unpublished record, without the events accepted after it",
				"sequence", failed, "accepted_after", len(accepted), "error", err.Error())
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: failed}}}, nil
		}
	}
	p.log.InfoContext(ctx, "events published", "records", len(e.Records), "events", len(queue), "published_before", len(skipped))
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}, nil
}

// sent reports whether the event of the record id was accepted when its
// batch was handed before, and forgets it (Handle remembers it again if the
// batch fails again).
func (p *Publisher) sent(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.accepted[id]
	delete(p.accepted, id)
	return ok
}

// remember notes the records whose events were accepted in a batch that
// comes again.
func (p *Publisher) remember(ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.accepted)+len(ids) > maxAccepted {
		clear(p.accepted)
	}
	for _, id := range ids {
		if id != "" {
			p.accepted[id] = true
		}
	}
}

// entry is the event of a stream record; ok is false for a record that is
// not a new entry of the feed.
func (p *Publisher) entry(r events.DynamoDBEventRecord) (ebtypes.PutEventsRequestEntry, bool, error) {
	if r.EventName != string(events.DynamoDBOperationTypeInsert) {
		return ebtypes.PutEventsRequestEntry{}, false, nil
	}
	item, err := image(r.Change.NewImage)
	if err != nil {
		return ebtypes.PutEventsRequestEntry{}, false, err
	}
	c, ok, err := dynamo.StreamChange(item)
	if err != nil || !ok {
		return ebtypes.PutEventsRequestEntry{}, false, err
	}
	detail, err := slaves.ChangeJSON(c)
	if err == nil && len(detail) > maxDetail {
		c.Slave = nil
		detail, err = slaves.ChangeJSON(c)
	}
	if err != nil {
		return ebtypes.PutEventsRequestEntry{}, false, fmt.Errorf("encode change of %s: %w", c.SlaveID, err)
	}
	return ebtypes.PutEventsRequestEntry{
		EventBusName: aws.String(p.bus),
		Source:       aws.String(Source),
		DetailType:   aws.String(DetailType),
		Detail:       aws.String(string(detail)),
		Time:         aws.Time(time.UnixMilli(c.At)),
	}, true, nil
}

// send puts chunk's events, sending again the entries EventBridge answers
// as failed (its throttling and internal errors). When it gives up, it
// returns the stream sequence of the first record still unsent, and the
// event IDs of the records after it whose events EventBridge accepted.
func (p *Publisher) send(ctx context.Context, chunk []pending) (string, []string, error) {
	left := map[string]pending{}
	key := func(i int) string { return fmt.Sprintf("%02d", i) } // in the records' order when sorted
	for i, q := range chunk {
		left[key(i)] = q
	}
	err := awsfault.Drain(ctx, "EventBridge", "publish changes", left, func(ctx context.Context, send map[string]pending) (map[string]pending, error) {
		keys := slices.Sorted(maps.Keys(send))
		entries := make([]ebtypes.PutEventsRequestEntry, 0, len(send))
		for _, k := range keys {
			entries = append(entries, send[k].entry)
		}
		out, err := p.events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		if err != nil {
			return nil, err
		}
		again := map[string]pending{}
		for i, k := range keys {
			// An entry the answer does not account for is not known to be accepted.
			if i >= len(out.Entries) || out.Entries[i].ErrorCode != nil {
				again[k] = send[k]
			}
		}
		left = again
		return again, nil
	})
	if err == nil {
		return "", nil, nil
	}
	first := ""
	var accepted []string // after first: those before it do not come again
	for i, q := range chunk {
		if _, ok := left[key(i)]; ok && first == "" {
			first = q.sequence
		} else if !ok && first != "" {
			accepted = append(accepted, q.id)
		}
	}
	return first, accepted, err
}
