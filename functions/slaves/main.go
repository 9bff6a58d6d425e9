// Command slaves is SlavesFunction: the /api/slaves endpoint group behind
// API Gateway.
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/app/slavesapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(ctx context.Context, _ startup.Setup) (http.Handler, error) {
		return slavesapp.New(ctx, os.Getenv, slavesapp.Options{})
	})
}
