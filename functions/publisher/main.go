// Command publisher is PublisherFunction: it publishes each change of the
// fleet to EventBridge as a "Slave Changed" event, from the changes table's
// DynamoDB stream.
package main

import (
	"context"
	"os"

	"github.com/fleetops/fleet/app/publisherapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("publisher", func(ctx context.Context, s startup.Setup) (publisherapp.Handler, error) {
		return publisherapp.New(ctx, os.Getenv, publisherapp.Options{Log: s.Log})
	})
}
