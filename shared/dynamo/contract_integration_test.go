//go:build integration

package dynamo_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/storetest"

	"pgregory.net/rapid"
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

// TestAFollowerThatListsThenFollowsTheFeedEndsEqualToTheList runs the feed's
// model (storetest.FeedModel) on DynamoDB: its writers really race, on
// conditions DynamoDB checks. The sequences share one set of tables, each
// on slaves of its own; fewer and shorter than rapid's default, as each step is a
// few round trips to the emulator.
func TestAFollowerThatListsThenFollowsTheFeedEndsEqualToTheList(t *testing.T) {
	for name, n := range map[string]string{"rapid.checks": "3", "rapid.steps": "10"} {
		f := flag.Lookup(name)
		if f != nil && f.Value.String() == f.DefValue && os.Getenv(strings.ToUpper(strings.ReplaceAll(name, ".", "_"))) == "" {
			_ = f.Value.Set(n)
			defer f.Value.Set(f.DefValue)
		}
	}
	name := func(logicalID string) string { return "feedmodel-" + logicalID }
	if err := local.Template.CreateTables(t.Context(), local.DynamoDB, name); err != nil {
		t.Fatal(err)
	}
	tables := dynamo.Tables{Slaves: name("SlavesTable"), History: name("HistoryTable"), Expiring: name("ExpiringTable"), Requests: name("RequestsTable"), Changes: name("ChangesTable")}
	store := dynamo.New(local.DynamoDB, tables, 0)
	var sequence atomic.Int64
	rapid.Check(t, func(t *rapid.T) {
		storetest.FeedModel(t, store, fmt.Sprintf("m%d-", sequence.Add(1)))
	})
}
