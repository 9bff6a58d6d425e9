// Command logs is LogsFunction: the /api/logs endpoint group behind API
// Gateway, over the task logs in S3.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	cfg, err := config.LoadLogs(os.Getenv)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	store, err := logstore.Open(context.Background(), cfg.PathStyle)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	h := logs.New(store, cfg)
	lambda.Start(edge.Handler(web.Wrap(h, web.Options{Logger: log, RequestID: edge.RequestID})))
}
