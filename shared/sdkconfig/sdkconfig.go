// Package sdkconfig builds the AWS SDK configuration every function shares:
// region, credentials and endpoints from the environment Lambda sets (and
// the SDK's AWS_ENDPOINT_URL* variables), plus the one retry policy of the
// service. A call is tried at most MaxAttempts times,
// each attempt cut off after its own timeout, with short jittered pauses, so
// that a call that keeps failing ends well inside the Lambda timeout and API
// Gateway's 29 s, and the handler can still answer a JSON 503 or 504. Every
// attempt is counted in the callcount.Counter of its context, for the log
// line and the metrics of the request or run that made it, and, in a traced
// build with tracing on, is one client span (see shared/tracing).
package sdkconfig

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"

	"github.com/fleetops/fleet/shared/awsfault"
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

// Load returns the SDK configuration of a function's clients of service,
// from its environment as
// Lambda sets it: AWS_REGION, and the role's credentials in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. With it
// come the retry policy, HTTP requests (one per attempt) cut off after
// attemptTimeout, CountCalls, and a span per call when tracing is on
// (tracing.InstrumentSDK).
//
// It reads the environment itself rather than through the SDK's config
// package, whose shared-file profiles and SSO credential chains a function
// never uses and whose clients add a millisecond to every cold start
// (BENCHMARKS.md). Endpoints come from the same variables the SDK reads:
// see Endpoint.
func Load(ctx context.Context, service string, attemptTimeout time.Duration) (aws.Config, error) {
	return load(os.Getenv, service, attemptTimeout)
}

// The services' SDK ids, for Load and Endpoint.
const (
	DynamoDB    = "DynamoDB"
	S3          = "S3"
	EventBridge = "EventBridge"
)

func load(getenv func(string) string, service string, attemptTimeout time.Duration) (aws.Config, error) {
	region := cmp.Or(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"))
	if region == "" {
		return aws.Config{}, errors.New("load AWS configuration: AWS_REGION is not set")
	}
	key, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	if key == "" || secret == "" {
		return aws.Config{}, errors.New("load AWS configuration: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set")
	}
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, getenv("AWS_SESSION_TOKEN")),
		Retryer:     Retryer,
		HTTPClient: awshttp.NewBuildableClient().WithTimeout(attemptTimeout).WithTransportOptions(func(t *http.Transport) {
			// A log lookup HEADs up to 64 objects at once; keep those
			// connections for the next lookup rather than the SDK's 10.
			t.MaxIdleConnsPerHost = maxConnsKept
		}),
		APIOptions:   []func(*middleware.Stack) error{CountCalls},
		BaseEndpoint: Endpoint(getenv, service),
	}
	tracing.InstrumentSDK(&cfg)
	return cfg, nil
}

// Endpoint returns the endpoint configured for service (its SDK id, as
// "DynamoDB" or "S3") the way the SDK's configured endpoints are:
// AWS_ENDPOINT_URL_<SERVICE> (upper case, spaces as underscores), else
// AWS_ENDPOINT_URL, unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true; nil
// means AWS's own endpoint. This is how the same binary talks to AWS, moto
// or MinIO.
func Endpoint(getenv func(string) string, service string) *string {
	if strings.EqualFold(getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		return nil
	}
	name := "AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(service, " ", "_"))
	if url := cmp.Or(getenv(name), getenv("AWS_ENDPOINT_URL")); url != "" {
		return &url
	}
	return nil
}

// CountCalls is an SDK API option that counts every attempt of a call, and
// whether it was throttled (awsfault.Throttled, the retryer's own list), in
// the callcount.Counter of the call's context (none: nothing is counted).
// It sits after the retry middleware, so a call retried twice counts three
// times: what the backend served, and what a throttled table saw.
func CountCalls(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("fleetCountCalls",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			callcount.From(ctx).Add(awsfault.Throttled(err))
			return out, md, err
		}), middleware.After)
}
