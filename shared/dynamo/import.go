package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/machine"
)

// importFinal is how many of an imported history's newest entries go in
// the transaction that writes the slave, beside the slave, the current
// entry of a slave replaced, the expiring record, the decommissioning set,
// and the feed's head and up to three entries (deleted, added,
// expiringSet): DynamoDB's 100 items a transaction at most.
const importFinal = 100 - 8

// importChunk is how many older entries one transaction writes before the
// slave.
const importChunk = 100

// importFresh is how long the entries an import wrote before its slave are
// taken for an import still in flight, which another import of the same
// slave must not undo: a request's deadline (20 s) many times over, and
// more than the skew of two instances' clocks (machine.MaxClockSkew).
// Older ones are what an import that never wrote its slave left behind.
const importFresh = 2 * time.Minute

// importSlave writes an imported slave whole (docs/decisions.md "Import"):
// its record, its history, its expiring record, the decommissioning set's
// join or leave and its feed entries, in place of the slave read when the
// plan replaces it, and conditioned on there being none otherwise.
//
// The newest importFinal entries, at seq 1 up to the slave's version, go
// in one transaction with the slave and the rest, so that a slave never
// exists without its current entry. A longer history's older entries are
// written first, in transactions of importChunk, at seq 0 and below, which
// no change of a slave ever takes (a change takes its version plus one):
// so entries written for a slave that another writer creates meanwhile
// can never stand in the way of that slave's changes. The import then
// loses the race, deletes what it wrote and decides again.
//
// Before it writes, it deletes what the slave's history holds that the
// import does not overwrite: of a slave replaced, every entry but the
// current one, which goes in the last transaction; of a slave not stored,
// what an import that never wrote its slave left (older than importFresh;
// a fresher one is an import in flight, and this one loses the race).
func (s *driver) importSlave(ctx context.Context, w change.Write) error {
	id, r, plan := w.ID, w.Read, w.Plan
	n := len(plan.History)
	final := min(n, importFinal)
	first := int64(final - n + 1) // the oldest entry's seq
	now := time.Now().UnixMilli()
	stored, err := s.importedKeys(ctx, id)
	if err != nil {
		return err
	}
	var gone []map[string]types.AttributeValue
	for _, k := range stored {
		switch {
		case !plan.Replace && k.ImportedAt > now-importFresh.Milliseconds():
			return change.ErrRace // another import of the slave is in flight
		case k.Seq >= first && k.Seq <= int64(final):
			// overwritten
		case plan.Replace && k.Seq == r.Version:
			// the current entry goes with the slave it is the state of
		default:
			gone = append(gone, historyKey(id, k.Seq))
		}
	}
	if len(gone) > 0 {
		if err := s.batchDelete(ctx, s.tables.History, gone); err != nil {
			return err
		}
	}
	entry := func(i int, importedAt int64) (types.TransactWriteItem, error) {
		u := plan.History[i]
		rec := historyRecord{SlaveID: id, Seq: first + int64(i), State: string(u.State), Timestamp: u.Timestamp, User: u.User, Message: u.Message, ImportedAt: importedAt}
		if i < n-1 {
			rec.ExpiresAt = w.Supersedes
		}
		item, err := attributevalue.MarshalMap(rec)
		if err != nil {
			return types.TransactWriteItem{}, fmt.Errorf("encode history of %s: %w", id, err)
		}
		return types.TransactWriteItem{Put: &types.Put{TableName: &s.tables.History, Item: item}}, nil
	}
	older := n - final
	for start := 0; start < older; start += importChunk {
		var items []types.TransactWriteItem
		for i := start; i < min(start+importChunk, older); i++ {
			it, err := entry(i, now)
			if err != nil {
				return err
			}
			if !plan.Replace {
				it.Put.ConditionExpression = aws.String("attribute_not_exists(slaveId)")
			}
			items = append(items, it)
		}
		if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
			s.undoImport(ctx, id, plan, first, start, now)
			if isCancelled(err) {
				return change.ErrRace
			}
			return translate("import history of "+id, err)
		}
	}

	slave := plan.Slave
	slave.ID, slave.Current.SlaveID, slave.Sequence = id, id, w.Sequence()
	item, err := attributevalue.MarshalMap(newSlaveRecord(slave, int64(final)))
	if err != nil {
		return fmt.Errorf("encode slave %s: %w", id, err)
	}
	put := &types.Put{TableName: &s.tables.Slaves, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)")}
	if plan.Replace {
		put.ConditionExpression = aws.String("version = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(r.Version)}
	}
	items := []types.TransactWriteItem{{Put: put}}
	for i := older; i < n; i++ {
		it, err := entry(i, 0)
		if err != nil {
			return err
		}
		items = append(items, it)
	}
	if plan.Replace && r.Version > int64(final) {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: &s.tables.History, Key: historyKey(id, r.Version)}})
	}
	if e := plan.PutExpiring; e != nil {
		item, err := attributevalue.MarshalMap(newExpiringRecord(*e, plan.ExpiringKeptFrom()))
		if err != nil {
			return fmt.Errorf("encode expiring record of %s: %w", id, err)
		}
		put := &types.Put{TableName: &s.tables.Expiring, Item: item, ConditionExpression: aws.String("attribute_not_exists(machineId)")}
		if plan.DropExpiring {
			put.ConditionExpression = aws.String("actionId = :a")
			put.ExpressionAttributeValues = map[string]types.AttributeValue{":a": str(r.Snapshot.Expiring.ActionID)}
		}
		items = append(items, types.TransactWriteItem{Put: put})
	} else if plan.DropExpiring {
		items = append(items, types.TransactWriteItem{Delete: s.deleteExpiring(id, r.Snapshot.Expiring.ActionID)})
	}
	limitIndex := -1
	if plan.Join || plan.Leave {
		limitIndex = len(items)
		items = append(items, types.TransactWriteItem{Update: s.moveLimit(id, plan.Join, plan.Limit, r.Snapshot.LimitAt, plan.SetAt)})
	}
	feed, err := s.changeItems(w.Changes)
	if err != nil {
		return err
	}
	items = append(items, feed...)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		s.undoImport(ctx, id, plan, first, older, now)
	}
	return writeError(id, err, limitIndex, plan.Join, plan.Limit, r.Snapshot.LimitAt)
}

// undoImport deletes the first written older entries an import of a slave
// not stored wrote before its slave's transaction failed, each only while
// it is still the one written at importedAt: best effort, since an entry
// left behind is deleted by the next import of the slave, and stands in
// the way of no change. Entries written over a slave replaced stay: the
// import that replaces it is decided again.
func (s *driver) undoImport(ctx context.Context, id string, plan *machine.Plan, first int64, written int, importedAt int64) {
	if plan.Replace {
		return
	}
	for start := 0; start < written; start += importChunk {
		var items []types.TransactWriteItem
		for i := start; i < min(start+importChunk, written); i++ {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{
				TableName: &s.tables.History, Key: historyKey(id, first+int64(i)),
				ConditionExpression: aws.String("importedAt = :at"), ExpressionAttributeValues: map[string]types.AttributeValue{":at": num(importedAt)},
			}})
		}
		_, _ = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	}
}

// importedKey is a history entry's key, and when an import wrote it before
// its slave (0 for any other).
type importedKey struct {
	Seq        int64 `dynamodbav:"seq"`
	ImportedAt int64 `dynamodbav:"importedAt"`
}

// importedKeys reads the keys of the slave's history, with a strongly
// consistent Query.
func (s *driver) importedKeys(ctx context.Context, id string) ([]importedKey, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.tables.History,
		KeyConditionExpression:    aws.String("slaveId = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id)},
		ProjectionExpression:      aws.String("seq, importedAt"),
		ConsistentRead:            aws.Bool(true),
	}
	var keys []importedKey
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, translate("query history keys of "+id, err)
		}
		var page []importedKey
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &page); err != nil {
			return nil, fmt.Errorf("decode history keys of %s: %w", id, err)
		}
		keys = append(keys, page...)
	}
	return keys, nil
}

func historyKey(id string, seq int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"slaveId": str(id), "seq": num(seq)}
}
