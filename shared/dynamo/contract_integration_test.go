//go:build integration

package dynamo_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/storetest"
)

// tableSets numbers the fresh tables each contract case gets.
var tableSets atomic.Int64

// TestStoreKeepsTheContract runs the store contract that shared/memstore
// keeps too, each case on tables of its own, created from template.yaml: the
// decommissioning set is one item per table, so cases must not share one.
func TestStoreKeepsTheContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, historyRetention time.Duration) storetest.Store {
		prefix := fmt.Sprintf("contract%d-", tableSets.Add(1))
		name := func(logicalID string) string { return prefix + logicalID }
		if err := local.Template.CreateTables(t.Context(), local.DynamoDB, name); err != nil {
			t.Fatal(err)
		}
		tables := dynamo.Tables{Slaves: name("SlavesTable"), History: name("HistoryTable"), Expiring: name("ExpiringTable"), Requests: name("RequestsTable"), Changes: name("ChangesTable")}
		return dynamo.New(local.DynamoDB, tables, historyRetention)
	})
}
