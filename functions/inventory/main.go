// Command inventory is InventoryFunction: it applies the scheduler's
// machine reports, from an EventBridge rule or a direct invocation.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/tracing"
)

func main() {
	log := lambdalog.New(os.Stdout, os.Getenv)
	cfg, err := config.LoadSlaves(os.Getenv)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	m, err := metrics.FromEnv(os.Stdout, os.Getenv)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	if err := tracing.Start(context.Background(), os.Getenv); err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	store, err := dynamo.Open(context.Background(), dynamo.Tables(cfg.Tables), cfg.HistoryRetention)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	reports := inventory.New(store, cfg.LossBrake, log)
	reports.Metrics = m
	lambda.Start(tracing.Run("inventory", reports.Handle))
}
