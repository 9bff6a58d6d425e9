// Command inventory is InventoryFunction: it applies the scheduler's
// machine reports: inline from an EventBridge rule or a direct invocation,
// and the report objects S3 announces, as the steps of ReportStateMachine.
package main

import (
	"context"
	"os"

	"github.com/fleetops/fleet/app/inventoryapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("inventory", func(ctx context.Context, s startup.Setup) (inventoryapp.Handler, error) {
		return inventoryapp.New(ctx, os.Getenv, inventoryapp.Options{Log: s.Log, Metrics: s.Metrics})
	})
}
