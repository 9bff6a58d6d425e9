// Command slaves is SlavesFunction: the /api/slaves endpoint group behind
// API Gateway. Its timeout is a stream's; every other request gets the
// deadline it had before streams (slaves.Deadlines).
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/app/slavesapp"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(ctx context.Context, _ startup.Setup) (http.Handler, error) {
		h, err := slavesapp.New(ctx, os.Getenv, slavesapp.Options{})
		return slaves.Deadlines(h), err
	})
}
