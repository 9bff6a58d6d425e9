// Package tracing owns the service's OpenTelemetry tracing: a server span per
// API request, a client span per AWS SDK call, a span per scheduled or event
// run, and the flush at the end of every Lambda invocation.
//
// Tracing is compiled in only with the build tag otel (make build
// GOTAGS=otel): the OpenTelemetry SDK and its OTLP exporter nearly double the
// size of a function and slow its cold start even when unused, so a default
// build links the no-op hooks of tracing_off.go and nothing else. A traced
// build is still off until its configuration switches it on:
// OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED not "true". Spans then go
// over OTLP/HTTP to the collector of the ADOT Lambda layer (localhost:4318,
// or wherever the standard OTEL_EXPORTER_OTLP_* variables say), under the
// service name AWS_LAMBDA_FUNCTION_NAME.
//
// main calls Start once at cold start, before building SDK clients and
// handlers; the other hooks do nothing when tracing is off.
package tracing

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Start switches tracing on when the build and getenv allow it (see the
// package comment). It fails only when the exporter cannot be set up.
func Start(ctx context.Context, getenv func(string) string) error {
	return start(ctx, getenv)
}

// InstrumentSDK makes every SDK client built from cfg record one client span
// per call (retries included), with rpc.service, rpc.method and the AWS
// request id. With tracing off it leaves cfg unchanged.
func InstrumentSDK(cfg *aws.Config) {
	instrumentSDK(cfg)
}

// HTTP returns h recording one server span per request, named for its route,
// with http.route, the status and request_id (the id of the request's log
// line), continuing the W3C trace context of the request's headers. It goes
// inside web.Wrap, directly around the handler whose ServeMux sets the
// route. With tracing off it returns h.
func HTTP(h http.Handler) http.Handler {
	return httpHandler(h)
}

// Lambda returns the Lambda handler function h, exporting the invocation's
// spans before it returns: Lambda freezes the container once the handler
// returns, and spans still buffered would leave with the next invocation, or
// never. With tracing off it returns h.
func Lambda[E, R any](h func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return lambdaHandler(h, "")
}

// Run is Lambda for a function that serves no HTTP requests (a scheduled or
// event-driven run): each invocation is also one span, named name, that the
// run's SDK calls belong to.
func Run[E, R any](name string, h func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return lambdaHandler(h, name)
}
