// Package awsfault is the one translation of the AWS SDK's errors into the
// service's fault kinds, used by every adapter that talks to AWS
// (shared/dynamo, shared/logindex, shared/logstore, shared/reportstore), and
// the one loop that resends what a batch call leaves unprocessed
// (docs/decisions.md "One translation of AWS errors").
//
// Its list of throttling and retryable errors is the SDK's own
// (retry.DefaultThrottles and retry.DefaultRetryables), the one the retryer
// of shared/sdkconfig retries on: an error that reaches an adapter after the
// retries is the translation's to classify, and nothing the retryer took for
// transient is a 500 here.
package awsfault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fleetops/fleet/shared/fault"
)

// The services' names, as the messages of Translate give them.
const (
	DynamoDB = "DynamoDB"
	S3       = "S3"
)

var (
	throttles  = retry.IsErrorThrottles(retry.DefaultThrottles)
	retryables = retry.IsErrorRetryables(retry.DefaultRetryables)
)

// Translate returns err, the failure of a call to service ("DynamoDB" or
// "S3") after the SDK's retries, as a fault kind a caller can act on, with
// what as context and err kept for the log line:
//
//   - the caller's deadline, or every attempt cut off by its timeout:
//     fault.Timeout "Timed out waiting for <service>" (504);
//   - a throttle (retry.DefaultThrottleErrorCodes: DynamoDB's
//     ProvisionedThroughputExceededException, ThrottlingException and
//     RequestLimitExceeded, S3's SlowDown...), another error the SDK
//     retries (RequestTimeout), or any 5xx answer: fault.Unavailable
//     "<service> is busy, try again" (503 with Retry-After);
//   - no answer at all (connection refused or reset, no such host):
//     fault.Unavailable "<service> could not be reached, try again".
//
// An error that already has a fault kind (an adapter's own translation,
// such as a conflict or a missing bucket) is returned as it is; a
// cancelled context, and any other error, is wrapped with what and stays
// internal (web.Error answers 499 or 500). err nil is nil.
func Translate(service, what string, err error) error {
	var sendErr *smithyhttp.RequestSendError
	switch {
	case err == nil:
		return nil
	case fault.KindOf(err) != fault.KindInternal:
		return err
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, err)
	case timedOut(err):
		return fmt.Errorf("%s: %w: %w", what, fault.Timeout("Timed out waiting for %s", service), err)
	case Throttled(err), answered(err) && retryables.IsErrorRetryable(err) == aws.TrueTernary, status(err) >= http.StatusInternalServerError:
		return fmt.Errorf("%s: %w: %w", what, fault.Unavailable("%s is busy, try again", service), err)
	case errors.As(err, &sendErr), retryables.IsErrorRetryable(err) == aws.TrueTernary:
		return fmt.Errorf("%s: %w: %w", what, fault.Unavailable("%s could not be reached, try again", service), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Throttled reports whether err is a throttle by the SDK's list
// (retry.DefaultThrottleErrorCodes), the list its retryer and the throttle
// count of sdkconfig.CountCalls use too.
func Throttled(err error) bool {
	return err != nil && throttles.IsErrorThrottle(err) == aws.TrueTernary
}

// timedOut reports whether err is a deadline: the caller's context, or an
// attempt cut off by the HTTP client's timeout (a net.Error that times out).
func timedOut(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
}

// answered reports whether err carries the service's own answer (an error
// code), as opposed to a failure to reach it.
func answered(err error) bool {
	var code interface{ ErrorCode() string }
	return errors.As(err, &code)
}

// status returns the HTTP status of the answer err came with, or 0.
func status(err error) int {
	var resp interface{ HTTPStatusCode() int }
	if errors.As(err, &resp) {
		return resp.HTTPStatusCode()
	}
	return 0
}

// Attempts bounds how often Drain sends a batch: the first send and the
// resends of what is left. With Pause between them a batch whose items keep
// coming back gives up after at most 1.6 s of pauses (0.8 s on average),
// well inside API Gateway's 29 s.
const Attempts = 8

// Pause is the wait before resend attempt (1, 2, ...): full jitter over
// 25 ms, 50 ms, ... capped at 400 ms, the shape of the SDK retryer's pauses
// in shared/sdkconfig.
func Pause(attempt int) time.Duration {
	ceiling := min(25*time.Millisecond<<min(attempt-1, 8), 400*time.Millisecond)
	return rand.N(ceiling) + time.Millisecond
}

// Drain sends pending, a batch call's items by table, with send, then
// what each send leaves unprocessed (BatchWriteItem's UnprocessedItems,
// BatchGetItem's UnprocessedKeys) after a Pause, until nothing is left.
// Items left unprocessed are DynamoDB's throttling in another form, so they
// answer as a throttle does: after Attempts sends, fault.Unavailable
// "<service> is busy, try again". A send's error goes through Translate;
// a context that ends during a pause is fault.Timeout past its deadline.
func Drain[V any](ctx context.Context, service, what string, pending map[string]V, send func(context.Context, map[string]V) (map[string]V, error)) error {
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == Attempts {
			return fmt.Errorf("%s: %w: unprocessed after %d attempts", what, fault.Unavailable("%s is busy, try again", service), Attempts)
		}
		if attempt > 0 {
			if err := wait(ctx, Pause(attempt)); err != nil {
				return Translate(service, what, err)
			}
		}
		left, err := send(ctx, pending)
		if err != nil {
			return Translate(service, what, err)
		}
		pending = left
	}
	return nil
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("wait to resend unprocessed items: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}
