// Package startup is what every function's main does at cold start: the
// log, the metrics emitter and tracing from Lambda's environment, then the
// function's own handler, then the Lambda runtime. A setup error is logged
// and the process exits, which Lambda reports as a failed init.
package startup

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/tracing"
	"github.com/fleetops/fleet/shared/web"
)

// Setup is what a function's handler is built with.
type Setup struct {
	Log     *slog.Logger
	Metrics *metrics.Emitter
}

// API starts a function that serves an endpoint group behind API Gateway,
// which invokes it with response streaming (responseTransferMode STREAM on
// every integration of FleetApi that reaches it in template.yaml, which
// functions/streamed_test.go checks): the handler build returns, wrapped by
// web (log line, errors, compression), answers in the streaming format
// (edge.StreamHandler), every answer whole, written as it is encoded
// (docs/behaviour.md "Answers of any size").
func API(build func(ctx context.Context, s Setup) (http.Handler, error)) {
	ctx, s := setup()
	h, err := build(ctx, s)
	exitOn(s.Log, err)
	lambda.Start(tracing.Lambda(edge.StreamHandler(web.Wrap(tracing.HTTP(h), web.Options{Logger: s.Log, RequestID: edge.RequestID, Metrics: s.Metrics}))))
}

// Events starts a function that handles events (a scheduled run, a
// report): each invocation of the handler build returns is one span named
// name.
func Events[E, R any](name string, build func(ctx context.Context, s Setup) (func(context.Context, E) (R, error), error)) {
	ctx, s := setup()
	h, err := build(ctx, s)
	exitOn(s.Log, err)
	lambda.Start(tracing.Run(name, h))
}

func setup() (context.Context, Setup) {
	ctx := context.Background()
	log := lambdalog.New(os.Stdout, os.Getenv)
	m, err := metrics.FromEnv(os.Stdout, os.Getenv)
	exitOn(log, err)
	exitOn(log, tracing.Start(ctx, os.Getenv))
	return ctx, Setup{Log: log, Metrics: m}
}

func exitOn(log *slog.Logger, err error) {
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
}
