// Command slaves is SlavesFunction: the /api/slaves endpoint group behind
// API Gateway.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/tracing"
	"github.com/fleetops/fleet/shared/web"
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
	h := slaves.New(store, cfg.Policy, cfg.Limits)
	lambda.Start(tracing.Lambda(edge.Handler(web.Wrap(tracing.HTTP(h), web.Options{Logger: log, RequestID: edge.RequestID, Metrics: m}))))
}
