// Package logindex owns the task-log index (docs/tables.md "LogIndexTable"):
// the indexer that S3's object created and deleted events drive, and the
// DynamoDB adapter that writes the index's items and reads a task's,
// request's or deploy's logs over an exact time window with one Query, or
// a search's page of one prefix in key order.
package logindex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/logkey"
)

// API is the part of the DynamoDB client the table uses.
type API interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// byUntil is the local secondary index that sorts a partition's logs by
// the end of their span; byKey sorts them by S3 key, as S3 lists them.
const (
	byUntil = "ByUntil"
	byKey   = "ByKey"
)

// maxKeyBytes is the longest S3 key, which is also the longest sort key
// DynamoDB takes: every value of ByKey's key conditions stays within it.
const maxKeyBytes = 1024

// tombstoneTTL is how long a deleted log's tombstone keeps an older created
// event from bringing it back. EventBridge retries a delivery for at most
// 24 hours; a week is far past any late event.
const tombstoneTTL = 7 * 24 * time.Hour

// Partitions are the index partitions of a log: its task's (when the key
// format writes the task id), its request's and its deploy's (when the key
// tells the deploy). The lookups read group "default" only, as the listing
// does: a log of another %group goes to partitions of their own, named
// with "/<group>" after the ids (ids never hold '/'), which no lookup reads
// yet.
func Partitions(p logkey.Parsed) []string {
	var out []string
	if p.TaskID != "" {
		out = append(out, TaskPartition(p.TaskID))
	}
	out = append(out, RequestPartition(p.RequestID))
	if p.DeployID != "" {
		out = append(out, DeployPartition(p.RequestID, p.DeployID))
	}
	if p.Group != "" && p.Group != logkey.DefaultGroup {
		for i := range out {
			out[i] += "/" + p.Group
		}
	}
	return out
}

// TaskPartition, RequestPartition and DeployPartition name the partition
// of one lookup. Ids cannot hold '/' (logkey.CheckRequestID), so the
// deploy's two ids cannot be cut another way.
func TaskPartition(taskID string) string       { return "t#" + taskID }
func RequestPartition(requestID string) string { return "r#" + requestID }
func DeployPartition(requestID, deployID string) string {
	return "d#" + requestID + "/" + deployID
}

// Table is the index in DynamoDB.
type Table struct {
	api  API
	name string
	now  func() time.Time
}

// NewTable returns the index stored in the table name.
func NewTable(api API, name string) *Table { return &Table{api: api, name: name, now: time.Now} }

// object is the sort key of a log in every partition: a hash of where it
// is, which fits the sort key's 1,024 bytes whatever the key's length and
// stays the same when the log is written again with other times.
func object(bucket, key string) string {
	sum := sha256.Sum256([]byte(bucket + "/" + key))
	return hex.EncodeToString(sum[:16])
}

// Put records e, whose key parsed as p and whose object's ETag is etag, in
// each of its Partitions as of the event numbered seq (NormalizeSequencer).
// A partition that already holds an equal or later event of the object
// keeps it: S3 delivers events at least once and in no order. Errors:
// fault.Unavailable when DynamoDB throttles.
func (t *Table) Put(ctx context.Context, p logkey.Parsed, e logkey.Entry, etag, seq string) error {
	_, err := t.putAll(ctx, Partitions(p), object(e.Bucket, e.Key), seq, false, logItem(p, e, etag))
	return err
}

// logItem is the attributes of a live log's items. Each holds both of the
// log's spans (Entry.Span), so that a lookup measures either rule exactly
// (logkey.Window.Plain): from and to with its metadata, plainFrom and
// plainUntil without. until, which ByUntil sorts by, is the later of the
// two ends: the one key condition that reads every log either rule can
// answer. The request's item, the one every log has, also carries
// inBucket, which puts it in ByBucket, the reconciliation's view of the
// index in S3's key order (docs/tables.md).
func logItem(p logkey.Parsed, e logkey.Entry, etag string) func(partition string) map[string]types.AttributeValue {
	from, to := e.Span(p.Time)
	plainFrom, plainUntil := logkey.Entry{Object: e.Object}.Span(p.Time)
	request := RequestPartition(p.RequestID)
	if p.Group != "" && p.Group != logkey.DefaultGroup {
		request += "/" + p.Group
	}
	return func(partition string) map[string]types.AttributeValue {
		item := map[string]types.AttributeValue{
			"bucket":     &types.AttributeValueMemberS{Value: e.Bucket},
			"key":        &types.AttributeValueMemberS{Value: e.Key},
			"size":       number(e.Size),
			"modified":   number(e.LastModified),
			"from":       number(from),
			"to":         number(to),
			"plainFrom":  number(plainFrom),
			"plainUntil": number(plainUntil),
			"until":      number(max(to, plainUntil)),
		}
		if e.Start != nil {
			item["start"] = number(*e.Start)
		}
		if e.End != nil {
			item["end"] = number(*e.End)
		}
		if etag != "" {
			item["etag"] = &types.AttributeValueMemberS{Value: etag}
		}
		if partition == request {
			item["inBucket"] = &types.AttributeValueMemberS{Value: e.Bucket}
		}
		return item
	}
}

// spanFilter returns the filter that keeps the logs whose span, by w's
// rule, overlaps w, beside the key condition until >= :start that ByUntil
// answers (see Put), with the names and values it uses.
func spanFilter(w logkey.Window) (string, map[string]string, map[string]types.AttributeValue) {
	from, to := "from", "to"
	if w.Plain {
		from, to = "plainFrom", "plainUntil"
	}
	return "#from < :end AND #to >= :start",
		map[string]string{"#from": from, "#to": to},
		map[string]types.AttributeValue{":start": number(w.Start), ":end": number(w.End)}
}

// Remove records the deletion of bucket/key, whose key parsed as p, in each
// of its Partitions as of seq: a
// tombstone without a span, so that no lookup reads it, which keeps an
// older created event from writing the log back until it expires. Errors:
// those of Put.
func (t *Table) Remove(ctx context.Context, p logkey.Parsed, bucket, key, seq string) error {
	expires := number(t.now().Add(tombstoneTTL).Unix())
	_, err := t.putAll(ctx, Partitions(p), object(bucket, key), seq, false, func(string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"expiresAt": expires}
	})
	return err
}

// putAll writes the item attrs gives for each partition, as of seq, where
// the partition holds no later event of the object (orEqual: no later one
// and not this one either, when false). It returns whether each partition
// was written; a partition that holds a later event keeps it.
func (t *Table) putAll(ctx context.Context, partitions []string, sk, seq string, orEqual bool, attrs func(partition string) map[string]types.AttributeValue) ([]bool, error) {
	cond := "attribute_not_exists(#seq) OR #seq < :seq"
	if orEqual {
		cond = "attribute_not_exists(#seq) OR #seq <= :seq"
	}
	written := make([]bool, len(partitions))
	for i, p := range partitions {
		item := map[string]types.AttributeValue{
			"pk":  &types.AttributeValueMemberS{Value: p},
			"sk":  &types.AttributeValueMemberS{Value: sk},
			"seq": &types.AttributeValueMemberS{Value: seq},
		}
		for k, v := range attrs(p) {
			item[k] = v
		}
		_, err := t.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 &t.name,
			Item:                      item,
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  map[string]string{"#seq": "seq"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":seq": &types.AttributeValueMemberS{Value: seq}},
		})
		var stale *types.ConditionalCheckFailedException
		if errors.As(err, &stale) {
			continue // a later event is recorded already
		}
		if err != nil {
			return written, translate(fmt.Sprintf("index %s in %s", p, t.name), err)
		}
		written[i] = true
	}
	return written, nil
}

// Logs returns the logs of partition whose span, by w's rule, overlaps w:
// those reaching w.Start (the index's key condition, so nothing older is
// read) and starting before w.End (a filter). Errors: fault.Unavailable when
// DynamoDB throttles, fault.Timeout when ctx expires.
func (t *Table) Logs(ctx context.Context, partition string, w logkey.Window) ([]logkey.Entry, error) {
	if w.Start >= w.End {
		return nil, nil
	}
	filter, names, values := spanFilter(w)
	names["#until"] = "until"
	values[":p"] = &types.AttributeValueMemberS{Value: partition}
	in := &dynamodb.QueryInput{
		TableName:                 &t.name,
		IndexName:                 aws.String(byUntil),
		KeyConditionExpression:    aws.String("pk = :p AND #until >= :start"),
		FilterExpression:          aws.String(filter),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
	return t.query(ctx, partition, in)
}

// query reads every page of in, a Query of partition.
func (t *Table) query(ctx context.Context, partition string, in *dynamodb.QueryInput) ([]logkey.Entry, error) {
	var out []logkey.Entry
	for {
		page, err := t.api.Query(ctx, in)
		if err != nil {
			return nil, translate(fmt.Sprintf("query %s in %s", partition, t.name), err)
		}
		for _, item := range page.Items {
			e, err := entry(item)
			if err != nil {
				return nil, fmt.Errorf("query %s in %s: %w", partition, t.name, err)
			}
			out = append(out, e)
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Landed returns the logs of of's partition (see Page) that landed in S3
// at or after since: whose last modification is since or later, whatever
// their span. until is never before the last modification (Put), so the
// key condition until >= since reads no log that landed earlier, except
// those whose span ends after their upload. Errors: those of Logs.
func (t *Table) Landed(ctx context.Context, of logkey.Task, since int64) ([]logkey.Entry, error) {
	partition := partitionOf(of)
	in := &dynamodb.QueryInput{
		TableName:                &t.name,
		IndexName:                aws.String(byUntil),
		KeyConditionExpression:   aws.String("pk = :p AND #until >= :since"),
		FilterExpression:         aws.String("#modified >= :since"),
		ExpressionAttributeNames: map[string]string{"#until": "until", "#modified": "modified"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p":     &types.AttributeValueMemberS{Value: partition},
			":since": number(since),
		},
	}
	return t.query(ctx, partition, in)
}

// Task returns the logs of a task over w, as Logs does.
func (t *Table) Task(ctx context.Context, taskID string, w logkey.Window) ([]logkey.Entry, error) {
	return t.Logs(ctx, TaskPartition(taskID), w)
}

// Request returns the logs of a request over w, as Logs does.
func (t *Table) Request(ctx context.Context, requestID string, w logkey.Window) ([]logkey.Entry, error) {
	return t.Logs(ctx, RequestPartition(requestID), w)
}

// Deploy returns the logs of a deploy over w, as Logs does.
func (t *Table) Deploy(ctx context.Context, requestID, deployID string, w logkey.Window) ([]logkey.Entry, error) {
	return t.Logs(ctx, DeployPartition(requestID, deployID), w)
}

// Page returns the logs of of's partition in bucket whose key starts with
// prefix and comes after after, and whose span, by w's rule, overlaps w:
// at most limit of them, in key order (S3's, since DynamoDB too orders
// strings by their UTF-8 bytes), and whether there are no more. It is the index's answer to
// logstore's Page of the same bucket, prefix and after, so that a search
// can page across both with the same tokens. of names a task's partition
// when of.ID is set, else a deploy's when of.DeployID is, else a request's.
//
// One Query of ByKey, over the keys between after and the last key under
// prefix, usually answers: it asks for one log more than limit, so that a
// prefix answered to its end says so at once. Only a window or bucket that
// filters out logs makes it read on, each further call asking for twice as
// many as the last. Errors: those of Logs.
func (t *Table) Page(ctx context.Context, of logkey.Task, bucket, prefix, after string, limit int, w logkey.Window) ([]logkey.Entry, bool, error) {
	partition := partitionOf(of)
	if limit < 1 {
		return nil, false, fmt.Errorf("query %s in %s: limit %d, want at least 1", partition, t.name, limit)
	}
	lo, hi, ok := keyRange(prefix, after)
	if !ok || w.Start >= w.End {
		return nil, true, nil
	}
	filter, names, values := spanFilter(w)
	names["#key"], names["#bucket"] = "key", "bucket"
	values[":p"] = &types.AttributeValueMemberS{Value: partition}
	values[":lo"] = &types.AttributeValueMemberS{Value: lo}
	values[":hi"] = &types.AttributeValueMemberS{Value: hi}
	values[":b"] = &types.AttributeValueMemberS{Value: bucket}
	in := &dynamodb.QueryInput{
		TableName:                 &t.name,
		IndexName:                 aws.String(byKey),
		KeyConditionExpression:    aws.String("pk = :p AND #key BETWEEN :lo AND :hi"),
		FilterExpression:          aws.String("#bucket = :b AND " + filter),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		Limit:                     aws.Int32(int32(min(limit, maxQueryLimit-1) + 1)),
	}
	var out []logkey.Entry
	for {
		page, err := t.api.Query(ctx, in)
		if err != nil {
			return nil, false, translate(fmt.Sprintf("query %s in %s", partition, t.name), err)
		}
		for _, item := range page.Items {
			e, err := entry(item)
			if err != nil {
				return nil, false, fmt.Errorf("query %s in %s: %w", partition, t.name, err)
			}
			out = append(out, e)
		}
		if len(out) > limit {
			return out[:limit], false, nil
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, true, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
		in.Limit = aws.Int32(min(2**in.Limit, maxQueryLimit))
	}
}

// maxQueryLimit bounds the Limit of one Query; DynamoDB stops at 1 MB of
// items (about 4,000 logs) before it anyway.
const maxQueryLimit = 1 << 16

// partitionOf names the partition of a task, deploy or request (see Page).
func partitionOf(of logkey.Task) string {
	switch {
	case of.ID != "":
		return TaskPartition(of.ID)
	case of.DeployID != "":
		return DeployPartition(of.RequestID, of.DeployID)
	}
	return RequestPartition(of.RequestID)
}

// keyRange returns the bounds, both included, of the keys under prefix
// that come after after, each within maxKeyBytes; ok is false when there
// is no such key.
func keyRange(prefix, after string) (lo, hi string, ok bool) {
	hi, ok = lastUnder(prefix)
	if !ok {
		return "", "", false
	}
	lo = prefix
	if after >= prefix {
		if lo, ok = successor(after); !ok {
			return "", "", false
		}
	}
	if lo > hi {
		return "", "", false
	}
	return lo, hi, true
}

// lastUnder returns the greatest string of at most maxKeyBytes bytes of
// UTF-8 that starts with prefix: prefix followed by the greatest character
// that fits, as often as it fits. Every key under prefix sorts at or before
// it, since UTF-8 orders as code points do and no encoded character is a
// prefix of another. ok is false when prefix is longer than any key.
func lastUnder(prefix string) (string, bool) {
	if len(prefix) > maxKeyBytes {
		return "", false
	}
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range []rune{unicode.MaxRune, 0xFFFF, 0x7FF, 0x7F} {
		for b.Len()+utf8.RuneLen(r) <= maxKeyBytes {
			b.WriteRune(r)
		}
	}
	return b.String(), true
}

// successor returns the smallest string of at most maxKeyBytes bytes of
// UTF-8 that sorts after s, and false when there is none. Below the limit
// it is s followed by U+0000; at it, s's last character that can grow
// within the limit grows by one, and what follows it goes.
func successor(s string) (string, bool) {
	if len(s) < maxKeyBytes {
		return s + "\x00", true
	}
	s = strings.ToValidUTF8(s[:maxKeyBytes], "")
	for s != "" {
		r, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
		if r++; r == 0xD800 {
			r = 0xE000 // surrogates are not characters
		}
		if r <= unicode.MaxRune && len(s)+utf8.RuneLen(r) <= maxKeyBytes {
			return s + string(r), true
		}
	}
	return "", false
}

// entry reads an item back; the table is ours, but a malformed item fails
// the lookup rather than answering a wrong log.
func entry(item map[string]types.AttributeValue) (logkey.Entry, error) {
	var e logkey.Entry
	var err error
	str := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		err = errors.Join(err, fmt.Errorf("item has no string %s", name))
		return ""
	}
	num := func(name string, optional bool) *int64 {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			if !optional {
				err = errors.Join(err, fmt.Errorf("item has no number %s", name))
			}
			return nil
		}
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("item's %s %q is not an integer", name, v.Value))
			return nil
		}
		return &n
	}
	e.Bucket, e.Key = str("bucket"), str("key")
	if n := num("size", false); n != nil {
		e.Size = *n
	}
	if n := num("modified", false); n != nil {
		e.LastModified = *n
	}
	e.Start, e.End = num("start", true), num("end", true)
	return e, err
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// translate maps SDK failures to fault kinds, keeping the cause for logs:
// the one translation of every adapter (shared/awsfault).
func translate(what string, err error) error {
	return awsfault.Translate(awsfault.DynamoDB, what, err)
}
