// Package store builds the DynamoDB store the slave functions share, so
// that the composition roots of ExpiryFunction and InventoryFunction do not
// link SlavesFunction's routes.
package store

import (
	"context"

	"github.com/fleetops/fleet/app/internal/ondemand"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
)

// Slaves is the store of the slave functions' configuration: on db, or on
// a client of the SDK's environment (with DYNAMODB_ATTEMPT_TIMEOUT) when db
// is nil. That environment is read and checked here, so a function without
// its region or credentials still fails its init, saying which; the client
// itself is built on the store's first call (ondemand.DynamoDB).
func Slaves(ctx context.Context, cfg config.Slaves, db dynamo.API) (*dynamo.Store, error) {
	if db == nil {
		var err error
		if db, err = ondemand.LoadDynamoDB(ctx, cfg.DynamoDBAttemptTimeout); err != nil {
			return nil, err
		}
	}
	return dynamo.New(db, dynamo.Tables(cfg.Tables), cfg.HistoryRetention), nil
}
