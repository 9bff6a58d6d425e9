package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"

	"golang.org/x/sync/errgroup"
)

// finalHistory is how many history entries fit in the deleting transaction
// beside the slave, its expiring record and the decommissioning set.
const finalHistory = 97

// Delete removes the slave, its whole history and its expiring record. With
// match set, it removes the slave only while match holds for it. It reports
// whether a slave was removed.
//
// A history can outgrow one transaction (100 items), so older entries go
// first in batches and the newest ones go in the transaction that deletes
// the slave, conditioned on the version read: a slave never exists without
// the entry of its current state, and an entry written by a concurrent
// change makes the transaction fail and the deletion start over, so no entry
// outlives its slave.
func (s *Store) Delete(ctx context.Context, id string, match func(machine.Slave) bool) (bool, error) {
	if !storable(id) {
		return false, nil
	}
	for attempt := range attempts {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.tables.Slaves, Key: slaveKey(id), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return false, translate("get slave "+id, err)
		}
		var rec slaveRecord
		if err := attributevalue.UnmarshalMap(out.Item, &rec); err != nil {
			return false, fmt.Errorf("decode slave %s: %w", id, err)
		}
		state := machine.State(rec.State)
		if state == "" || (match != nil && !match(rec.slave())) {
			return false, nil // no slave (or the decommissioning set), or not one to delete
		}
		keys, err := s.historyKeys(ctx, id)
		if err != nil {
			return false, err
		}
		if len(keys) > finalHistory {
			if err := s.batchDelete(ctx, s.tables.History, keys[:len(keys)-finalHistory]); err != nil {
				return false, err
			}
			keys = keys[len(keys)-finalHistory:]
		}
		items := []types.TransactWriteItem{
			{Delete: &types.Delete{
				TableName:                 &s.tables.Slaves,
				Key:                       slaveKey(id),
				ConditionExpression:       aws.String("version = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(rec.Version)},
			}},
			{Delete: &types.Delete{TableName: &s.tables.Expiring, Key: expiringKey(id)}},
		}
		if state.CountsTowardLimit() {
			items = append(items, types.TransactWriteItem{Update: s.leaveLimit(id)})
		}
		for _, k := range keys {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.tables.History, Key: k}})
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if !isCancelled(err) {
			return err == nil, translate("delete slave "+id, err)
		}
		if err := pause(ctx, attempt); err != nil {
			return false, err
		}
	}
	return false, fault.Unavailable("too many concurrent changes of slave %s, try again", id)
}

// historyKeys returns the keys of the slave's history, oldest first.
func (s *Store) historyKeys(ctx context.Context, id string) ([]map[string]types.AttributeValue, error) {
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
// DynamoDB leaves unprocessed.
func (s *Store) batchDelete(ctx context.Context, table string, keys []map[string]types.AttributeValue) error {
	for start := 0; start < len(keys); start += 25 {
		var reqs []types.WriteRequest
		for _, k := range keys[start:min(start+25, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		pending := map[string][]types.WriteRequest{table: reqs}
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				if err := pause(ctx, min(attempt, 6)); err != nil {
					return err
				}
			}
			if attempt == attempts {
				return fault.Unavailable("DynamoDB is busy, try again")
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return translate("delete from "+table, err)
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}

// DeleteDead removes every DEAD slave whose state changed before the epoch
// ms before, with its history and expiring record, 8 at a time, and returns
// how many it removed. A slave that leaves DEAD in the meantime is kept.
func (s *Store) DeleteDead(ctx context.Context, before int64) (int, error) {
	match := func(sl machine.Slave) bool {
		return sl.Current.State == machine.Dead && sl.Current.Timestamp < before
	}
	var dead []string
	err := s.ListByState(ctx, machine.Dead, func(sl machine.Slave) error {
		if match(sl) {
			dead = append(dead, sl.ID)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var (
		mu      sync.Mutex
		removed int
		errs    []error
		g       errgroup.Group
	)
	g.SetLimit(8)
	for _, id := range dead {
		g.Go(func() error {
			ok, err := s.Delete(ctx, id, match)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				removed++
			}
			errs = append(errs, err)
			return nil
		})
	}
	g.Wait()
	return removed, errors.Join(errs...)
}
