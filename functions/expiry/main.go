// Command expiry is ExpiryFunction: every minute it applies the due expiring
// state changes, and every hour it removes DEAD slaves past their retention
// (EventBridge Scheduler, or a direct invocation).
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/expiry"
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
	runner := expiry.New(store, cfg.Limits, cfg.DeadSlaveRetention, log)
	runner.Metrics = m
	lambda.Start(tracing.Run("expiry", runner.Handle))
}
