package sdkconfig

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/fleetops/fleet/shared/callcount"
)

// scripted answers DynamoDB requests from memory: the first throttled
// answers are throttling errors, the rest an empty GetItem result.
type scripted struct {
	throttled int64
	seen      atomic.Int64
}

func (s *scripted) Do(r *http.Request) (*http.Response, error) {
	n := s.seen.Add(1)
	status, body := http.StatusOK, `{}`
	if n <= s.throttled {
		status, body = http.StatusBadRequest, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// getSlave is a GetItem of one slave; its answer does not matter here.
var getSlave = &dynamodb.GetItemInput{TableName: aws.String("slaves"),
	Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "S1"}}}

func countedClient(s *scripted) *dynamodb.Client {
	return dynamodb.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:   s,
		Retryer:      Retryer,
		APIOptions:   []func(*middleware.Stack) error{CountCalls},
		BaseEndpoint: aws.String("http://dynamodb.test"),
	})
}

func TestCountCallsCountsEveryAttemptAndEveryThrottle(t *testing.T) {
	tests := []struct {
		name                     string
		throttled                int64
		wantCalls, wantThrottled int64
		wantErr                  bool
	}{
		{name: "a call answered at once counts one", wantCalls: 1},
		{name: "a call throttled once counts both attempts", throttled: 1, wantCalls: 2, wantThrottled: 1},
		{name: "a call throttled on every attempt counts them all and fails", throttled: 99, wantCalls: MaxAttempts, wantThrottled: MaxAttempts, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, calls := callcount.With(context.Background())
			_, err := countedClient(&scripted{throttled: tt.throttled}).GetItem(ctx, getSlave)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if calls.Calls() != tt.wantCalls || calls.Throttled() != tt.wantThrottled {
				t.Errorf("got %d calls, %d throttled, want %d and %d", calls.Calls(), calls.Throttled(), tt.wantCalls, tt.wantThrottled)
			}
		})
	}
}

func TestCountCallsWithoutACounterCountsNothing(t *testing.T) {
	s := &scripted{}
	if _, err := countedClient(s).GetItem(context.Background(), getSlave); err != nil {
		t.Fatal(err)
	}
	if s.seen.Load() != 1 {
		t.Errorf("got %d requests, want 1", s.seen.Load())
	}
}
