// Command expiry is ExpiryFunction: every minute it applies the due expiring
// state changes, and every hour it removes DEAD slaves past their retention
// (EventBridge Scheduler, or a direct invocation).
package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("expiry", func(ctx context.Context, s startup.Setup) (func(context.Context, json.RawMessage) (jobs.Result, error), error) {
		cfg, err := config.LoadSlaves(os.Getenv)
		if err != nil {
			return nil, err
		}
		store, err := dynamo.Open(ctx, dynamo.Tables(cfg.Tables), cfg.HistoryRetention, cfg.DynamoDBAttemptTimeout)
		if err != nil {
			return nil, err
		}
		return jobs.New(store, cfg.Limits, cfg.DeadSlaveRetention, s.Log, s.Metrics).Handle, nil
	})
}
