// Package sdkconfig loads the AWS SDK configuration every function shares:
// region, credentials and AWS_ENDPOINT_URL* the SDK's own way, plus the one
// retry policy of the service. A call is tried at most MaxAttempts times,
// each attempt cut off after its own timeout, with short jittered pauses, so
// that a call that keeps failing ends well inside the Lambda timeout and API
// Gateway's 29 s, and the handler can still answer a JSON 503 or 504. Every
// attempt is counted in the callcount.Counter of its context, for the log
// line and the metrics of the request or run that made it, and, in a traced
// build with tracing on, is one client span (see shared/tracing).
package sdkconfig

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/tracing"
)

const (
	// MaxAttempts bounds the tries of one SDK call (the SDK's default).
	MaxAttempts = 3
	// baseBackoff and maxBackoff shape the pause before a retry: full
	// jitter over 25 ms, 50 ms, ... capped at 400 ms. The SDK's default
	// (up to 20 s) suits batch jobs, not an API answering in seconds.
	baseBackoff = 25 * time.Millisecond
	maxBackoff  = 400 * time.Millisecond
)

// Attempt timeouts: a DynamoDB call answers in milliseconds and an S3 list
// of 1,000 keys in a few hundred; an attempt this late is stuck, and a new
// connection is the better bet. Worst case per call: 3 attempts plus pauses.
const (
	DynamoDBAttemptTimeout = time.Second
	S3AttemptTimeout       = 2 * time.Second
)

// maxConnsKept is how many idle connections to one host are kept.
const maxConnsKept = 64

// Retryer returns the service's retry policy. The SDK's retry quota stays:
// when most calls fail, retries stop and callers get a 503 at once instead
// of adding load to a struggling backend.
func Retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = MaxAttempts
		o.MaxBackoff = maxBackoff
		o.Backoff = retry.BackoffDelayerFunc(backoff)
	})
}

func backoff(attempt int, _ error) (time.Duration, error) {
	ceiling := min(baseBackoff<<min(attempt, 8), maxBackoff)
	return rand.N(ceiling) + time.Millisecond, nil
}

// Load returns the SDK configuration with the retry policy, HTTP requests
// (one per attempt) cut off after attemptTimeout, CountCalls, and a span per
// call when tracing is on (tracing.InstrumentSDK).
func Load(ctx context.Context, attemptTimeout time.Duration) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRetryer(Retryer),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(attemptTimeout).WithTransportOptions(func(t *http.Transport) {
			// A log lookup HEADs up to 64 objects at once; keep those
			// connections for the next lookup rather than the SDK's 10.
			t.MaxIdleConnsPerHost = maxConnsKept
		})),
	)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	cfg.APIOptions = append(cfg.APIOptions, CountCalls)
	tracing.InstrumentSDK(&cfg)
	return cfg, nil
}

// throttles tells throttling errors apart the way the retryer does.
var throttles = retry.IsErrorThrottles(retry.DefaultThrottles)

// CountCalls is an SDK API option that counts every attempt of a call, and
// whether it was throttled, in the callcount.Counter of the call's context
// (none: nothing is counted). It sits after the retry middleware, so a call
// retried twice counts three times: what the backend served, and what a
// throttled table saw.
func CountCalls(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("fleetCountCalls",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			callcount.From(ctx).Add(err != nil && throttles.IsErrorThrottle(err) == aws.TrueTernary)
			return out, md, err
		}), middleware.After)
}
