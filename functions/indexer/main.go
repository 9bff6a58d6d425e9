// Command indexer is IndexerFunction: it keeps the task-log index from the
// log buckets' S3 "Object Created" and "Object Deleted" events
// (EventBridge), and runs the steps and batches of ReconcileStateMachine.
package main

import (
	"context"
	"os"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.Events("indexer", func(ctx context.Context, s startup.Setup) (indexerapp.Handler, error) {
		return indexerapp.New(ctx, os.Getenv, indexerapp.Options{Log: s.Log, Metrics: s.Metrics})
	})
}
