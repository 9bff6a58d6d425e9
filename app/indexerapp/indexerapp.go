// Package indexerapp is the composition root of IndexerFunction: the one
// constructor from the function's environment to its handler, which keeps
// the task-log index from the log buckets' S3 events and runs the steps
// and batches of ReconcileStateMachine (docs/decisions.md "One composition
// root per function").
package indexerapp

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/internal/ondemand"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/metrics"
)

// Options are what a caller brings instead of what the environment says.
type Options struct {
	Log     *slog.Logger     // required
	Metrics *metrics.Emitter // nil emits nothing
	// DynamoDB is the client of the index table; nil builds one from the
	// SDK's environment.
	DynamoDB logindex.API
	// S3 is the client of the log buckets; nil builds one from the SDK's
	// environment and S3_FORCE_PATH_STYLE.
	S3 *s3.Client
}

// Handler is the function's handler: one S3 object event, or one step or
// batch of a reconciliation, in; what it did out.
type Handler = func(context.Context, json.RawMessage) (logindex.Result, error)

// New reads IndexerFunction's variables from getenv and returns its
// handler.
func New(ctx context.Context, getenv func(string) string, opts Options) (Handler, error) {
	cfg, err := config.LoadIndexer(getenv)
	if err != nil {
		return nil, err
	}
	db := opts.DynamoDB
	if db == nil {
		// The index's client is built by its first call; its
		// configuration is checked now, at init.
		if db, err = ondemand.LoadDynamoDB(ctx, cfg.DynamoDBAttemptTimeout); err != nil {
			return nil, err
		}
	}
	table := logindex.NewTable(db, cfg.Table)
	client := opts.S3
	if client == nil {
		if client, err = logstore.Client(ctx, cfg.S3.PathStyle); err != nil {
			return nil, err
		}
	}
	return logindex.NewIndexer(logstore.NewBuckets(client), table, cfg.Format, cfg.Buckets, opts.Log, opts.Metrics).Handle, nil
}
