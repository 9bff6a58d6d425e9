// Command inventory is InventoryFunction: it applies the scheduler's
// machine reports: inline from an EventBridge rule or a direct invocation,
// and the report objects S3 announces, as the steps of ReportStateMachine.
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/reportstore"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("inventory", func(ctx context.Context, s startup.Setup) (func(context.Context, json.RawMessage) (inventory.Result, error), error) {
		cfg, err := config.LoadSlaves(os.Getenv)
		if err != nil {
			return nil, err
		}
		reports, err := config.LoadReports(os.Getenv)
		if err != nil {
			return nil, err
		}
		store, err := dynamo.Open(ctx, dynamo.Tables(cfg.Tables), cfg.HistoryRetention, cfg.DynamoDBAttemptTimeout)
		if err != nil {
			return nil, err
		}
		h := inventory.New(store, cfg.LossBrake, s.Log, s.Metrics)
		if reports.Bucket != "" {
			objects, err := reportstore.Open(ctx, reports.S3)
			if err != nil {
				return nil, err
			}
			h.ReadsFrom(reports.Bucket, objects).FansOut(store, objects, reports.PartSize)
		}
		return h.Handle, nil
	})
}
