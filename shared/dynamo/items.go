package dynamo

import (
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/machine"
)

// The items of the tables as the store writes them, for tools that fill a
// table without a change (a benchmark's fleet, a fake table's answers,
// make seed-fleet): only this package knows the records' shapes
// (docs/tables.md), so a fixture built here changes with them.

// SlaveItem is slave s, at version, as the slaves table holds it.
func SlaveItem(s machine.Slave, version int64) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(newSlaveRecord(s, version))
}

// HistoryItem is entry u, its slave's seq-th, as the history table holds
// it; expiresAt (epoch seconds) is its TTL once superseded, 0 for the
// current entry.
func HistoryItem(u machine.Update, seq, expiresAt int64) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(historyRecord{SlaveID: u.SlaveID, Seq: seq, State: string(u.State), Timestamp: u.Timestamp,
		User: u.User, Message: u.Message, ExpiresAt: expiresAt})
}

// ExpiringItem is e as the expiring table holds it, with its due time, its
// shard of the due index and its TTL.
func ExpiringItem(e machine.Expiring) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(newExpiringRecord(e, e.DueAt()))
}

// DecommissioningItem is the slaves table's item of the decommissioning
// set: its members, and when the last of them entered or left it.
func DecommissioningItem(members []string, lastAt int64) (map[string]types.AttributeValue, error) {
	item, err := attributevalue.MarshalMap(limitRecord{Members: members, LastAt: lastAt})
	if err != nil {
		return nil, err
	}
	item["id"] = str(limitID)
	return item, nil
}

// FeedKeyItem is the changes table's item that holds the cursors' key.
func FeedKeyItem(key []byte) map[string]types.AttributeValue {
	item := feedKey(keyShard, 0)
	item["key"] = &types.AttributeValueMemberB{Value: key}
	return item
}
