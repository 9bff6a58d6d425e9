// Command logs is LogsFunction: the /api/logs endpoint group behind API
// Gateway, over the task logs in S3.
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(ctx context.Context, _ startup.Setup) (http.Handler, error) {
		return logsapp.New(ctx, os.Getenv, logsapp.Options{})
	})
}
