package dynamo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/machine"
)

// The changes table holds the change feed (docs/tables.md "Changes"):
// items keyed (shard, seq). Position 0 of each shard is its head, the
// newest position taken; every change updates it from the value read with
// the slave, in the transaction that applies the change and puts the
// change's entry at the next position, so a position is taken only by a
// change that commits, in the order they commit (docs/decisions.md). The
// item (keyShard, 0) holds the key cursors are signed with.
const keyShard = change.FeedShards

// feedSlack is how long an entry outlives the feed's retention, counted
// from when it was written, before TTL may collect it, so that no entry a
// cursor within retention can still reach is collected, whatever the skew
// of the clock that wrote it.
const feedSlackSeconds = 3600

// changeRecord is one entry of the feed.
type changeRecord struct {
	Shard    int          `dynamodbav:"shard"`
	Seq      int64        `dynamodbav:"seq"`
	SlaveID  string       `dynamodbav:"slaveId"`
	Kind     string       `dynamodbav:"kind"`
	At       int64        `dynamodbav:"at"`
	Written  int64        `dynamodbav:"writtenAt"`
	Entry    *entryRecord `dynamodbav:"entry,omitempty"`
	Previous string       `dynamodbav:"previous,omitempty"`
	Slave    *slaveRecord `dynamodbav:"slave,omitempty"`
	Before   *slaveRecord `dynamodbav:"before,omitempty"`
	// Expiring is the record of the expiring kinds, as the expiring table
	// holds it.
	Expiring  *expiringRecord `dynamodbav:"expiring,omitempty"`
	ExpiresAt int64           `dynamodbav:"expiresAt"` // TTL, epoch seconds
}

type entryRecord struct {
	State     string `dynamodbav:"state"`
	Timestamp int64  `dynamodbav:"timestamp"`
	User      string `dynamodbav:"user,omitempty"`
	Message   string `dynamodbav:"message,omitempty"`
}

func newChangeRecord(c change.Change) changeRecord {
	r := changeRecord{Shard: c.Shard, Seq: c.Seq, SlaveID: c.SlaveID, Kind: string(c.Kind), At: c.At, Written: c.Written, Previous: string(c.Previous),
		ExpiresAt: (c.Written+change.FeedRetention.Milliseconds())/1000 + feedSlackSeconds}
	if e := c.Entry; e != nil {
		r.Entry = &entryRecord{State: string(e.State), Timestamp: e.Timestamp, User: e.User, Message: e.Message}
	}
	if c.Slave != nil {
		r.Slave = new(newSlaveRecord(*c.Slave, 0))
		r.Slave.Sequence = c.Seq // the slave as this change left it, in the feed and in its event
	}
	if c.Before != nil {
		r.Before = new(newSlaveRecord(*c.Before, 0))
	}
	if c.Expiring != nil {
		r.Expiring = new(newExpiringRecord(*c.Expiring, c.Expiring.DueAt()))
	}
	return r
}

func (r changeRecord) change() change.Change {
	c := change.Change{SlaveID: r.SlaveID, Kind: change.Kind(r.Kind), At: r.At, Written: r.Written, Shard: r.Shard, Seq: r.Seq, Previous: machine.State(r.Previous)}
	if e := r.Entry; e != nil {
		c.Entry = &machine.Update{SlaveID: r.SlaveID, State: machine.State(e.State), Timestamp: e.Timestamp, User: e.User, Message: e.Message}
	}
	if r.Slave != nil {
		c.Slave = new(r.Slave.slave())
	}
	if r.Before != nil {
		c.Before = new(r.Before.slave())
	}
	if r.Expiring != nil {
		c.Expiring = new(r.Expiring.expiring())
	}
	return c
}

// StreamChange decodes an item of the changes table as the table's stream
// gives it (its new image): the change of an entry, and ok false for the
// other items (a shard's head, the cursors' key).
func StreamChange(item map[string]types.AttributeValue) (c change.Change, ok bool, err error) {
	var r changeRecord
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return change.Change{}, false, fmt.Errorf("decode a change of the feed: %w", err)
	}
	if r.Seq <= 0 || r.Shard < 0 || r.Shard >= change.FeedShards {
		return change.Change{}, false, nil
	}
	if r.SlaveID == "" || r.Kind == "" {
		return change.Change{}, false, fmt.Errorf("decode a change of the feed: entry (%d, %d) has no slave or kind", r.Shard, r.Seq)
	}
	return r.change(), true, nil
}

func feedKey(shard int, seq int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"shard": num(int64(shard)), "seq": num(seq)}
}

// headGet reads the head of id's shard with the slave.
func (s *driver) headGet(id string) types.TransactGetItem {
	return types.TransactGetItem{Get: &types.Get{TableName: &s.tables.Changes, Key: feedKey(change.ShardOf(id), 0)}}
}

// decodeHead reads a head item: its position (an absent one is 0) and
// when the entry there was written (0 when the head does not say).
func decodeHead(item map[string]types.AttributeValue) (seq, written int64) {
	if v, ok := item["head"].(*types.AttributeValueMemberN); ok {
		seq, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	if v, ok := item["writtenAt"].(*types.AttributeValueMemberN); ok {
		written, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	return seq, written
}

// feedItems are the writes that put entries at positions from+1 on in
// shard and move its head there from from, conditioned on the head being
// still from. The head keeps when its newest entry was written, so that a
// list skips the walk back of a shard that has settled (change.Heads).
func (s *driver) feedItems(shard int, from int64, entries []change.Change) ([]types.TransactWriteItem, error) {
	head := &types.Update{
		TableName:                 &s.tables.Changes,
		Key:                       feedKey(shard, 0),
		UpdateExpression:          aws.String("SET #head = :next, #written = :written"),
		ConditionExpression:       aws.String("attribute_not_exists(#head)"),
		ExpressionAttributeNames:  map[string]string{"#head": "head", "#written": "writtenAt"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":next": num(from + int64(len(entries))), ":written": num(entries[len(entries)-1].Written)},
	}
	if from != 0 {
		head.ConditionExpression = aws.String("#head = :prev")
		head.ExpressionAttributeValues[":prev"] = num(from)
	}
	items := []types.TransactWriteItem{{Update: head}}
	for _, c := range entries {
		item, err := attributevalue.MarshalMap(newChangeRecord(c))
		if err != nil {
			return nil, fmt.Errorf("encode change of %s: %w", c.SlaveID, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.tables.Changes, Item: item, ConditionExpression: aws.String("attribute_not_exists(seq)")}})
	}
	return items, nil
}

// changeItems are the writes of one write's entries, at the positions
// after the head read with the slave; none for no change.
func (s *driver) changeItems(cs []change.Change) ([]types.TransactWriteItem, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	return s.feedItems(cs[0].Shard, cs[0].Seq-1, cs)
}

// Heads reads every shard's head with one consistent BatchGetItem.
func (s *driver) Heads(ctx context.Context) (change.Heads, error) {
	var heads change.Heads
	pending := map[string]types.KeysAndAttributes{s.tables.Changes: {Keys: s.headKeys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == change.Attempts {
			return heads, fmt.Errorf("read the feed's heads: unprocessed keys after %d attempts", change.Attempts)
		}
		if attempt > 0 {
			if err := change.Wait(ctx, attempt); err != nil {
				return heads, err
			}
		}
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
		if err != nil {
			return heads, translate("read the feed's heads", err)
		}
		for _, item := range out.Responses[s.tables.Changes] {
			var key struct {
				Shard int `dynamodbav:"shard"`
			}
			if err := attributevalue.UnmarshalMap(item, &key); err != nil || key.Shard < 0 || key.Shard >= change.FeedShards {
				return heads, fmt.Errorf("decode a head of the feed: %v", item["shard"])
			}
			heads.Seqs[key.Shard], heads.Written[key.Shard] = decodeHead(item)
		}
		pending = out.UnprocessedKeys
	}
	return heads, nil
}

// Entries reads shard's entries after position after with a consistent
// Query.
func (s *driver) Entries(ctx context.Context, shard int, after int64, max int) ([]change.Change, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Changes,
		KeyConditionExpression:    aws.String("#shard = :shard AND seq > :after"),
		ExpressionAttributeNames:  map[string]string{"#shard": "shard"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":shard": num(int64(shard)), ":after": num(after)},
		ConsistentRead:            aws.Bool(true),
	}
	var out []change.Change
	for len(out) < max {
		in.Limit = aws.Int32(int32(max - len(out)))
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, translate("query the feed", err)
		}
		var recs []changeRecord
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &recs); err != nil {
			return nil, fmt.Errorf("decode the feed: %w", err)
		}
		for _, r := range recs {
			out = append(out, r.change())
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return out, nil
}

// Before walks shard back from head, a page of times at a time, to the
// first entry written before at.
func (s *driver) Before(ctx context.Context, shard int, head, at int64) (int64, error) {
	if head == 0 {
		return 0, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.Changes,
		KeyConditionExpression:    aws.String("#shard = :shard AND seq BETWEEN :first AND :head"),
		ExpressionAttributeNames:  map[string]string{"#shard": "shard"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":shard": num(int64(shard)), ":first": num(1), ":head": num(head)},
		ProjectionExpression:      aws.String("seq, writtenAt"),
		ScanIndexForward:          aws.Bool(false),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(100),
	}
	pos := head
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return 0, translate("query the feed", err)
		}
		var recs []struct {
			Seq     int64 `dynamodbav:"seq"`
			Written int64 `dynamodbav:"writtenAt"`
		}
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &recs); err != nil {
			return 0, fmt.Errorf("decode the feed: %w", err)
		}
		for _, r := range recs {
			if r.Written < at {
				return pos, nil
			}
			pos = r.Seq - 1
		}
		if len(page.LastEvaluatedKey) == 0 {
			return pos, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// FeedKey reads the cursors' key, creating it (a random 32 bytes) when no
// instance has yet.
func (s *driver) FeedKey(ctx context.Context) ([]byte, error) {
	for range 2 {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.tables.Changes, Key: feedKey(keyShard, 0), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, translate("read the feed's key", err)
		}
		if v, ok := out.Item["key"].(*types.AttributeValueMemberB); ok && len(v.Value) >= 32 {
			return v.Value, nil
		}
		key := make([]byte, 32)
		rand.Read(key)
		item := feedKey(keyShard, 0)
		item["key"] = &types.AttributeValueMemberB{Value: key}
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.tables.Changes, Item: item, ConditionExpression: aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": "key"}})
		var failed *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &failed) {
			return nil, translate("create the feed's key", err)
		}
		// Created, or another instance created it first: read it again.
	}
	return nil, fmt.Errorf("read the feed's key: not found after creating it")
}
