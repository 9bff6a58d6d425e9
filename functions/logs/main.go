// Command logs is LogsFunction: the /api/logs endpoint group behind API
// Gateway, over the task logs in S3.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/tracing"
	"github.com/fleetops/fleet/shared/web"
)

func main() {
	log := lambdalog.New(os.Stdout, os.Getenv)
	cfg, err := config.LoadLogs(os.Getenv)
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
	store, err := logstore.Open(context.Background(), cfg.PathStyle)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	h := logs.New(store, cfg)
	lambda.Start(tracing.Lambda(edge.Handler(web.Wrap(tracing.HTTP(h), web.Options{Logger: log, RequestID: edge.RequestID, Metrics: m}))))
}
