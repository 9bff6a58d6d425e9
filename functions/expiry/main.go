// Command expiry is ExpiryFunction: every minute it applies the due expiring
// state changes, and every hour it removes DEAD slaves past their retention
// (EventBridge Scheduler, or a direct invocation).
package main

import (
	"context"
	"os"

	"github.com/fleetops/fleet/app/expiryapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("expiry", func(ctx context.Context, s startup.Setup) (expiryapp.Handler, error) {
		return expiryapp.New(ctx, os.Getenv, expiryapp.Options{Log: s.Log, Metrics: s.Metrics})
	})
}
