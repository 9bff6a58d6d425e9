// Package web holds what every endpoint group shares on the HTTP side: the wire
// conventions of docs/behaviour.md "Wire conventions" (JSON bodies, tolerant
// optional bodies, the error body), the one mapping from fault kinds to HTTP
// status, and the middleware that gives every request an id, a log line and
// panic safety, and writes every answer as a stream, gzipped when the client
// accepts it and the answer is long enough to gain (answer).
//
// The log line of a request says what an operator asks first: which route,
// what answer, how long, for whom (the caller's identity id, never a token),
// about which slave, task or request (handlers add these with Note), and how
// many backend calls it took. It never holds bodies, query strings or
// presigned URLs.
package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/exactjson"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/metrics"
)

// MaxBody is the largest request body accepted (docs/behaviour.md "Wire conventions").
const MaxBody = 64 << 10

// ErrorBody is the JSON body of every error response. A 412 also says
// where the slave is now.
type ErrorBody struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	Sequence *int64 `json:"sequence,omitempty"`
	State    string `json:"state,omitempty"`
}

// Status is the one mapping from errors to HTTP status codes.
func Status(err error) int {
	switch fault.KindOf(err) {
	case fault.KindInvalid:
		return http.StatusBadRequest
	case fault.KindUnauthorized:
		return http.StatusUnauthorized
	case fault.KindForbidden:
		return http.StatusForbidden
	case fault.KindNotFound:
		return http.StatusNotFound
	case fault.KindConflict:
		return http.StatusConflict
	case fault.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case fault.KindUnavailable:
		return http.StatusServiceUnavailable
	case fault.KindTimeout:
		return http.StatusGatewayTimeout
	case fault.KindGone:
		return http.StatusGone
	case fault.KindPreconditionFailed:
		return http.StatusPreconditionFailed
	}
	return http.StatusInternalServerError
}

// StatusClientClosedRequest is nginx's 499: the client closed its
// connection before the answer was ready.
const StatusClientClosedRequest = 499

// Error writes err as a JSON error body. A 500 says only which request
// failed; the full error is logged once, here, with that request id.
//
// A request whose client went away (it closed its connection, so the
// request's context is cancelled, and the handler failed for that) is no
// failure of the service: it is answered 499, as nginx logs it, logged at
// INFO and counted as no server error. Its answer reaches no one.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	if clientGone(r, err) {
		logger(r).InfoContext(r.Context(), "client went away", "request_id", RequestID(r), "status", StatusClientClosedRequest, "error", err.Error())
		writeError(w, ErrorBody{Code: StatusClientClosedRequest, Message: "client closed the request"})
		return
	}
	body := Failure(r, err)
	if body.Code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, body)
}

// Failure is the body Error answers err with, logged as Error logs it: for
// a failure that can no longer change the answer's status (a stream's
// line).
func Failure(r *http.Request, err error) ErrorBody {
	status := Status(err)
	msg := fault.Message(err)
	if status == http.StatusInternalServerError {
		msg = fmt.Sprintf("internal error (request %s)", RequestID(r))
	}
	if status >= 500 {
		logger(r).ErrorContext(r.Context(), "request failed", "request_id", RequestID(r), "status", status, "error", err.Error())
	}
	body := ErrorBody{Code: status, Message: msg}
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Now != nil {
		body.Sequence, body.State = &fe.Now.Sequence, fe.Now.State
	}
	return body
}

// clientGone reports whether err is the cancellation of r by its client:
// the handler stopped because the request's own context was cancelled. A
// context.Canceled while the request's context is still live is a fault of
// the handler's (a context it cancelled itself) and stays a 500.
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// internalError is the body of a 500 answered when an answer could not be
// encoded.
const internalError = "{\"code\":500,\"message\":\"internal error\"}\n"

// writeError writes the JSON error body. It ends with a
// newline, as a terminal expects of the last line it prints (curl -si), and,
// since an error describes one moment, forbids any cache to answer with it
// later.
func writeError(w http.ResponseWriter, e ErrorBody) {
	body, _ := json.Marshal(e) // numbers and strings always encode
	body = append(body, '\n')
	w.Header().Set("Cache-Control", "no-store")
	jsonHeaders(w.Header())
	w.WriteHeader(e.Code)
	w.Write(body)
}

// jsonHeaders marks an answer as JSON, and as nothing else: nosniff keeps a
// browser from taking a body that holds caller-supplied text (a machine's
// message, a log key) for HTML or script.
func jsonHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
}

// JSON writes v as the JSON response body with status. A slice is written
// element by element (writeArray), so that a long list is never held as one
// body; elements that are json.RawMessage are taken as the encoding they
// are.
func JSON(w http.ResponseWriter, status int, v any) {
	if elems, ok := arrayOf(v); ok {
		jsonHeaders(w.Header())
		w.WriteHeader(status)
		writeArray(w, elems)
		return
	}
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(internalError)
	}
	jsonHeaders(w.Header())
	w.WriteHeader(status)
	w.Write(body)
}

// OK writes the empty 200 response of a successful change: no body, and so
// no Content-Type (a validating proxy refuses a JSON type on an empty body).
func OK(w http.ResponseWriter) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
}

// DecodeBody reads the optional JSON body into v and reports whether there
// was one. An empty body, `{}` and `null` mean no body; a body that is not
// JSON, or not valid UTF-8, is fault.Invalid; one over MaxBody is
// fault.TooLarge. The JSON decoder would replace each invalid byte with
// U+FFFD, and a message stored so would not be the one sent. Field names
// match exactly: a key in another case is an unknown field, ignored like
// any other (see exactjson).
func DecodeBody(r *http.Request, v any) (bool, error) { return DecodeBodyUpTo(r, v, MaxBody) }

// DecodeBodyUpTo is DecodeBody for a route that accepts bodies of up to max
// bytes instead of MaxBody (the import's, docs/decisions.md "Import").
func DecodeBodyUpTo(r *http.Request, v any, max int64) (bool, error) {
	if r.Body == nil {
		return false, nil
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return false, fault.Invalid("could not read the request body")
	}
	if int64(len(raw)) > max {
		return false, fault.TooLarge("request body is larger than %d bytes", max)
	}
	if !utf8.Valid(raw) {
		return false, fault.Invalid("request body is not valid UTF-8")
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	if err := exactjson.Unmarshal(raw, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return false, fault.Invalid("request body must be a JSON object")
			}
			return false, fault.Invalid("request body field %s must be %s", typeErr.Field, jsonKind(typeErr.Type))
		}
		return false, fault.Invalid("request body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	var fields map[string]json.RawMessage
	return json.Unmarshal(raw, &fields) != nil || len(fields) > 0, nil
}

// jsonKind names a Go type the way a JSON client knows it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// NotFound answers an unknown route.
func NotFound(w http.ResponseWriter, r *http.Request) {
	Error(w, r, fault.NotFound("no route for %s %s", r.Method, r.URL.Path))
}

// Options configures Wrap.
type Options struct {
	Logger *slog.Logger
	// RequestID returns the platform's id of the request ("" when none);
	// a random one is made otherwise.
	RequestID func(*http.Request) string
	// Metrics receives the function's cold start, a ServerErrors count for
	// every 5xx answer and a BackendThrottles count for every request whose
	// backend calls were throttled; handlers reach it with Metrics. Nil
	// means no metrics.
	Metrics *metrics.Emitter
}

// request is what Wrap keeps of one request, in its context: one value
// rather than one per field, since the SDK looks values up in the context
// many times per call and each layer lengthens the walk.
type request struct {
	id      string
	log     *slog.Logger
	metrics *metrics.Emitter

	mu    sync.Mutex
	notes []slog.Attr // what handlers add to the log line
}

type requestKey struct{}

// state returns what Wrap keeps of r, or nil outside Wrap.
func state(r *http.Request) *request {
	s, _ := r.Context().Value(requestKey{}).(*request)
	return s
}

// Note adds key=value to the log line of r (see Wrap): the slave, task or
// request the route names, the acting user. An empty string is left out.
// Never note a body, a token or a presigned URL. Outside Wrap it does
// nothing.
func Note(r *http.Request, key string, value any) {
	s := state(r)
	if s == nil || value == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, slog.Any(key, value))
}

// Metrics returns the emitter of Options.Metrics, or nil (which emits
// nothing) outside Wrap or without one.
func Metrics(r *http.Request) *metrics.Emitter {
	if s := state(r); s != nil {
		return s.metrics
	}
	return nil
}

// LogError logs msg at error level with the request's id and args, for a
// fault that the answer does not show: a misconfiguration that the caller
// can neither see nor fix, say. Outside Wrap it logs to slog.Default.
func LogError(r *http.Request, msg string, args ...any) {
	logger(r).ErrorContext(r.Context(), msg, append([]any{"request_id", RequestID(r)}, args...)...)
}

// Outcome names the class of an answer's status for metrics: "ok" (1xx to
// 3xx), "refused" (4xx: the request was wrong, not the service) or
// "failed" (5xx).
func Outcome(status int) string {
	switch {
	case status >= 500:
		return "failed"
	case status >= 400:
		return "refused"
	}
	return "ok"
}

// RequestID returns the id Wrap gave the request.
func RequestID(r *http.Request) string {
	if s := state(r); s != nil {
		return s.id
	}
	return ""
}

func logger(r *http.Request) *slog.Logger {
	if s := state(r); s != nil {
		return s.log
	}
	return slog.Default()
}

// Wrap serves h with a request id, one log line per request, a JSON 500 for
// a panic, a JSON 404 for paths with empty, "." or ".." segments, which
// ServeMux would otherwise redirect to another route, a JSON 400 for a
// query string that does not parse, and gzip for large bodies when the
// client accepts it. Every answer is sent whole, written as it is encoded
// (answer), whatever its size: the local server's and API Gateway's response
// streaming (edge.StreamHandler) carry it (docs/behaviour.md "Answers of any
// size").
//
// The log line ("request") holds request_id, method, route, path, status,
// latency_ms, what handlers added with Note, and backend_calls: the AWS SDK
// attempts the request made (throttled_calls too, when any was throttled),
// counted in the callcount.Counter Wrap puts in the request's context.
func Wrap(h http.Handler, opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		opts.Metrics.Invocation()
		id := ""
		if opts.RequestID != nil {
			id = opts.RequestID(r)
		}
		if id == "" {
			id = randomID()
		}
		ctx, calls := callcount.With(r.Context())
		s := &request{id: id, log: log, metrics: opts.Metrics}
		r = r.WithContext(context.WithValue(ctx, requestKey{}, s))
		w.Header().Add("Vary", "Accept-Encoding")
		a := &answer{w: w, gzipOK: AcceptsGzip(r.Header.Get("Accept-Encoding"))}
		defer func() {
			var err error
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				err = fmt.Errorf("panic: %v", p)
				if a.reset() {
					Error(a, r, err)
					err = nil
				} else {
					err = fmt.Errorf("%w: %w", errAborted, err)
					a.abandon()
				}
			}
			if err == nil {
				err = a.finish()
			}
			status := a.status
			if err != nil {
				Note(r, "aborted", err.Error())
			}
			s.finish(r, status, time.Since(start), calls)
			if err != nil {
				// The status is sent: only ending the response early
				// tells the client that the body is not whole.
				if r.Context().Err() == nil {
					logger(r).ErrorContext(r.Context(), "answer aborted", "request_id", id, "status", status, "error", err.Error())
					opts.Metrics.Emit(nil, metrics.Metric{Name: metrics.ServerErrors, Value: 1, Unit: metrics.Count})
				}
				panic(http.ErrAbortHandler)
			}
		}()
		// A route reads its parameters with URL.Query, which drops a pair
		// it cannot decode: GET /api/slaves?state=FROZEN% would list every
		// slave. API Gateway refuses such a request before it looks for a
		// route, and so does this.
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			Error(a, r, fault.Invalid("malformed query string"))
			return
		}
		if !cleanPath(r.URL.EscapedPath()) {
			NotFound(a, r)
			return
		}
		h.ServeHTTP(a, r)
	})
}

// finish writes the request's log line and its metrics.
func (s *request) finish(r *http.Request, status int, took time.Duration, calls *callcount.Counter) {
	s.mu.Lock()
	attrs := make([]slog.Attr, 0, 9+len(s.notes))
	attrs = append(attrs, slog.String("request_id", s.id), slog.String("method", r.Method), slog.String("route", r.Pattern),
		slog.String("path", r.URL.Path), slog.Int("status", status), slog.Float64("latency_ms", float64(took.Microseconds())/1000))
	attrs = append(attrs, s.notes...)
	s.mu.Unlock()
	attrs = append(attrs, slog.Int64("backend_calls", calls.Calls()))
	throttled := calls.Throttled()
	if throttled > 0 {
		attrs = append(attrs, slog.Int64("throttled_calls", throttled))
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)

	var counts []metrics.Metric
	if status >= 500 {
		counts = append(counts, metrics.Metric{Name: metrics.ServerErrors, Value: 1, Unit: metrics.Count})
	}
	if throttled > 0 {
		counts = append(counts, metrics.Metric{Name: metrics.BackendThrottles, Value: float64(throttled), Unit: metrics.Count})
	}
	s.metrics.Emit(nil, counts...)
}

// cleanPath reports whether every segment of an escaped path is a real
// name. A trailing slash is allowed (`/api/slaves/`).
func cleanPath(p string) bool {
	segs := strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/"), "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return p == "/"
		}
	}
	return true
}

// AcceptsGzip reports whether an Accept-Encoding header accepts gzip (q=0
// refuses it).
func AcceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "gzip" && name != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.ToLower(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
