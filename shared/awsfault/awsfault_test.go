package awsfault_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/awsfault/awsfaulttest"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "Client.Timeout exceeded while awaiting headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestTranslateGivesEachFailureItsKind(t *testing.T) {
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "GetItem", Err: err}
	}
	status := func(code int) error {
		return op(&smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("unexpected body")})
	}
	var (
		busy    = "DynamoDB is busy, try again"
		away    = "DynamoDB could not be reached, try again"
		timeout = "Timed out waiting for DynamoDB"
	)
	tests := []struct {
		name string
		err  error
		kind fault.Kind
		text string
	}{
		{"ProvisionedThroughputExceededException is unavailable", op(&types.ProvisionedThroughputExceededException{}), fault.KindUnavailable, busy},
		{"RequestLimitExceeded is unavailable", op(&types.RequestLimitExceeded{}), fault.KindUnavailable, busy},
		{"ThrottlingException is unavailable", op(&smithy.GenericAPIError{Code: "ThrottlingException"}), fault.KindUnavailable, busy},
		{"TransactionInProgressException is unavailable", op(&types.TransactionInProgressException{}), fault.KindUnavailable, busy},
		{"SlowDown is unavailable", op(&smithy.GenericAPIError{Code: "SlowDown"}), fault.KindUnavailable, busy},
		{"S3's RequestTimeout is unavailable", op(&smithy.GenericAPIError{Code: "RequestTimeout"}), fault.KindUnavailable, busy},
		{"any 5xx is unavailable", status(http.StatusNotImplemented), fault.KindUnavailable, busy},
		{"a 503 is unavailable", status(http.StatusServiceUnavailable), fault.KindUnavailable, busy},
		{"a refused connection is unavailable", op(&smithyhttp.RequestSendError{Err: errors.New("dial tcp 127.0.0.1:9: connect: connection refused")}), fault.KindUnavailable, away},
		{"a reset connection is unavailable", op(&smithyhttp.RequestSendError{Err: errors.New("read tcp: connection reset by peer")}), fault.KindUnavailable, away},
		{"a deadline is a timeout", op(&smithyhttp.RequestSendError{Err: context.DeadlineExceeded}), fault.KindTimeout, timeout},
		{"an attempt timeout is a timeout", op(&smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: "http://dynamodb", Err: timeoutError{}}}), fault.KindTimeout, timeout},
		{"a cancelled request stays internal", op(&smithyhttp.RequestSendError{Err: context.Canceled}), fault.KindInternal, ""},
		{"a validation error stays internal", op(&smithy.GenericAPIError{Code: "ValidationException"}), fault.KindInternal, ""},
		{"access denied stays internal", op(&smithy.GenericAPIError{Code: "AccessDeniedException"}), fault.KindInternal, ""},
		{"another 4xx stays internal", status(http.StatusConflict), fault.KindInternal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := awsfault.Translate(awsfault.DynamoDB, "get slave S1", tt.err)
			if got := fault.KindOf(err); got != tt.kind {
				t.Fatalf("got kind %d (%v), want %d", got, err, tt.kind)
			}
			if got := fault.Message(err); got != tt.text {
				t.Errorf("got message %q, want %q", got, tt.text)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("got %v, want it to wrap %v", err, tt.err)
			}
			if !strings.HasPrefix(err.Error(), "get slave S1: ") {
				t.Errorf("got %q, want it to start with what failed", err)
			}
		})
	}
}

func TestTranslateKeepsAKindAndNil(t *testing.T) {
	conflict := fault.Conflict("slave S1 changed")
	if got := awsfault.Translate(awsfault.S3, "x", conflict); got != conflict {
		t.Errorf("got %v, want the conflict as it is", got)
	}
	if got := awsfault.Translate(awsfault.S3, "x", nil); got != nil {
		t.Errorf("got %v, want nil", got)
	}
}

// The SDK clients the functions build (sdkconfig.Load: its retryer, its
// attempt timeout) meet each failure as AWS and networks present it.
func TestTranslateGivesRealClientsFailuresTheirAnswer(t *testing.T) {
	for _, service := range []string{awsfault.DynamoDB, awsfault.S3} {
		for _, f := range awsfaulttest.Failures(t, service) {
			t.Run(service+": "+f.Name, func(t *testing.T) {
				awsfaulttest.Env(t, service, f.Endpoint)
				ctx := context.Background()
				cfg, err := sdkconfig.Load(ctx, service, f.AttemptTimeout)
				if err != nil {
					t.Fatal(err)
				}
				if service == awsfault.DynamoDB {
					_, err = dynamodb.NewFromConfig(cfg).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("slaves"),
						Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "S1"}}})
				} else {
					_, err = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).
						ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("logs")})
				}
				err = awsfault.Translate(service, "call", err)
				if got := fault.Message(err); got != f.Message {
					t.Errorf("got %q (%v), want %q", got, err, f.Message)
				}
			})
		}
	}
}

// keys is what a fake batch call is sent and leaves unprocessed.
type keys = map[string][]int

func TestDrainResendsWhatIsLeftUntilNothingIs(t *testing.T) {
	var sent []int
	err := awsfault.Drain(context.Background(), awsfault.DynamoDB, "read slaves", keys{"t": {1, 2, 3}},
		func(_ context.Context, pending keys) (keys, error) {
			sent = append(sent, len(pending["t"]))
			if n := len(pending["t"]); n > 1 {
				return keys{"t": pending["t"][1:]}, nil
			}
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 2, 1}; !slices.Equal(sent, want) {
		t.Errorf("got sends of %v items, want %v", sent, want)
	}
}

func TestDrainAnswersLeftoversAsAThrottle(t *testing.T) {
	sends := 0
	err := awsfault.Drain(context.Background(), awsfault.DynamoDB, "read slaves", keys{"t": {1}},
		func(_ context.Context, pending keys) (keys, error) {
			sends++
			return pending, nil
		})
	if fault.KindOf(err) != fault.KindUnavailable || fault.Message(err) != "DynamoDB is busy, try again" {
		t.Errorf("got %v, want DynamoDB is busy (unavailable)", err)
	}
	if sends != awsfault.Attempts {
		t.Errorf("got %d sends, want %d", sends, awsfault.Attempts)
	}
}

func TestDrainTranslatesASendsError(t *testing.T) {
	throttled := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "BatchWriteItem", Err: &types.ProvisionedThroughputExceededException{}}
	err := awsfault.Drain(context.Background(), awsfault.DynamoDB, "delete from history", keys{"t": {1}},
		func(context.Context, keys) (keys, error) { return nil, throttled })
	if fault.KindOf(err) != fault.KindUnavailable || !errors.Is(err, throttled) || !strings.HasPrefix(err.Error(), "delete from history: ") {
		t.Errorf("got %v, want DynamoDB is busy (unavailable), wrapping the throttle", err)
	}
}

func TestDrainStopsAtTheDeadlineWithATimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	// Each send returns only once the deadline has passed, as a slow call
	// does: the pause after it meets a context already ended, however
	// the deadline and the pauses fall on a busy machine.
	err := awsfault.Drain(ctx, awsfault.DynamoDB, "read slaves", keys{"t": {1}},
		func(ctx context.Context, pending keys) (keys, error) {
			<-ctx.Done()
			return pending, nil
		})
	if fault.KindOf(err) != fault.KindTimeout {
		t.Errorf("got %v, want a timeout", err)
	}
}

func TestPauseGrowsAndStaysBounded(t *testing.T) {
	for attempt := 1; attempt < 20; attempt++ {
		ceiling := min(25*time.Millisecond<<(attempt-1), 400*time.Millisecond) + time.Millisecond
		for range 50 {
			if d := awsfault.Pause(attempt); d <= 0 || d > ceiling {
				t.Fatalf("attempt %d: got a pause of %v, want one in (0, %v]", attempt, d, ceiling)
			}
		}
	}
}
