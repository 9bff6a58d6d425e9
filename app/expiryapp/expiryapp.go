// Package expiryapp is the composition root of ExpiryFunction: the one
// constructor from the function's environment to its handler
// (docs/decisions.md "One composition root per function").
package expiryapp

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/fleetops/fleet/app/internal/store"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/metrics"
)

// Options are what a caller brings instead of what the environment says.
type Options struct {
	Log     *slog.Logger     // required
	Metrics *metrics.Emitter // nil emits nothing
	// DynamoDB is the client of the tables; nil builds one from the SDK's
	// environment.
	DynamoDB dynamo.API
	// Now is the runs' clock; nil is time.Now.
	Now func() time.Time
}

// Handler is the function's handler: one scheduled run (or a direct
// invocation) in, its result out.
type Handler = func(context.Context, json.RawMessage) (jobs.Result, error)

// New reads ExpiryFunction's variables from getenv and returns its handler.
func New(ctx context.Context, getenv func(string) string, opts Options) (Handler, error) {
	cfg, err := config.LoadSlaves(getenv)
	if err != nil {
		return nil, err
	}
	slaveStore, err := store.Slaves(ctx, cfg, opts.DynamoDB)
	if err != nil {
		return nil, err
	}
	runner := jobs.New(slaveStore, cfg.Limits, cfg.DeadSlaveRetention, opts.Log, opts.Metrics)
	if opts.Now != nil {
		runner.Now = opts.Now
	}
	return runner.Handle, nil
}
