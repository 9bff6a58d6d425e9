//go:build integration

package dynamo_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// counted counts the calls a store makes, by operation.
type counted struct {
	*dynamodb.Client
	mu    sync.Mutex
	calls map[string]int
}

func (c *counted) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
}

// take returns the calls counted since the last take, all of them and the
// writes among them.
func (c *counted) take() (calls, writes int, by map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	by = c.calls
	c.calls = map[string]int{}
	for op, n := range by {
		calls += n
		switch op {
		case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
			writes += n
		}
	}
	return calls, writes, by
}

func (c *counted) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.Client.GetItem(ctx, in, o...)
}
func (c *counted) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.count("Query")
	return c.Client.Query(ctx, in, o...)
}
func (c *counted) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.count("Scan")
	return c.Client.Scan(ctx, in, o...)
}
func (c *counted) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.count("PutItem")
	return c.Client.PutItem(ctx, in, o...)
}
func (c *counted) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.count("DeleteItem")
	return c.Client.DeleteItem(ctx, in, o...)
}
func (c *counted) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem")
	return c.Client.UpdateItem(ctx, in, o...)
}
func (c *counted) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.count("BatchGetItem")
	return c.Client.BatchGetItem(ctx, in, o...)
}
func (c *counted) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.count("BatchWriteItem")
	return c.Client.BatchWriteItem(ctx, in, o...)
}
func (c *counted) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	c.count("TransactGetItems")
	return c.Client.TransactGetItems(ctx, in, o...)
}
func (c *counted) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.count("TransactWriteItems")
	return c.Client.TransactWriteItems(ctx, in, o...)
}

var importTableSets atomic.Int64

// importStore is a store on tables of its own, counting its calls.
func importStore(t *testing.T) (*dynamo.Store, *counted, dynamo.Tables) {
	t.Helper()
	prefix := fmt.Sprintf("import%d-", importTableSets.Add(1))
	name := func(logicalID string) string { return prefix + logicalID }
	if err := local.Template.CreateTables(t.Context(), local.DynamoDB, name); err != nil {
		t.Fatal(err)
	}
	tables := dynamo.Tables{Slaves: name("SlavesTable"), History: name("HistoryTable"), Expiring: name("ExpiringTable"), Requests: name("RequestsTable"), Changes: name("ChangesTable")}
	c := &counted{Client: local.DynamoDB, calls: map[string]int{}}
	return dynamo.New(c, tables, 90*24*time.Hour), c, tables
}

// oldHistory is slave id as the old API describes it, with n entries.
func oldHistory(id string, n int, at int64) machine.Import {
	var h []machine.Update
	for i := range n {
		h = append(h, machine.Update{SlaveID: id, State: []machine.State{machine.Active, machine.Frozen}[i%2], Timestamp: at + int64(i), User: "ops@example.com", Message: strconv.Itoa(i)})
	}
	return machine.Import{Slave: machine.Slave{ID: id, FirstSeenAt: at, Current: h[n-1], Host: "old", RackID: "r1", Attributes: map[string]string{}}, History: h}
}

func importWith(t *testing.T, s *dynamo.Store, imp machine.Import, opts machine.ImportOptions) (machine.ImportResult, error) {
	t.Helper()
	var result machine.ImportResult
	err := s.Import(t.Context(), imp.Slave.ID, machine.ImportSlave(imp, opts, machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour},
		func() int64 { return time.Now().UnixMilli() }, &result))
	return result, err
}

// What an import costs in DynamoDB calls, measured: the figures of
// docs/decisions.md "Import". Unchanged writes nothing.
func TestAnImportsCallsAreCounted(t *testing.T) {
	store, c, _ := importStore(t)
	at := time.Now().Add(-time.Hour).UnixMilli()
	for _, tt := range []struct {
		name          string
		imp           machine.Import
		opts          machine.ImportOptions
		result        machine.ImportResult
		calls, writes int
	}{
		{"a slave of 3 entries, not stored", oldHistory("S1", 3, at), machine.ImportOptions{}, machine.Imported, 3, 1},
		{"the same again", oldHistory("S1", 3, at), machine.ImportOptions{}, machine.Unchanged, 2, 0},
		{"the same again with mode=replace", oldHistory("S1", 3, at), machine.ImportOptions{Replace: true}, machine.Unchanged, 2, 0},
		{"another history, a conflict", oldHistory("S1", 4, at), machine.ImportOptions{}, machine.Conflicted, 2, 0},
		{"a slave of 92 entries, one transaction", oldHistory("S2", 92, at), machine.ImportOptions{}, machine.Imported, 3, 1},
		{"a slave of 250 entries, not stored", oldHistory("S3", 250, at), machine.ImportOptions{}, machine.Imported, 5, 3},
		{"the same again", oldHistory("S3", 250, at), machine.ImportOptions{}, machine.Unchanged, 2, 0},
		{"replaced by 3 entries", oldHistory("S3", 3, at), machine.ImportOptions{Replace: true}, machine.Imported, 14, 11}, // 247 entries deleted, 25 a call
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.take()
			result, err := importWith(t, store, tt.imp, tt.opts)
			calls, writes, by := c.take()
			t.Logf("%s: %d calls, %d writes: %v", tt.name, calls, writes, by)
			if result != tt.result || (err != nil) != (tt.result == machine.Conflicted) {
				t.Fatalf("got %s, %v, want %s", result, err, tt.result)
			}
			if calls != tt.calls || writes != tt.writes {
				t.Errorf("got %d calls, %d of them writes, want %d and %d", calls, writes, tt.calls, tt.writes)
			}
		})
	}
}

// An import that never wrote its slave leaves the older entries it wrote:
// the next import of the slave deletes them once they are older than an
// import in flight can be, and waits (loses the race) while they are not.
func TestWhatAnUnfinishedImportLeftIsClearedByTheNext(t *testing.T) {
	store, _, tables := importStore(t)
	at := time.Now().Add(-time.Hour).UnixMilli()
	leave := func(id string, importedAt time.Time) {
		for seq := -3; seq <= 0; seq++ {
			item := map[string]types.AttributeValue{
				"slaveId": &types.AttributeValueMemberS{Value: id}, "seq": &types.AttributeValueMemberN{Value: strconv.Itoa(seq)},
				"state": &types.AttributeValueMemberS{Value: "DEAD"}, "timestamp": &types.AttributeValueMemberN{Value: "1"},
				"importedAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(importedAt.UnixMilli(), 10)},
			}
			if _, err := local.DynamoDB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: &tables.History, Item: item}); err != nil {
				t.Fatal(err)
			}
		}
	}
	leave("S1", time.Now().Add(-time.Hour))
	imp := oldHistory("S1", 3, at)
	if result, err := importWith(t, store, imp, machine.ImportOptions{}); result != machine.Imported || err != nil {
		t.Fatalf("got %s, %v, want imported", result, err)
	}
	h, err := store.History(t.Context(), "S1", time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(h)
	if fmt.Sprint(h) != fmt.Sprint(imp.History) {
		t.Errorf("got history %v, want the import's alone", h)
	}
	leave("S2", time.Now())
	if _, err := importWith(t, store, oldHistory("S2", 3, at), machine.ImportOptions{}); fault.KindOf(err) != fault.KindUnavailable {
		t.Errorf("beside an import in flight: got %v, want it to keep losing the race (503)", err)
	}
}
