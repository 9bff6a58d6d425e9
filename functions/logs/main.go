// Command logs is LogsFunction: the /api/logs endpoint group behind API
// Gateway, over the task logs in S3.
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(ctx context.Context, _ startup.Setup) (http.Handler, error) {
		cfg, err := config.LoadLogs(os.Getenv)
		if err != nil {
			return nil, err
		}
		s3cfg, err := config.LoadS3(os.Getenv)
		if err != nil {
			return nil, err
		}
		store, err := logstore.Open(ctx, s3cfg)
		if err != nil {
			return nil, err
		}
		return logs.New(store, cfg), nil
	})
}
