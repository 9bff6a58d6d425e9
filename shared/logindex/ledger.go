package logindex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/logkey"
)

// byBucket is the global secondary index of the logs of a bucket in S3's
// key order: only a log's request item carries its partition key inBucket,
// so it holds each live log once (docs/tables.md "LogIndexTable").
const byBucket = "ByBucket"

// Held is a log as ByBucket holds it: what the reconciliation compares with
// S3's listing of the same keys.
type Held struct {
	Key      string
	Seq      string
	Size     int64
	Modified int64 // epoch ms
	ETag     string
}

// Held returns the logs of bucket the index holds whose keys are between lo
// and hi, both included, in key order. ByBucket is eventually consistent:
// a log written in the last moments may be missing, or held as it was.
// Errors: those of Logs.
func (t *Table) Held(ctx context.Context, bucket, lo, hi string) ([]Held, error) {
	in := &dynamodb.QueryInput{
		TableName:                &t.name,
		IndexName:                aws.String(byBucket),
		KeyConditionExpression:   aws.String("inBucket = :b AND #key BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{"#key": "key"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":b":  &types.AttributeValueMemberS{Value: bucket},
			":lo": &types.AttributeValueMemberS{Value: lo},
			":hi": &types.AttributeValueMemberS{Value: hi},
		},
	}
	var out []Held
	for {
		page, err := t.api.Query(ctx, in)
		if err != nil {
			return nil, translate(fmt.Sprintf("query %s of %s in %s", byBucket, bucket, t.name), err)
		}
		for _, item := range page.Items {
			h := Held{Key: str(item, "key"), Seq: str(item, "seq"), ETag: str(item, "etag")}
			h.Size, _ = num(item, "size")
			h.Modified, _ = num(item, "modified")
			if h.Key == "" || h.Seq == "" {
				return nil, fmt.Errorf("query %s of %s in %s: an item without key or seq", byBucket, bucket, t.name)
			}
			out = append(out, h)
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Fill writes e, whose key parsed as p, where the index has never heard of
// it: with the lowest sequencer, so that any event of the object wins
// (docs/behaviour.md "Reconciliation"). It returns whether the request's
// item was written, and if not, what the index holds there instead.
// Errors: those of Put.
func (t *Table) Fill(ctx context.Context, p logkey.Parsed, e logkey.Entry, etag string) (bool, error) {
	written, err := t.putAll(ctx, Partitions(p), object(e.Bucket, e.Key), lowestSeq, false, logItem(p, e, etag))
	if err != nil {
		return false, err
	}
	return written[requestAt(p)], nil
}

// Correct writes e, whose key parsed as p, over what the index recorded as
// of seq or before: the item of a lost event, a tombstone of a log written
// again, an item without inBucket. It keeps seq, so that the next event of
// the object, whose sequencer is greater, still wins, and an event the
// index has recorded since (a greater one) keeps its item. It returns
// whether the request's item was written. Errors: those of Put.
func (t *Table) Correct(ctx context.Context, p logkey.Parsed, e logkey.Entry, etag, seq string) (bool, error) {
	written, err := t.putAll(ctx, Partitions(p), object(e.Bucket, e.Key), seq, true, logItem(p, e, etag))
	if err != nil {
		return false, err
	}
	return written[requestAt(p)], nil
}

// Drop deletes the items of bucket/key, whose key parsed as p, that the
// index recorded as of seq or before: a log S3 no longer holds, whose
// delete event was lost. An event recorded since keeps its item. It
// returns whether the request's item was deleted. Errors: those of Put.
func (t *Table) Drop(ctx context.Context, p logkey.Parsed, bucket, key, seq string) (bool, error) {
	partitions := Partitions(p)
	deleted := false
	for i, part := range partitions {
		_, err := t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 &t.name,
			Key:                       itemKey(part, object(bucket, key)),
			ConditionExpression:       aws.String("#seq <= :seq"),
			ExpressionAttributeNames:  map[string]string{"#seq": "seq"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":seq": &types.AttributeValueMemberS{Value: seq}},
		})
		var stale *types.ConditionalCheckFailedException
		if errors.As(err, &stale) {
			continue
		}
		if err != nil {
			return false, translate(fmt.Sprintf("delete from %s in %s", part, t.name), err)
		}
		deleted = deleted || i == requestAt(p)
	}
	return deleted, nil
}

// Recorded is what the request's item of a log holds, read strongly.
type Recorded struct {
	Found  bool   // an item, live or a tombstone
	Live   bool   // not a tombstone
	Seq    string // of the event (or reconciliation) that wrote it
	Held   Held   // when Live
	Listed bool   // in ByBucket (it has inBucket)
}

// Recorded reads the request's item of bucket/key, whose key parsed as p,
// strongly consistent: what a Fill that wrote nothing found. Errors: those
// of Logs.
func (t *Table) Recorded(ctx context.Context, p logkey.Parsed, bucket, key string) (Recorded, error) {
	part := Partitions(p)[requestAt(p)]
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.name, Key: itemKey(part, object(bucket, key)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Recorded{}, translate(fmt.Sprintf("get from %s in %s", part, t.name), err)
	}
	if out.Item == nil {
		return Recorded{}, nil
	}
	r := Recorded{Found: true, Seq: str(out.Item, "seq"), Listed: str(out.Item, "inBucket") != ""}
	if _, ok := out.Item["key"]; ok {
		r.Live = true
		r.Held = Held{Key: key, Seq: r.Seq, ETag: str(out.Item, "etag")}
		r.Held.Size, _ = num(out.Item, "size")
		r.Held.Modified, _ = num(out.Item, "modified")
	}
	return r, nil
}

// requestAt is where the request's partition is in Partitions(p).
func requestAt(p logkey.Parsed) int {
	if p.TaskID != "" {
		return 1
	}
	return 0
}

// lowestSeq is the sequencer of what the reconciliation fills in: below
// every event's, sequencerWidth zeros. A constant, so that no function
// linking the index computes it at cold start.
const lowestSeq = "0000000000000000000000000000000000000000000000000000000000000000"

// The bucket's own items, in partition "b#<bucket>": no log partition
// starts so, and they have no span or key, so no lookup reads them.
const (
	completeItem = "complete" // the bucket is answered from the index
	runItem      = "run#"     // + the run's start (epoch ms): its drift so far
)

// runTTL is how long a run's drift is kept after its start.
const runTTL = 14 * 24 * time.Hour

// completeTTL is how long a bucket stays known complete after the
// reconciliation that found it so: past it, without a newer run (the
// schedule stopped), nothing says its notifications are still on, and the
// bucket is answered by listing.
const completeTTL = 3 * 24 * time.Hour

func bucketPartition(bucket string) string { return "b#" + bucket }

// AddDrift adds d to the drift found so far by the run of bucket that
// started at run (epoch ms). Errors: those of Put.
func (t *Table) AddDrift(ctx context.Context, bucket string, run int64, d Drift) error {
	_, err := t.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &t.name,
		Key:              itemKey(bucketPartition(bucket), runItem+strconv.FormatInt(run, 10)),
		UpdateExpression: aws.String("ADD added :a, removed :r, updated :u SET expiresAt = :x"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":a": number(d.Added), ":r": number(d.Removed), ":u": number(d.Updated),
			":x": number(time.UnixMilli(run).Add(runTTL).Unix()),
		},
	})
	if err != nil {
		return translate(fmt.Sprintf("drift of %s in %s", bucket, t.name), err)
	}
	return nil
}

// Drift returns the drift the run of bucket that started at run found in
// all. Errors: those of Put.
func (t *Table) Drift(ctx context.Context, bucket string, run int64) (Drift, error) {
	out, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.name, ConsistentRead: aws.Bool(true),
		Key: itemKey(bucketPartition(bucket), runItem+strconv.FormatInt(run, 10))})
	if err != nil {
		return Drift{}, translate(fmt.Sprintf("drift of %s in %s", bucket, t.name), err)
	}
	var d Drift
	d.Added, _ = num(out.Item, "added")
	d.Removed, _ = num(out.Item, "removed")
	d.Updated, _ = num(out.Item, "updated")
	return d, nil
}

// MarkComplete records that bucket is complete in the index: its
// notifications were on from since (epoch ms) to at least at, when a
// reconciliation of the whole bucket that started at since finished.
// Errors: those of Put.
func (t *Table) MarkComplete(ctx context.Context, bucket string, since, at int64) error {
	item := itemKey(bucketPartition(bucket), completeItem)
	item["since"] = number(since)
	item["checked"] = number(at)
	item["expiresAt"] = number(time.UnixMilli(at).Add(completeTTL).Unix())
	if _, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &t.name, Item: item}); err != nil {
		return translate(fmt.Sprintf("mark %s complete in %s", bucket, t.name), err)
	}
	return nil
}

// Unmark records that bucket is not known complete: its notifications are
// off. Errors: those of Put.
func (t *Table) Unmark(ctx context.Context, bucket string) error {
	if _, err := t.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &t.name, Key: itemKey(bucketPartition(bucket), completeItem)}); err != nil {
		return translate(fmt.Sprintf("unmark %s in %s", bucket, t.name), err)
	}
	return nil
}

// Complete returns which of buckets the index holds completely: those a
// reconciliation marked (MarkComplete) less than completeTTL ago and that
// none unmarked since. One BatchGetItem, and one for each resend of the
// keys DynamoDB leaves unprocessed (awsfault.Drain). Errors: those of Logs.
func (t *Table) Complete(ctx context.Context, buckets []string) (map[string]bool, error) {
	keys := make([]map[string]types.AttributeValue, 0, len(buckets))
	for _, b := range buckets {
		keys = append(keys, itemKey(bucketPartition(b), completeItem))
	}
	out := map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	now := t.now().Unix()
	err := awsfault.Drain(ctx, awsfault.DynamoDB, "completeness of the log buckets in "+t.name, map[string]types.KeysAndAttributes{t.name: {Keys: keys}},
		func(ctx context.Context, req map[string]types.KeysAndAttributes) (map[string]types.KeysAndAttributes, error) {
			page, err := t.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, err
			}
			for _, item := range page.Responses[t.name] {
				// TTL deletes an expired item within days, not at once.
				if expires, ok := num(item, "expiresAt"); ok && expires > now {
					out[str(item, "pk")[len("b#"):]] = true
				}
			}
			return page.UnprocessedKeys, nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

func str(item map[string]types.AttributeValue, name string) string {
	v, _ := item[name].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func num(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, _ := item[name].(*types.AttributeValueMemberN)
	if v == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}
