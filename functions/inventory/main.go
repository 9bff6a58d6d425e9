// Command inventory is InventoryFunction: it applies the scheduler's
// machine reports, from an EventBridge rule or a direct invocation.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
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
	lambda.Start(inventory.New(store, log).Handle)
}
