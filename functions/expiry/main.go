// Command expiry is ExpiryFunction: every minute it applies the due expiring
// state changes, and every hour it removes DEAD slaves past their retention
// (EventBridge Scheduler, or a direct invocation).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/expiry"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cfg, err := config.LoadSlaves(os.Getenv)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	store, err := dynamo.Open(context.Background(), cfg.Tables, cfg.HistoryRetention)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	lambda.Start(expiry.New(store, cfg.Limits, cfg.DeadSlaveRetention, log).Handle)
}
