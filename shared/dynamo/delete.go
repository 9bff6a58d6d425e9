package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/change"
)

// finalHistory is how many history entries fit in the deleting transaction
// beside the slave, its expiring record, the decommissioning set and the
// deletion's feed entry and head.
const finalHistory = 95

// Remove deletes the slave, its whole history and its expiring record,
// conditioned on the version read, with leave takes it out of the
// decommissioning set, and puts the deletion's feed entry, conditioned on
// the head read.
//
// A history can outgrow one transaction (100 items), so older entries go
// first in batches and the newest ones go in the transaction that deletes
// the slave, conditioned on the version read: a slave never exists without
// the entry of its current state, and an entry written by a concurrent
// change makes the transaction fail and the deletion start over
// (change.ErrRace), so no entry outlives its slave.
func (s *driver) Remove(ctx context.Context, id string, version int64, leave bool, gone change.Change) error {
	keys, err := s.historyKeys(ctx, id)
	if err != nil {
		return err
	}
	if len(keys) > finalHistory {
		if err := s.batchDelete(ctx, s.tables.History, keys[:len(keys)-finalHistory]); err != nil {
			return err
		}
		keys = keys[len(keys)-finalHistory:]
	}
	items := []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName:                 &s.tables.Slaves,
			Key:                       slaveKey(id),
			ConditionExpression:       aws.String("version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(version)},
		}},
		{Delete: &types.Delete{TableName: &s.tables.Expiring, Key: expiringKey(id)}},
	}
	if leave {
		items = append(items, types.TransactWriteItem{Update: s.leaveLimit(id)})
	}
	feed, err := s.changeItems([]change.Change{gone})
	if err != nil {
		return err
	}
	items = append(items, feed...)
	for _, k := range keys {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.tables.History, Key: k}})
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if isCancelled(err) {
		return change.ErrRace
	}
	return translate("delete slave "+id, err)
}

// historyKeys returns the keys of the slave's history, oldest first.
func (s *driver) historyKeys(ctx context.Context, id string) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.History,
		KeyConditionExpression:    aws.String("slaveId = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id)},
		ProjectionExpression:      aws.String("slaveId, seq"),
		ConsistentRead:            aws.Bool(true),
	}
	var keys []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, translate("query history keys of "+id, err)
		}
		keys = append(keys, out.Items...)
	}
	return keys, nil
}

// batchDelete deletes keys from table 25 at a time, resending what
// DynamoDB leaves unprocessed (awsfault.Drain).
func (s *driver) batchDelete(ctx context.Context, table string, keys []map[string]types.AttributeValue) error {
	for start := 0; start < len(keys); start += 25 {
		var reqs []types.WriteRequest
		for _, k := range keys[start:min(start+25, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		err := awsfault.Drain(ctx, awsfault.DynamoDB, "delete from "+table, map[string][]types.WriteRequest{table: reqs},
			func(ctx context.Context, pending map[string][]types.WriteRequest) (map[string][]types.WriteRequest, error) {
				out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
				if err != nil {
					return nil, err
				}
				return out.UnprocessedItems, nil
			})
		if err != nil {
			return err
		}
	}
	return nil
}
