// Package client is the Go client of the fleet API described by
// openapi.yaml: one method per operation, typed answers and typed errors
// (*Error carries the status and the body's code and message), a context
// on every call, and retries that are safe: a 503 (which the service
// answers only when nothing was applied) after its Retry-After, a 429, and
// for reads a timeout or a broken connection. A change is sent again after
// a timeout only because it carries an Idempotency-Key, the same on every
// attempt, so the service answers a retry of an applied change with the
// first answer instead of applying it twice. Options.CallTimeout bounds a
// call with its retries, and Options.OnRetry hears of each retry.
//
// An answer that is not the API's JSON (an HTML page, an S3 XML error) is
// a *NotAPIError. Errors never carry a URL's query string (Redact).
//
// Authentication is an Auth: none (make run), a bearer token (Cognito or
// a Lambda authorizer) or SigV4 signing for execute-api (AWS_IAM).
package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options configure a Client. The zero value of every field but Endpoint
// is usable.
type Options struct {
	// Endpoint is the API's base URL, such as http://127.0.0.1:3000 or
	// https://abcdef1234.execute-api.us-east-1.amazonaws.com/prod.
	Endpoint string
	// Auth signs every attempt; nil sends no credentials.
	Auth Auth
	// Header is added to every request, before Auth signs it.
	Header http.Header
	// HTTPClient sends the requests; nil means a client with
	// http.DefaultTransport's settings.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call, retries included;
	// 0 means 4, 1 turns retries off.
	MaxAttempts int
	// AttemptTimeout bounds one attempt; 0 means 30 seconds. A read whose
	// attempt times out is tried again.
	AttemptTimeout time.Duration
	// MaxRetryWait caps the wait before a retry, Retry-After included; 0
	// means 20 seconds.
	MaxRetryWait time.Duration
	// CallTimeout bounds one call, its attempts and the waits between
	// them included; 0 bounds only each attempt. A call cut by it returns
	// a *TransportError wrapping context.DeadlineExceeded.
	CallTimeout time.Duration
	// OnRetry, when set, is told before each retry what failed, which
	// attempt comes next and how long the client waits for it, so that a
	// user is not left waiting in silence.
	OnRetry func(op string, next int, wait time.Duration, err error)
	// UserAgent is sent as User-Agent; empty means "fleet-go-client".
	UserAgent string
	// Strict makes answers with fields this package does not know an
	// error, so that tests notice when the service and the client drift.
	Strict bool
}

// Client calls the fleet API. It is safe for concurrent use.
type Client struct {
	base *url.URL
	opts Options
	http *http.Client
	// sleep waits between attempts; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a client of the API at opts.Endpoint.
func New(opts Options) (*Client, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("client: no endpoint")
	}
	base, err := url.Parse(strings.TrimSuffix(opts.Endpoint, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("client: endpoint %q is not an http(s) URL", opts.Endpoint)
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 4
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = 30 * time.Second
	}
	if opts.MaxRetryWait <= 0 {
		opts.MaxRetryWait = 20 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "fleet-go-client"
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Client{base: base, opts: opts, http: hc, sleep: sleepCtx}, nil
}

// Endpoint returns the API's base URL.
func (c *Client) Endpoint() string { return c.base.String() }

// call is one operation: how to send it and whether a timeout may be
// retried.
type call struct {
	op     string // operationId
	method string
	path   string // escaped
	query  url.Values
	body   any // marshalled to JSON when not nil
	// idempotent operations are retried after a timeout or a broken
	// connection: reads, and changes that the service recognises when
	// sent again (an Idempotency-Key, or a delete that ends in the same
	// state however often it is applied).
	idempotent bool
	// key is the Idempotency-Key sent on every attempt ("" for none).
	key string
	// ifMatch is the If-Match header ("" for none).
	ifMatch string
}

// answer is a successful response.
type answer struct {
	header http.Header
	body   []byte
}

// do sends c, retrying as the package comment says, and returns the 2xx
// answer or an error: *Error for an error answer, *TransportError for none.
func (c *Client) do(ctx context.Context, cl call) (*answer, error) {
	var payload []byte
	if cl.body != nil {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return nil, fmt.Errorf("%s: %w", cl.op, err)
		}
	}
	u := *c.base
	u.Path = c.base.Path + pathUnescaped(cl.path)
	u.RawPath = c.base.EscapedPath() + cl.path
	u.RawQuery = cl.query.Encode()

	if c.opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
	}
	var last error
	for attempt := 1; ; attempt++ {
		a, wait, err := c.attempt(ctx, cl, u.String(), payload)
		if err == nil {
			return a, nil
		}
		last = err
		if wait < 0 || attempt >= c.opts.MaxAttempts || ctx.Err() != nil {
			return nil, last
		}
		if wait == 0 {
			wait = backoff(attempt)
		}
		wait = min(wait, c.opts.MaxRetryWait)
		if c.opts.OnRetry != nil {
			c.opts.OnRetry(cl.op, attempt+1, wait, err)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, last
		}
	}
}

// attempt sends one attempt. On failure it returns how long to wait before
// the next one: -1 for never, 0 for the default backoff.
func (c *Client) attempt(ctx context.Context, cl call, target string, payload []byte) (*answer, time.Duration, error) {
	actx, cancel := context.WithTimeout(ctx, c.opts.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, cl.method, target, bytes.NewReader(payload))
	if err != nil {
		return nil, -1, fmt.Errorf("%s: %w", cl.op, err)
	}
	for k, v := range c.opts.Header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.ifMatch != "" {
		req.Header.Set("If-Match", cl.ifMatch)
	}
	if cl.key != "" {
		req.Header.Set("Idempotency-Key", cl.key)
	}
	if c.opts.Auth != nil {
		if err := c.opts.Auth.Authorize(ctx, req, payload); err != nil {
			return nil, -1, fmt.Errorf("%s: authorize: %w", cl.op, err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		terr := &TransportError{Operation: cl.op, Err: Redact(err)}
		if ctx.Err() != nil || !cl.idempotent {
			return nil, -1, terr
		}
		return nil, 0, terr
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		terr := &TransportError{Operation: cl.op, Err: Redact(err)}
		if ctx.Err() != nil || !cl.idempotent {
			return nil, -1, terr
		}
		return nil, 0, terr
	}
	if resp.StatusCode/100 == 2 {
		if len(body) > 0 && !json.Valid(body) {
			return nil, -1, &NotAPIError{Operation: cl.op, Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
		}
		return &answer{header: resp.Header, body: body}, 0, nil
	}
	if resp.StatusCode < 500 && !json.Valid(body) {
		// Every error of the API and of API Gateway in front of it is
		// JSON; an HTML page or an S3 XML error means another server.
		return nil, -1, &NotAPIError{Operation: cl.op, Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	}
	apiErr := &Error{Status: resp.StatusCode, Code: resp.StatusCode, Operation: cl.op}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Message != "" {
		apiErr.Message = eb.Message
		if eb.Code != 0 {
			apiErr.Code = eb.Code
		}
		if eb.Sequence != nil {
			apiErr.Sequence, apiErr.State = *eb.Sequence, eb.State
		}
	} else {
		apiErr.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
		if apiErr.Message == "" {
			apiErr.Message = http.StatusText(resp.StatusCode)
		}
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		// Nothing was applied: any operation may be sent again.
		return nil, retryAfter(resp.Header.Get("Retry-After")), apiErr
	case http.StatusGatewayTimeout:
		if cl.idempotent {
			return nil, 0, apiErr
		}
	}
	return nil, -1, apiErr
}

// retryAfter reads a Retry-After of seconds or an HTTP date; 0 when absent
// or unreadable, for the default backoff.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		// Retry-After: 0 still gets a moment, so that a busy service is
		// not hammered.
		return max(time.Duration(s)*time.Second, 50*time.Millisecond)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 50*time.Millisecond)
	}
	return 0
}

// backoff is the wait before attempt+1 without a Retry-After: exponential
// from 200 ms, with full jitter so that many clients spread out.
func backoff(attempt int) time.Duration {
	ceiling := 200 * time.Millisecond << min(attempt-1, 6)
	return ceiling/2 + rand.N(ceiling/2)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewIdempotencyKey returns a random key for the Idempotency-Key header.
func NewIdempotencyKey() string {
	return crand.Text()
}

// decode reads a JSON answer into v, strictly when the client is.
func (c *Client) decode(op string, a *answer, v any) error {
	dec := json.NewDecoder(bytes.NewReader(a.body))
	if c.opts.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return nil
}

// seg escapes one path parameter as a single segment (the service decodes
// it once, so "a/b" travels as a%2Fb).
func seg(s string) string { return url.PathEscape(s) }

func pathUnescaped(p string) string {
	u, err := url.PathUnescape(p)
	if err != nil {
		return p
	}
	return u
}
