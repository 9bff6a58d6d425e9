package ondemand

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/logindex"
)

// The client stands for the SDK's wherever a root builds a store on one.
var (
	_ dynamo.API   = DynamoDB{}
	_ logindex.API = DynamoDB{}
)

// answering is an HTTP client that answers every DynamoDB call with an empty
// result at once, and records the operations it was asked for.
type answering struct {
	mu  sync.Mutex
	ops map[string]int
}

func (a *answering) Do(r *http.Request) (*http.Response, error) {
	_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	a.mu.Lock()
	a.ops[op]++
	a.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// calls are the store's calls, each by the operation it must reach, with
// what the SDK requires of its input.
var calls = map[string]func(context.Context, dynamo.API) error{
	"GetItem": func(ctx context.Context, c dynamo.API) error {
		_, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key})
		return err
	},
	"Query": func(ctx context.Context, c dynamo.API) error {
		_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: table})
		return err
	},
	"Scan": func(ctx context.Context, c dynamo.API) error {
		_, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: table})
		return err
	},
	"PutItem": func(ctx context.Context, c dynamo.API) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key})
		return err
	},
	"DeleteItem": func(ctx context.Context, c dynamo.API) error {
		_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: key})
		return err
	},
	"UpdateItem": func(ctx context.Context, c dynamo.API) error {
		_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: key})
		return err
	},
	"BatchGetItem": func(ctx context.Context, c dynamo.API) error {
		_, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{*table: {Keys: []map[string]types.AttributeValue{key}}}})
		return err
	},
	"BatchWriteItem": func(ctx context.Context, c dynamo.API) error {
		_, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{*table: {{PutRequest: &types.PutRequest{Item: key}}}}})
		return err
	},
	"TransactGetItems": func(ctx context.Context, c dynamo.API) error {
		_, err := c.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{Get: &types.Get{TableName: table, Key: key}}}})
		return err
	},
	"TransactWriteItems": func(ctx context.Context, c dynamo.API) error {
		_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: table, Item: key}}}})
		return err
	},
}

var (
	table = aws.String("slaves")
	key   = map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "s1"}}
)

func TestTheClientIsBuiltByItsFirstCallOnceWhateverCallsComeAtOnce(t *testing.T) {
	http := &answering{ops: map[string]int{}}
	var builds atomic.Int32
	c := dynamoDBBuiltBy(func() *dynamodb.Client {
		builds.Add(1)
		// A slow build, as a cold one is: calls that come meanwhile must
		// wait for it, not build their own.
		time.Sleep(5 * time.Millisecond)
		return dynamodb.New(dynamodb.Options{
			Region:       "us-east-1",
			Credentials:  credentials.NewStaticCredentialsProvider("key", "secret", ""),
			BaseEndpoint: aws.String("http://dynamodb.test"),
			HTTPClient:   http,
		})
	})
	if n := builds.Load(); n != 0 {
		t.Fatalf("got %d clients built before any call, want 0", n)
	}
	const each = 8
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for op, call := range calls {
		for range each {
			wg.Go(func() {
				<-start
				if err := call(ctx, c); err != nil {
					t.Errorf("%s: %v", op, err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("got %d clients built by %d concurrent calls, want 1", n, each*len(calls))
	}
	for op := range calls {
		if http.ops[op] != each {
			t.Errorf("%s: got %d calls of it, want %d (%v)", op, http.ops[op], each, http.ops)
		}
	}
}
