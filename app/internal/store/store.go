// Package store builds the DynamoDB store the slave functions share, so
// that the composition roots of ExpiryFunction and InventoryFunction do not
// link SlavesFunction's routes.
package store

import (
	"context"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
)

// Slaves is the store of the slave functions' configuration: on db, or on
// a client built from the SDK's environment (with
// DYNAMODB_ATTEMPT_TIMEOUT) when db is nil.
func Slaves(ctx context.Context, cfg config.Slaves, db dynamo.API) (*dynamo.Store, error) {
	tables := dynamo.Tables(cfg.Tables)
	if db != nil {
		return dynamo.New(db, tables, cfg.HistoryRetention), nil
	}
	return dynamo.Open(ctx, tables, cfg.HistoryRetention, cfg.DynamoDBAttemptTimeout)
}
