// Command slaves is SlavesFunction: the /api/slaves endpoint group behind
// API Gateway.
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(ctx context.Context, _ startup.Setup) (http.Handler, error) {
		cfg, err := config.LoadSlaves(os.Getenv)
		if err != nil {
			return nil, err
		}
		store, err := dynamo.Open(ctx, dynamo.Tables(cfg.Tables), cfg.HistoryRetention, cfg.DynamoDBAttemptTimeout)
		if err != nil {
			return nil, err
		}
		return slaves.New(store, cfg.Policy, cfg.Limits), nil
	})
}
