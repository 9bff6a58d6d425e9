// Package inventoryapp is the composition root of InventoryFunction: the
// one constructor from the function's environment to its handler, which
// applies inline reports and, with REPORTS_BUCKET, the steps of
// ReportStateMachine (docs/decisions.md "One composition root per
// function").
package inventoryapp

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/fleetops/fleet/app/internal/store"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/reportstore"
)

// Options are what a caller brings instead of what the environment says.
type Options struct {
	Log     *slog.Logger     // required
	Metrics *metrics.Emitter // nil emits nothing
	// DynamoDB is the client of the tables; nil builds one from the SDK's
	// environment.
	DynamoDB dynamo.API
	// S3 is the client of the reports bucket; nil builds one from the
	// SDK's environment when REPORTS_BUCKET is set.
	S3 reportstore.API
}

// Handler is the function's handler: an event in, what it applied out.
type Handler = func(context.Context, json.RawMessage) (inventory.Result, error)

// New reads InventoryFunction's variables from getenv and returns its
// handler.
func New(ctx context.Context, getenv func(string) string, opts Options) (Handler, error) {
	cfg, err := config.LoadSlaves(getenv)
	if err != nil {
		return nil, err
	}
	reports, err := config.LoadReports(getenv)
	if err != nil {
		return nil, err
	}
	slaveStore, err := store.Slaves(ctx, cfg, opts.DynamoDB)
	if err != nil {
		return nil, err
	}
	memoryMB := reports.MemoryMB
	if memoryMB == 0 {
		memoryMB = inventory.DefaultMemoryMB
	}
	h := inventory.New(slaveStore, cfg.LossBrake, opts.Log, opts.Metrics).Bounded(inventory.BoundFor(memoryMB))
	if reports.Bucket == "" {
		return h.Handle, nil
	}
	var objects *reportstore.Store
	if opts.S3 != nil {
		objects = reportstore.New(opts.S3)
	} else if objects, err = reportstore.Open(ctx, reports.S3.PathStyle); err != nil {
		return nil, err
	}
	return h.ReadsFrom(reports.Bucket, objects).FansOut(slaveStore, objects, reports.PartSize).Handle, nil
}
