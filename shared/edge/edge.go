// Package edge owns the boundary between API Gateway and net/http: it turns
// Lambda proxy events (REST API payload 1.0 and HTTP API payload 2.0) into
// *http.Request values carrying the caller's identity and request ids, and
// the answer into API Gateway's response streaming format (StreamHandler),
// in which every API function answers. It is the only
// package that imports the aws-lambda-go events types, so the same
// http.Handler serves Lambda, the local server and httptest.
package edge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/exactjson"
)

// ErrNotProxyEvent reports a Lambda payload that is not an API Gateway proxy
// event at all (not a JSON object, or without an HTTP method). StreamHandler
// returns it as a Lambda error, since there is no HTTP client to answer.
var ErrNotProxyEvent = errors.New("not an API Gateway proxy event")

// Format is the payload format version of a proxy event; the response must be
// written in the format of the request.
type Format int

const (
	// FormatV1 is the REST API payload (also HTTP API payload 1.0).
	FormatV1 Format = 1
	// FormatV2 is the HTTP API payload 2.0.
	FormatV2 Format = 2
)

// AnswerMargin is the time kept, before Lambda's deadline, to write the
// response of a request whose backend calls ran out of time.
const AnswerMargin = 500 * time.Millisecond

// Request converts a proxy event into a server-side *http.Request whose context
// carries the request ids (see RequestID) and, when the authorizer context
// names one, the caller's access.Identity. It also returns the event's format.
// The error wraps ErrNotProxyEvent when event is not a proxy event; any other
// error means a malformed event, to be answered with a 400.
func Request(ctx context.Context, event json.RawMessage) (*http.Request, Format, error) {
	var probe struct {
		Version        string `json:"version"`
		HTTPMethod     string `json:"httpMethod"`
		RequestContext struct {
			HTTP struct {
				Method string `json:"method"`
			} `json:"http"`
		} `json:"requestContext"`
	}
	if err := exactjson.Unmarshal(event, &probe); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrNotProxyEvent, err)
	}
	format, method := FormatV1, probe.HTTPMethod
	if probe.Version == "2.0" {
		format, method = FormatV2, probe.RequestContext.HTTP.Method
	}
	if method == "" {
		return nil, format, fmt.Errorf("%w: no HTTP method", ErrNotProxyEvent)
	}
	var p proxy
	var err error
	if format == FormatV2 {
		p, err = fromV2(event)
	} else {
		p, err = fromV1(event)
	}
	if err != nil {
		return nil, format, fmt.Errorf("malformed API Gateway event: %w", err)
	}
	r, err := p.request(ctx)
	return r, format, err
}

// proxy is what both payload formats carry, in the form a request needs.
type proxy struct {
	method, rawPath, rawQuery string
	header                    http.Header
	body                      string
	base64                    bool
	host, sourceIP, requestID string
	identity                  access.Identity
}

func fromV1(event json.RawMessage) (proxy, error) {
	var e events.APIGatewayProxyRequest
	if err := decode(event, &e); err != nil {
		return proxy{}, err
	}
	// path is the resource path without the stage prefix that
	// requestContext.path carries, which is what the routes are written for.
	p := proxy{method: e.HTTPMethod, rawPath: e.Path, header: http.Header{}, body: e.Body, base64: e.IsBase64Encoded,
		host: e.RequestContext.DomainName, sourceIP: e.RequestContext.Identity.SourceIP, requestID: e.RequestContext.RequestID}
	query := url.Values{}
	for k, vs := range e.MultiValueQueryStringParameters {
		query[k] = vs
	}
	if len(query) == 0 {
		for k, v := range e.QueryStringParameters {
			query.Set(k, v)
		}
	}
	p.rawQuery = query.Encode()
	for k, vs := range e.MultiValueHeaders {
		for _, v := range vs {
			p.header.Add(k, v)
		}
	}
	if len(p.header) == 0 {
		for k, v := range e.Headers {
			p.header.Set(k, v)
		}
	}
	p.identity = identityFrom(e.RequestContext.Authorizer)
	if p.identity.ID == "" {
		id := e.RequestContext.Identity
		p.identity = access.Identity{ID: id.UserArn, Name: first(id.Caller, id.User)}
	}
	return p, nil
}

// v2Event shadows the SDK's request context: the SDK types JWT claims as
// strings, and one numeric or array claim would otherwise fail every request.
type v2Event struct {
	events.APIGatewayV2HTTPRequest
	RequestContext struct {
		RequestID  string                                               `json:"requestId"`
		DomainName string                                               `json:"domainName"`
		HTTP       events.APIGatewayV2HTTPRequestContextHTTPDescription `json:"http"`
		Authorizer map[string]any                                       `json:"authorizer"`
	} `json:"requestContext"`
}

func fromV2(event json.RawMessage) (proxy, error) {
	var e v2Event
	if err := decode(event, &e); err != nil {
		return proxy{}, err
	}
	rc := e.RequestContext
	p := proxy{method: rc.HTTP.Method, rawPath: e.RawPath, rawQuery: e.RawQueryString, header: http.Header{},
		body: e.Body, base64: e.IsBase64Encoded, host: rc.DomainName, sourceIP: rc.HTTP.SourceIP, requestID: rc.RequestID}
	// The raw query keeps every repeated value, which the parameters join
	// with commas. A raw query Go cannot parse (a ";" inside a value) was
	// still accepted by the gateway: read it as the gateway did, rather
	// than have web.Wrap refuse it as malformed.
	if _, err := url.ParseQuery(p.rawQuery); err != nil {
		query := url.Values{}
		for k, v := range e.QueryStringParameters {
			query.Set(k, v)
		}
		p.rawQuery = query.Encode()
	}
	for k, v := range e.Headers {
		p.header.Set(k, v) // repeated headers arrive comma-joined, which HTTP allows
	}
	if len(e.Cookies) > 0 {
		p.header.Set("Cookie", strings.Join(e.Cookies, "; "))
	}
	p.identity = identityFrom(rc.Authorizer)
	if iam, ok := rc.Authorizer["iam"].(map[string]any); ok && p.identity.ID == "" {
		p.identity = access.Identity{ID: str(iam["userArn"]), Name: first(str(iam["callerId"]), str(iam["userId"]))}
	}
	return p, nil
}

// decode reads an event's fields by their exact names, as the gateway
// writes them, so a field in another case can never stand in for one
// (exactjson); authorizer numbers stay json.Number so that numeric ids
// keep every digit.
func decode(event json.RawMessage, v any) error {
	return exactjson.UnmarshalUseNumber(event, v)
}

func (p proxy) request(ctx context.Context) (*http.Request, error) {
	body := []byte(p.body)
	if p.base64 {
		var err error
		if body, err = base64.StdEncoding.DecodeString(p.body); err != nil {
			return nil, errors.New("request body is not valid base64")
		}
	}
	// The gateway hands over the path as received, still escaped; RawPath keeps
	// the escaping so ServeMux decodes path values like a%2Fb exactly once.
	path, err := url.PathUnescape(p.rawPath)
	// The escaped path must be absolute itself: "%2F" decodes to "/" but
	// names no route, and ServeMux would answer it with a redirect.
	if err != nil || !strings.HasPrefix(p.rawPath, "/") {
		return nil, fmt.Errorf("request path %q is not a valid escaped absolute path", p.rawPath)
	}
	u := &url.URL{Path: path, RawPath: p.rawPath, RawQuery: p.rawQuery}
	// Like net/http's server, promote Host out of the header map.
	if h := p.header.Get("Host"); h != "" {
		p.host = h
	}
	p.header.Del("Host")
	r := &http.Request{Method: p.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: p.header, Body: http.NoBody, ContentLength: int64(len(body)),
		Host: p.host, RemoteAddr: p.sourceIP, RequestURI: u.RequestURI()}
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	ids := requestIDs{gateway: p.requestID}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		ids.lambda = lc.AwsRequestID
	}
	ctx = context.WithValue(ctx, requestIDsKey{}, ids)
	if p.identity.ID != "" {
		ctx = access.WithIdentity(ctx, p.identity)
	}
	return r.WithContext(ctx), nil
}

type requestIDsKey struct{}

type requestIDs struct{ gateway, lambda string }

// RequestID returns the API Gateway request id of r when present, else the
// Lambda request id, else "" (as for requests that did not come through edge).
func RequestID(r *http.Request) string {
	ids, _ := r.Context().Value(requestIDsKey{}).(requestIDs)
	return first(ids.gateway, ids.lambda)
}

// errorAnswer answers an event the handler never saw as the API answers its
// own errors (shared/web): a JSON line, not to be sniffed or cached.
func errorAnswer(status int, message string) *events.LambdaFunctionURLStreamingResponse {
	b, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, message})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	return streamed(status, h, bytes.NewReader(append(b, '\n')))
}

// StreamHandler returns a Lambda handler function serving h in API
// Gateway's response streaming format, for an integration whose
// ResponseTransferMode is STREAM (template.yaml): Lambda is invoked with
// InvokeWithResponseStream, and the function answers a JSON prelude with
// the status and headers, eight NUL bytes, then the body as h writes it
// (events.LambdaFunctionURLStreamingResponse writes exactly that; REST
// APIs read the format of function URLs). The answer is then not bounded
// by Lambda's 6 MB buffered response (docs/behaviour.md "Answers of any
// size").
//
// The handler returns once h has written its status, and h goes on
// writing the body while Lambda reads it. An answer that h aborts
// (http.ErrAbortHandler, as web.Wrap does when an answer fails after its
// first byte) ends the body with an error, which Lambda reports as a
// failed stream: the client's body ends early. A malformed event is
// answered with a JSON 400 without calling h; a payload that is not a
// proxy event at all returns an error wrapping ErrNotProxyEvent.
func StreamHandler(h http.Handler) func(ctx context.Context, event json.RawMessage) (*events.LambdaFunctionURLStreamingResponse, error) {
	return func(ctx context.Context, event json.RawMessage) (*events.LambdaFunctionURLStreamingResponse, error) {
		r, _, err := Request(ctx, event)
		if errors.Is(err, ErrNotProxyEvent) {
			return nil, err
		}
		if err != nil {
			return errorAnswer(http.StatusBadRequest, err.Error()), nil
		}
		w := newStreamWriter()
		cancel := context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok {
			ctx, cancel = context.WithDeadline(r.Context(), deadline.Add(-AnswerMargin))
			r = r.WithContext(ctx)
		}
		go func() {
			defer cancel()
			defer func() {
				p := recover()
				w.WriteHeader(http.StatusOK) // for a handler that wrote nothing
				if p == nil {
					w.pipe.Close()
					return
				}
				w.pipe.CloseWithError(errStreamAborted)
				if p != http.ErrAbortHandler {
					panic(p)
				}
			}()
			h.ServeHTTP(w, r)
		}()
		<-w.started
		return w.response(), nil
	}
}

// errStreamAborted ends the body of an answer its handler aborted.
var errStreamAborted = errors.New("the answer was aborted after its first byte")

// streamWriter is the http.ResponseWriter of StreamHandler: the status and
// headers are taken when the handler writes its status, and the body goes
// through a pipe that Lambda's runtime reads, so that nothing is held.
type streamWriter struct {
	header  http.Header
	sent    http.Header // the headers when the status was written
	status  int
	once    sync.Once
	started chan struct{}
	body    *io.PipeReader
	pipe    *io.PipeWriter
}

func newStreamWriter() *streamWriter {
	pr, pw := io.Pipe()
	return &streamWriter{header: http.Header{}, started: make(chan struct{}), body: pr, pipe: pw}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pipe.Write(p)
}

// response is the prelude of the answer with its body to come.
func (w *streamWriter) response() *events.LambdaFunctionURLStreamingResponse {
	w.WriteHeader(http.StatusOK)
	return streamed(w.status, w.sent, w.body)
}

// streamed is an answer in the streaming format. Repeated headers are
// joined with commas, which HTTP allows, except Set-Cookie, which the
// prelude carries as cookies.
func streamed(status int, h http.Header, body io.Reader) *events.LambdaFunctionURLStreamingResponse {
	out := &events.LambdaFunctionURLStreamingResponse{StatusCode: status, Headers: map[string]string{},
		Cookies: h.Values("Set-Cookie"), Body: body}
	for k, vs := range h {
		if k != "Set-Cookie" {
			out.Headers[k] = strings.Join(vs, ", ")
		}
	}
	return out
}
