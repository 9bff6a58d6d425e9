// Package publisherapp is the composition root of PublisherFunction: the one
// constructor from the function's environment to its handler, which
// publishes the change feed's entries, as the changes table's stream hands
// them over, to EventBridge (docs/decisions.md "One composition root per
// function").
package publisherapp

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/publish"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// attemptTimeout bounds one PutEvents call.
const attemptTimeout = 5 * time.Second

// Options are what a caller brings instead of what the environment says.
type Options struct {
	Log *slog.Logger // required
	// EventBridge is the client of the bus; nil builds one from the SDK's
	// environment.
	EventBridge publish.API
}

// Handler is the function's handler: a batch of stream records in, the
// record to hand the batch again from (if any) out.
type Handler = func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// New reads PublisherFunction's variables from getenv and returns its
// handler.
func New(ctx context.Context, getenv func(string) string, opts Options) (Handler, error) {
	cfg, err := config.LoadPublisher(getenv)
	if err != nil {
		return nil, err
	}
	client := opts.EventBridge
	if client == nil {
		awsCfg, err := sdkconfig.Load(ctx, sdkconfig.EventBridge, attemptTimeout)
		if err != nil {
			return nil, err
		}
		client = eventbridge.NewFromConfig(awsCfg)
	}
	return publish.New(client, cfg.Bus, opts.Log).Handle, nil
}
