// Package logsapp is the composition root of LogsFunction: the one
// constructor from the function's environment to its handler
// (docs/decisions.md "One composition root per function").
package logsapp

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/internal/ondemand"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
)

// Options are what a caller brings instead of what the environment says.
// The zero value is the function in Lambda.
type Options struct {
	// S3 is the client of the log buckets, which also presigns the links;
	// nil builds one from the SDK's environment and S3_FORCE_PATH_STYLE.
	S3 *s3.Client
	// DynamoDB is the client of the log index, read with LOG_INDEX=true;
	// nil builds one from the SDK's environment.
	DynamoDB logindex.API
}

// New reads LogsFunction's variables from getenv and returns the /api/logs
// routes over the log buckets.
func New(ctx context.Context, getenv func(string) string, opts Options) (http.Handler, error) {
	cfg, err := config.LoadLogs(getenv)
	if err != nil {
		return nil, err
	}
	s3cfg, err := config.LoadS3(getenv)
	if err != nil {
		return nil, err
	}
	idx, err := config.LoadLogIndex(getenv)
	if err != nil {
		return nil, err
	}
	var store *logstore.Store
	if opts.S3 != nil {
		store = logstore.New(opts.S3, logstore.NewLinks(opts.S3))
	} else if store, err = logstore.Open(ctx, s3cfg.PathStyle); err != nil {
		return nil, err
	}
	h := logs.New(store, logs.Config(cfg))
	if !idx.On {
		return h, nil
	}
	db := opts.DynamoDB
	if db == nil {
		// The index's client is built by its first call; its
		// configuration is checked now, at init.
		if db, err = ondemand.LoadDynamoDB(ctx, idx.DynamoDBAttemptTimeout); err != nil {
			return nil, err
		}
	}
	table := logindex.NewTable(db, idx.Table)
	// A bucket is read from the index only once a reconciliation has
	// found it complete (docs/behaviour.md "Reconciliation").
	return h.ReadsIndex(table).KnowsComplete(table), nil
}
