// Package slavesapp is the composition root of SlavesFunction: the one
// constructor from the function's environment to its handler, called by
// functions/slaves, by make run, by the benchmarks and by the test
// harnesses alike (docs/decisions.md "One composition root per function").
package slavesapp

import (
	"context"
	"net/http"
	"time"

	"github.com/fleetops/fleet/app/internal/store"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/slaves"
)

// Options are what a caller brings instead of what the environment says.
// The zero value is the function in Lambda.
type Options struct {
	// DynamoDB is the client of the tables; nil builds one from the SDK's
	// environment, with DYNAMODB_ATTEMPT_TIMEOUT.
	DynamoDB dynamo.API
	// Now is the routes' clock; nil is time.Now.
	Now func() time.Time
}

// New reads SlavesFunction's variables from getenv and returns the
// /api/slaves routes over its tables.
func New(ctx context.Context, getenv func(string) string, opts Options) (http.Handler, error) {
	cfg, err := config.LoadSlaves(getenv)
	if err != nil {
		return nil, err
	}
	st, err := store.Slaves(ctx, cfg, opts.DynamoDB)
	if err != nil {
		return nil, err
	}
	h := slaves.New(st, cfg.Policy, cfg.Limits)
	if opts.Now != nil {
		h.Now = opts.Now
	}
	return h, nil
}
