package dynamo

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/machine"

	"golang.org/x/sync/errgroup"
)

// The expiring table's ByDue index is keyed (dueShard, dueAt) and projects
// keys only. Finding the due records is then one Query per shard for the
// records with dueAt < now, which reads only due records however many are
// pending: a Scan would read the whole table every minute. The shard spreads
// the records over dueShards partitions (a hash of the machine id), so that
// no single index partition takes every write and the shards are read in
// parallel.
const (
	byDueIndex = "ByDue"
	dueShards  = 8
)

func dueShard(machineID string) int64 {
	h := fnv.New32a()
	h.Write([]byte(machineID))
	return int64(h.Sum32() % dueShards)
}

// Due returns the expiring records due at now (dueAt < now, docs/behaviour.md "Expiring changes"),
// oldest first, with the time each fell due: the index holds it, so the
// trigger learns how late it runs at no extra read.
func (s *Store) Due(ctx context.Context, now int64) ([]machine.Due, error) {
	parts := make([][]machine.Due, dueShards)
	g, ctx := errgroup.WithContext(ctx)
	for shard := range dueShards {
		g.Go(func() error {
			p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
				TableName:              &s.tables.Expiring,
				IndexName:              aws.String(byDueIndex),
				KeyConditionExpression: aws.String("dueShard = :shard AND dueAt < :now"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":shard": num(int64(shard)),
					":now":   num(now),
				},
			})
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					return translate("query due expiring records", err)
				}
				for _, item := range out.Items {
					id, _ := item["machineId"].(*types.AttributeValueMemberS)
					at, _ := item["dueAt"].(*types.AttributeValueMemberN)
					if id == nil || at == nil {
						continue
					}
					dueAt, _ := strconv.ParseInt(at.Value, 10, 64)
					parts[shard] = append(parts[shard], machine.Due{SlaveID: id.Value, At: dueAt})
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	all := slices.Concat(parts...)
	slices.SortFunc(all, func(a, b machine.Due) int { return cmp.Compare(a.At, b.At) })
	return all, nil
}

// KeepDeferred keeps the expiring record of slave id from being collected
// by TTL while its revert waits for room under the decommission limit: a
// deferred record stays pending, and listed, for as long as it waits. It
// moves the record's TTL a retention period past now, at most once a day.
func (s *Store) KeepDeferred(ctx context.Context, id string, now int64) error {
	if !storable(id) {
		return nil
	}
	at := now/1000 + expiringRetentionSeconds
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.tables.Expiring,
		Key:                       expiringKey(id),
		UpdateExpression:          aws.String("SET expiresAt = :at"),
		ConditionExpression:       aws.String("attribute_exists(machineId) AND expiresAt < :soon"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": num(at), ":soon": num(at - 24*3600)},
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return nil // kept already, or gone
	}
	return translate("keep deferred record of "+id, err)
}

// existing returns the subset of ids that are slaves, with consistent
// BatchGetItem reads of their keys, resending the keys DynamoDB leaves
// unprocessed (awsfault.Drain).
func (s *Store) existing(ctx context.Context, ids []string) (map[string]bool, error) {
	found := map[string]bool{}
	for start := 0; start < len(ids); start += 100 {
		var keys []map[string]types.AttributeValue
		for _, id := range ids[start:min(start+100, len(ids))] {
			keys = append(keys, slaveKey(id))
		}
		pending := map[string]types.KeysAndAttributes{s.tables.Slaves: {
			Keys: keys, ProjectionExpression: aws.String("id"), ConsistentRead: aws.Bool(true),
		}}
		err := awsfault.Drain(ctx, awsfault.DynamoDB, "read slaves", pending,
			func(ctx context.Context, pending map[string]types.KeysAndAttributes) (map[string]types.KeysAndAttributes, error) {
				out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
				if err != nil {
					return nil, err
				}
				for _, item := range out.Responses[s.tables.Slaves] {
					if id, ok := item["id"].(*types.AttributeValueMemberS); ok {
						found[id.Value] = true
					}
				}
				return out.UnprocessedKeys, nil
			})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}
