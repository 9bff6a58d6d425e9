// Command inventory is InventoryFunction: it applies the scheduler's
// machine reports, from an EventBridge rule or a direct invocation.
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("inventory", func(ctx context.Context, s startup.Setup) (func(context.Context, json.RawMessage) (inventory.Result, error), error) {
		cfg, err := config.LoadSlaves(os.Getenv)
		if err != nil {
			return nil, err
		}
		store, err := dynamo.Open(ctx, dynamo.Tables(cfg.Tables), cfg.HistoryRetention, cfg.DynamoDBAttemptTimeout)
		if err != nil {
			return nil, err
		}
		return inventory.New(store, cfg.LossBrake, s.Log, s.Metrics).Handle, nil
	})
}
