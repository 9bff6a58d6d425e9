// Package web holds what every endpoint group shares on the HTTP side: the
// wire conventions of SPEC §1 (JSON bodies, tolerant optional bodies, the
// error body), the one mapping from fault kinds to HTTP status, and the
// middleware that gives every request an id, a log line and panic safety.
package web

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

// MaxBody is the largest request body accepted (SPEC §1).
const MaxBody = 64 << 10

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
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
	}
	return http.StatusInternalServerError
}

// Error writes err as a JSON error body. A 500 says only which request
// failed; the full error is logged once, here, with that request id.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	status := Status(err)
	msg := fault.Message(err)
	if status == http.StatusInternalServerError {
		msg = fmt.Sprintf("internal error (request %s)", RequestID(r))
	}
	if status >= 500 {
		logger(r).Error("request failed", "request_id", RequestID(r), "status", status, "error", err.Error())
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	// An error describes one moment; no cache may answer with it later.
	w.Header().Set("Cache-Control", "no-store")
	JSON(w, status, ErrorBody{Code: status, Message: msg})
}

// JSON writes v as the JSON response body with status.
func JSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":500,"message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// OK writes the empty 200 response of a successful change.
func OK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
}

// DecodeBody reads the optional JSON body into v and reports whether there
// was one. An empty body, `{}` and `null` mean no body; a body that is not
// JSON is fault.Invalid; one over MaxBody is fault.TooLarge.
func DecodeBody(r *http.Request, v any) (bool, error) {
	if r.Body == nil {
		return false, nil
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return false, fault.Invalid("could not read the request body")
	}
	if len(raw) > MaxBody {
		return false, fault.TooLarge("request body is larger than %d bytes", MaxBody)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
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
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// RequestID returns the id Wrap gave the request.
func RequestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

func logger(r *http.Request) *slog.Logger {
	if l, ok := r.Context().Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// Wrap serves h with a request id, one log line per request, a JSON 500 for
// a panic, a JSON 404 for paths with empty, "." or ".." segments, which
// ServeMux would otherwise redirect to another route, and gzip for large
// bodies when the client accepts it.
func Wrap(h http.Handler, opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := ""
		if opts.RequestID != nil {
			id = opts.RequestID(r)
		}
		if id == "" {
			id = randomID()
		}
		ctx := context.WithValue(context.WithValue(r.Context(), requestIDKey, id), loggerKey, log)
		r = r.WithContext(ctx)
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		rec.Header().Add("Vary", "Accept-Encoding")
		var out http.ResponseWriter = rec
		var gz *gzipWriter
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			gz = &gzipWriter{ResponseWriter: rec}
			out = gz
		}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				Error(out, r, fmt.Errorf("panic: %v", p))
			}
			if gz != nil {
				gz.close()
			}
			log.Info("request", "request_id", id, "method", r.Method, "route", r.Pattern, "path", r.URL.Path,
				"status", rec.status, "latency_ms", float64(time.Since(start).Microseconds())/1000)
		}()
		if !cleanPath(r.URL.EscapedPath()) {
			NotFound(out, r)
			return
		}
		h.ServeHTTP(out, r)
	})
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

// minGzip is the smallest body worth compressing: below it, gzip's header
// and the base64 API Gateway needs for a compressed body outweigh the gain.
const minGzip = 4 << 10

// acceptsGzip reports whether an Accept-Encoding header accepts gzip.
func acceptsGzip(header string) bool {
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

// gzipWriter compresses a response for a client that accepts gzip, when
// its body is large enough. A fleet's slave list is tens of megabytes of
// JSON, over Lambda's 6 MB response limit, and a few megabytes compressed.
// web.JSON writes a body in one Write, so the choice is made on the first
// Write, and the status line waits for it.
type gzipWriter struct {
	http.ResponseWriter
	status  int
	decided bool
	gz      *gzip.Writer
}

func (g *gzipWriter) WriteHeader(status int) {
	if g.status == 0 {
		g.status = status
	}
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.decided {
		g.decided = true
		if h := g.Header(); len(p) >= minGzip && h.Get("Content-Encoding") == "" {
			h.Set("Content-Encoding", "gzip")
			h.Del("Content-Length")
			g.gz = gzips.Get().(*gzip.Writer)
			g.gz.Reset(g.ResponseWriter)
		}
		g.ResponseWriter.WriteHeader(cmp.Or(g.status, http.StatusOK))
	}
	if g.gz != nil {
		return g.gz.Write(p)
	}
	return g.ResponseWriter.Write(p)
}

// close sends the status of a response without a body, and ends the
// compressed stream.
func (g *gzipWriter) close() {
	if !g.decided {
		g.decided = true
		g.ResponseWriter.WriteHeader(cmp.Or(g.status, http.StatusOK))
	}
	if g.gz != nil {
		g.gz.Close()
		gzips.Put(g.gz)
		g.gz = nil
	}
}

// gzips keeps compressors for reuse: a new one costs more than compressing
// a typical response (about 1 MB of tables and half a millisecond).
var gzips = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
