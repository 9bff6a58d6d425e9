// Package ondemand builds the composition roots' SDK clients on their
// first call rather than at cold start (docs/decisions.md "Cold starts"):
// a function's init then waits for no client options, middleware stack or
// endpoint resolver. Building a client cannot fail; what can (the region,
// the credentials) is read and checked before, at init, by sdkconfig.Load,
// whose configuration the client is built from. It imports no adapter, so
// a root that uses it links only the SDK client.
package ondemand

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetops/fleet/shared/sdkconfig"
)

// DynamoDB is a DynamoDB client built by its first call, once, however
// many calls come at once. It has the calls of dynamo.API and
// logindex.API.
type DynamoDB struct {
	client func() *dynamodb.Client
}

// LoadDynamoDB reads and checks the SDK's environment now (sdkconfig.Load,
// with attemptTimeout), so that a function without its region or
// credentials fails its init saying which, and returns a client built
// from it on its first call.
func LoadDynamoDB(ctx context.Context, attemptTimeout time.Duration) (DynamoDB, error) {
	cfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, attemptTimeout)
	if err != nil {
		return DynamoDB{}, err
	}
	return dynamoDBBuiltBy(func() *dynamodb.Client { return dynamodb.NewFromConfig(cfg) }), nil
}

func dynamoDBBuiltBy(build func() *dynamodb.Client) DynamoDB {
	return DynamoDB{client: sync.OnceValue(build)}
}

// GetItem is the client's GetItem.
func (d DynamoDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return d.client().GetItem(ctx, in, opts...)
}

// Query is the client's Query.
func (d DynamoDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return d.client().Query(ctx, in, opts...)
}

// Scan is the client's Scan.
func (d DynamoDB) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return d.client().Scan(ctx, in, opts...)
}

// PutItem is the client's PutItem.
func (d DynamoDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return d.client().PutItem(ctx, in, opts...)
}

// DeleteItem is the client's DeleteItem.
func (d DynamoDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return d.client().DeleteItem(ctx, in, opts...)
}

// UpdateItem is the client's UpdateItem.
func (d DynamoDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return d.client().UpdateItem(ctx, in, opts...)
}

// BatchGetItem is the client's BatchGetItem.
func (d DynamoDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return d.client().BatchGetItem(ctx, in, opts...)
}

// BatchWriteItem is the client's BatchWriteItem.
func (d DynamoDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return d.client().BatchWriteItem(ctx, in, opts...)
}

// TransactGetItems is the client's TransactGetItems.
func (d DynamoDB) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return d.client().TransactGetItems(ctx, in, opts...)
}

// TransactWriteItems is the client's TransactWriteItems.
func (d DynamoDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return d.client().TransactWriteItems(ctx, in, opts...)
}
