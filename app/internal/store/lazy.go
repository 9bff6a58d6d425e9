package store

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// lazyClient is a DynamoDB client (dynamo.API) built by its first call,
// once, however many calls come at once, rather than at cold start: a
// function's init then waits for no client options, middleware stack or
// endpoint resolver (docs/decisions.md "Cold starts"). Building a client
// cannot fail; what can (the region, the credentials) is checked before,
// at init.
type lazyClient struct {
	client func() *dynamodb.Client
}

// onFirstCall returns a client that build makes on its first call.
func onFirstCall(build func() *dynamodb.Client) lazyClient {
	return lazyClient{client: sync.OnceValue(build)}
}

func (l lazyClient) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return l.client().GetItem(ctx, in, opts...)
}

func (l lazyClient) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return l.client().Query(ctx, in, opts...)
}

func (l lazyClient) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return l.client().Scan(ctx, in, opts...)
}

func (l lazyClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return l.client().PutItem(ctx, in, opts...)
}

func (l lazyClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return l.client().DeleteItem(ctx, in, opts...)
}

func (l lazyClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return l.client().UpdateItem(ctx, in, opts...)
}

func (l lazyClient) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return l.client().BatchGetItem(ctx, in, opts...)
}

func (l lazyClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return l.client().BatchWriteItem(ctx, in, opts...)
}

func (l lazyClient) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return l.client().TransactGetItems(ctx, in, opts...)
}

func (l lazyClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return l.client().TransactWriteItems(ctx, in, opts...)
}
