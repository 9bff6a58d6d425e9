// Package lambdarun runs a Lambda bootstrap binary on this machine the way the
// provided.al2023 runtime does: it serves the Lambda Runtime API on loopback,
// starts the binary with the environment Lambda gives a function, hands it one
// event and returns its answer. No container is involved, so the binary must
// be built for this machine (make invoke does that).
//
// Only what a Go function built with aws-lambda-go uses is served: the
// invocation's next, response and error calls and the init error call.
package lambdarun

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/payload"
)

// Limits Lambda applies, applied here too so that a local run fails where a
// deployed one would.
const (
	// MaxResponseSize is the largest synchronous response Lambda returns:
	// the whole payload the function posts (for API Gateway, the proxy
	// envelope with its headers and body), 6 MiB. Lambda's own error
	// message quotes 100 bytes more; a local run holds to the documented
	// figure, so what passes here passes there.
	MaxResponseSize = 6 << 20
	// MaxStreamedResponseSize is the most a function answering in the
	// response streaming format (StreamedContentType) may stream: 200 MiB.
	MaxStreamedResponseSize = 200 << 20
	// InitTimeout bounds the time from start to the first request for an event.
	InitTimeout = 10 * time.Second
)

// Function is a bootstrap binary and how to run it.
type Function struct {
	Binary string            // path of the bootstrap executable
	Name   string            // AWS_LAMBDA_FUNCTION_NAME; default "function"
	Env    map[string]string // the function's environment; wins over Lambda's own variables
	// MemorySize (MB) informs the function (AWS_LAMBDA_FUNCTION_MEMORY_SIZE)
	// and bounds it: a process whose peak resident memory went over it fails
	// with Runtime.OutOfMemory, as Lambda would have stopped it (checked once
	// the invocation is over, not while it runs). Default 128.
	MemorySize int
	// Timeout of the invocation, from the moment the event is handed over;
	// default 3 s as in Lambda.
	Timeout time.Duration
	// Logs receives the function's stdout and stderr (what Lambda sends to
	// CloudWatch); nil discards them.
	Logs io.Writer
	// BeforeEvent, when set, is called with the request id just before the
	// event is handed over: where Lambda logs its START line, after whatever
	// the function printed while it initialized.
	BeforeEvent func(requestID string)
}

// Result is the outcome of one invocation with its timings, measured from the
// moment the process was started.
type Result struct {
	RequestID string
	// Response is the payload the function returned (nil on a function error).
	// A response the function streamed (StreamedContentType) is given as
	// the proxy response API Gateway makes of it, and Streamed is true.
	Response []byte
	Streamed bool
	// Init is the time to the function's first request for an event: the cold start.
	Init time.Duration
	// Total is the time until the function posted its response or error.
	Total time.Duration
	// MaxMemory is the process's peak resident memory, in bytes (0 when the
	// system does not tell).
	MaxMemory int64
	// CPU is the processor time the process used, user and system, from
	// its start to its end.
	CPU time.Duration
}

// Handler is the time the function spent on the event itself.
func (r Result) Handler() time.Duration { return r.Total - r.Init }

// Report is the REPORT line Lambda logs after an invocation, for a function
// of memoryMB: the handler's duration, the billed duration (a provided.*
// runtime is billed for its initialization too, rounded up to the
// millisecond), the memory size, the peak memory used, and the init
// duration of the cold start.
func (r Result) Report(memoryMB int) string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	billed := (r.Total + time.Millisecond - 1) / time.Millisecond
	line := fmt.Sprintf("REPORT RequestId: %s\tDuration: %.2f ms\tBilled Duration: %d ms\tMemory Size: %d MB\tMax Memory Used: %d MB",
		r.RequestID, ms(r.Handler()), billed, memoryMB, (r.MaxMemory+(1<<20)-1)>>20)
	if r.Init > 0 {
		line += fmt.Sprintf("\tInit Duration: %.2f ms", ms(r.Init))
	}
	return line
}

// FunctionError is an error the function reported: a returned error or a
// panic (POST .../invocation/{id}/error), or a failed initialization (POST
// .../init/error).
//
// Failures Lambda itself reports are FunctionErrors too, with Lambda's types:
// Sandbox.Timedout for a timeout, Runtime.ExitError for a process that exited
// before answering, Function.ResponseSizeTooLarge.
type FunctionError struct {
	Type       string `json:"errorType"`
	Message    string `json:"errorMessage"`
	StackTrace []any  `json:"stackTrace,omitempty"`
	Init       bool   `json:"-"` // failed before asking for the event
	Raw        []byte `json:"-"` // the body as posted, if any
}

// ErrorType is the errorType Step Functions matches a Retry against.
func (e *FunctionError) ErrorType() string { return e.Type }

func (e *FunctionError) Error() string {
	what := "function error"
	if e.Init {
		what = "function init error"
	}
	if e.Type == "" {
		return what + ": " + e.Message
	}
	return fmt.Sprintf("%s: %s: %s", what, e.Type, e.Message)
}

// Invoke runs binary once with env and event, with the function's output going
// to stderr, and returns the function's response. A function error is returned
// as a *FunctionError.
func Invoke(ctx context.Context, binary string, env map[string]string, event []byte) ([]byte, error) {
	res, err := Function{Binary: binary, Env: env, Logs: os.Stderr}.Invoke(ctx, event)
	return res.Response, err
}

// Invoke starts the function, serves it event, waits for its answer and kills
// the process. A function error is a *FunctionError; the Result holds the
// timings in every case where the function got that far.
func (f Function) Invoke(ctx context.Context, event []byte) (Result, error) {
	if f.Name == "" {
		f.Name = "function"
	}
	if f.MemorySize == 0 {
		f.MemorySize = 128
	}
	if f.Timeout == 0 {
		f.Timeout = 3 * time.Second
	}
	binary, err := filepath.Abs(f.Binary)
	if err != nil {
		return Result{}, err
	}
	if info, err := os.Stat(binary); err != nil {
		return Result{}, fmt.Errorf("invoke %s: %w", f.Name, err)
	} else if info.IsDir() {
		return Result{}, fmt.Errorf("invoke %s: %s is a directory", f.Name, binary)
	}

	api := newRuntimeAPI(event, f.Name, f.region(), f.Timeout)
	api.beforeEvent = f.BeforeEvent
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("invoke %s: runtime API: %w", f.Name, err)
	}
	srv := &http.Server{Handler: api.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	output := &tail{max: 4 << 10}
	logs := io.Writer(output)
	if f.Logs != nil {
		logs = io.MultiWriter(f.Logs, output)
	}
	cmd := exec.Command(binary)
	cmd.Dir = filepath.Dir(binary)
	cmd.Env = f.environ(ln.Addr().String(), binary)
	cmd.Stdout, cmd.Stderr = logs, logs

	api.started = time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("invoke %s: %w", f.Name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	res, err := f.await(ctx, api, exited, output)
	// Lambda freezes the sandbox; a local run reads its peak memory and
	// ends it.
	res.MaxMemory = peakMemory(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	<-exited
	if cmd.ProcessState != nil {
		res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if res.MaxMemory == 0 {
			res.MaxMemory = maxRSS(cmd.ProcessState)
		}
	}
	if limit := int64(f.MemorySize) << 20; err == nil && res.MaxMemory > limit {
		res.Response = nil
		err = &FunctionError{
			Type: "Runtime.OutOfMemory",
			Message: fmt.Sprintf("Runtime exited with error: the function used %d MB, over its memory size of %d MB (Lambda would have stopped it)",
				res.MaxMemory>>20, f.MemorySize),
		}
	}
	return res, err
}

// await serves the invocation until the function answers, fails, runs out
// of time or exits; exited receives the process's end (and gets it back).
func (f Function) await(ctx context.Context, api *runtimeAPI, exited chan error, output *tail) (Result, error) {
	initTimer := time.NewTimer(InitTimeout)
	defer initTimer.Stop()
	delivered := api.delivered
	var timeout <-chan time.Time
	for {
		select {
		case o := <-api.outcome:
			res := Result{RequestID: api.requestID, Init: api.initTime(), Total: o.at.Sub(api.started)}
			if o.err != nil {
				return res, o.err
			}
			res.Response, res.Streamed = o.response, o.streamed
			return res, nil
		case <-delivered:
			delivered = nil // closed: receive from it once
			initTimer.Stop()
			timeout = time.After(f.Timeout)
		case <-initTimer.C:
			return Result{RequestID: api.requestID}, &FunctionError{
				Init: true, Type: "Sandbox.Timedout",
				Message: fmt.Sprintf("no request for an event within %v of start (Lambda's init limit)%s", InitTimeout, f.output(output)),
			}
		case <-timeout:
			return Result{RequestID: api.requestID, Init: api.initTime(), Total: time.Since(api.started)}, &FunctionError{
				Type:    "Sandbox.Timedout",
				Message: fmt.Sprintf("Task timed out after %.2f seconds", f.Timeout.Seconds()),
			}
		case err := <-exited:
			exited <- err // for the caller, who waits for it too
			return Result{RequestID: api.requestID, Init: api.initTime(), Total: time.Since(api.started)}, &FunctionError{
				Init: api.initTime() == 0, Type: "Runtime.ExitError",
				Message: fmt.Sprintf("Runtime exited before answering: %v%s", err, f.output(output)),
			}
		case <-ctx.Done():
			return Result{RequestID: api.requestID}, ctx.Err()
		}
	}
}

// output quotes the function's last output for an error message, unless it
// went to f.Logs already.
func (f Function) output(t *tail) string {
	if f.Logs != nil {
		return ""
	}
	return "; output: " + t.String()
}

func (f Function) region() string {
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if v := f.Env[k]; v != "" {
			return v
		}
	}
	return "us-east-1"
}

// environ is the process environment: what Lambda sets for a provided.al2023
// function, then f.Env. Nothing else of this process's environment leaks in
// (a developer's AWS_PROFILE, say), PATH and HOME aside.
func (f Function) environ(runtimeAPI, binary string) []string {
	region := f.region()
	env := map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          runtimeAPI,
		"AWS_LAMBDA_FUNCTION_NAME":        f.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(f.MemorySize),
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + f.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + randomHex(16),
		"AWS_LAMBDA_LOG_FORMAT":           "Text",
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"AWS_REGION":                      region,
		"AWS_DEFAULT_REGION":              region,
		"LAMBDA_TASK_ROOT":                filepath.Dir(binary),
		"LAMBDA_RUNTIME_DIR":              filepath.Dir(binary),
		"_HANDLER":                        "bootstrap",
		"LANG":                            "en_US.UTF-8",
		"TZ":                              ":UTC",
		"PATH":                            os.Getenv("PATH"),
		"HOME":                            os.Getenv("HOME"),
	}
	for k, v := range f.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runtimeAPI serves one event to one process.
type runtimeAPI struct {
	event     []byte
	requestID string
	arn       string
	timeout   time.Duration

	started     time.Time
	beforeEvent func(requestID string)
	delivered   chan struct{} // closed when the event has been handed over
	outcome     chan outcome  // the first answer
	answered    sync.Once

	mu       sync.Mutex
	nextAt   time.Time
	consumed bool
}

type outcome struct {
	response []byte
	streamed bool
	err      error
	at       time.Time
}

func newRuntimeAPI(event []byte, name, region string, timeout time.Duration) *runtimeAPI {
	return &runtimeAPI{
		event:     event,
		requestID: newRequestID(),
		arn:       fmt.Sprintf("arn:aws:lambda:%s:123456789012:function:%s", region, name),
		timeout:   timeout,
		delivered: make(chan struct{}),
		outcome:   make(chan outcome, 1),
	}
}

const apiPrefix = "/2018-06-01/runtime"

func (a *runtimeAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apiPrefix+"/invocation/next", a.next)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/response", a.response)
	mux.HandleFunc("POST "+apiPrefix+"/invocation/{id}/error", a.invocationError)
	mux.HandleFunc("POST "+apiPrefix+"/init/error", a.initError)
	return mux
}

func (a *runtimeAPI) initTime() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nextAt.IsZero() {
		return 0
	}
	return a.nextAt.Sub(a.started)
}

// next hands over the event once; a later call (the function asking for the
// next event after answering) waits until the process is killed.
func (a *runtimeAPI) next(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	first := !a.consumed
	if first {
		a.consumed, a.nextAt = true, time.Now()
	}
	a.mu.Unlock()
	if !first {
		<-r.Context().Done()
		return
	}

	if a.beforeEvent != nil {
		a.beforeEvent(a.requestID)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Lambda-Runtime-Aws-Request-Id", a.requestID)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(a.timeout).UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", a.arn)
	h.Set("Lambda-Runtime-Trace-Id", traceID())
	_, _ = w.Write(a.event)
	close(a.delivered)
}

// StreamedContentType is the Content-Type of a response in API Gateway's
// response streaming format: a JSON prelude with the status and headers,
// eight NUL bytes, then the body (aws-lambda-go's
// events.LambdaFunctionURLStreamingResponse).
const StreamedContentType = "application/vnd.awslambda.http-integration-response"

func (a *runtimeAPI) response(w http.ResponseWriter, r *http.Request) {
	if !a.checkID(w, r) {
		return
	}
	limit := MaxResponseSize
	streamed := r.Header.Get("Content-Type") == StreamedContentType
	if streamed {
		limit = MaxStreamedResponseSize
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	switch {
	case err != nil:
		a.answer(outcome{err: fmt.Errorf("read the function's response: %w", err)})
	case len(body) > limit:
		a.answer(outcome{err: &FunctionError{
			Type:    "Function.ResponseSizeTooLarge",
			Message: fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", limit),
		}})
		writeStatus(w, http.StatusRequestEntityTooLarge, "response too large")
		return
	case r.Trailer.Get("Lambda-Runtime-Function-Error-Type") != "":
		// aws-lambda-go reports an error met while streaming the body in trailers.
		ferr := &FunctionError{Type: r.Trailer.Get("Lambda-Runtime-Function-Error-Type")}
		if raw, err := base64.StdEncoding.DecodeString(r.Trailer.Get("Lambda-Runtime-Function-Error-Body")); err == nil {
			ferr.Raw = raw
			_ = json.Unmarshal(raw, ferr)
		}
		a.answer(outcome{err: ferr})
	case streamed:
		if body, err = proxyResponse(body); err != nil {
			a.answer(outcome{err: fmt.Errorf("read the function's streamed response: %w", err)})
			break
		}
		a.answer(outcome{response: body, streamed: true})
	default:
		a.answer(outcome{response: body})
	}
	writeStatus(w, http.StatusAccepted, "OK")
}

// proxyResponse turns a response in the streaming format into the proxy
// response API Gateway would have made of it had it buffered it, so that
// what reads a function's answer reads one form: the body as text, or as
// base64 when it is binary or encoded (payload.Base64).
func proxyResponse(streamed []byte) ([]byte, error) {
	prelude, body, ok := bytes.Cut(streamed, make([]byte, 8))
	if !ok {
		return nil, errors.New("a streamed response without the eight NUL bytes that end its prelude")
	}
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Cookies    []string          `json:"cookies"`
	}
	if err := json.Unmarshal(prelude, &p); err != nil {
		return nil, fmt.Errorf("a streamed response's prelude: %w", err)
	}
	h := http.Header{}
	for k, v := range p.Headers {
		h.Set(k, v)
	}
	text, encoded := string(body), payload.Base64(h, body)
	if encoded {
		text = base64.StdEncoding.EncodeToString(body)
	}
	multi := map[string][]string{}
	for k, v := range p.Headers {
		multi[k] = []string{v}
	}
	if len(p.Cookies) > 0 {
		multi["Set-Cookie"] = p.Cookies
	}
	return json.Marshal(map[string]any{"statusCode": p.StatusCode, "headers": p.Headers, "multiValueHeaders": multi,
		"body": text, "isBase64Encoded": encoded})
}

func (a *runtimeAPI) invocationError(w http.ResponseWriter, r *http.Request) {
	if !a.checkID(w, r) {
		return
	}
	a.answer(outcome{err: readFunctionError(r, false)})
	writeStatus(w, http.StatusAccepted, "OK")
}

func (a *runtimeAPI) initError(w http.ResponseWriter, r *http.Request) {
	a.answer(outcome{err: readFunctionError(r, true)})
	writeStatus(w, http.StatusAccepted, "OK")
}

func (a *runtimeAPI) checkID(w http.ResponseWriter, r *http.Request) bool {
	if id := r.PathValue("id"); id != a.requestID {
		writeStatus(w, http.StatusBadRequest, "unknown request id "+id)
		return false
	}
	return true
}

func (a *runtimeAPI) answer(o outcome) {
	a.answered.Do(func() {
		o.at = time.Now()
		a.outcome <- o
	})
}

func readFunctionError(r *http.Request, init bool) *FunctionError {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, MaxResponseSize))
	ferr := &FunctionError{Init: init, Raw: raw}
	if err := json.Unmarshal(raw, ferr); err != nil || (ferr.Type == "" && ferr.Message == "") {
		ferr.Message = strings.TrimSpace(string(raw))
	}
	if ferr.Type == "" {
		ferr.Type = r.Header.Get("Lambda-Runtime-Function-Error-Type")
	}
	return ferr
}

func writeStatus(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
}

// newRequestID returns a random UUID (version 4), the form of Lambda's request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// traceID returns an X-Ray trace header, as Lambda passes one (not sampled).
func traceID() string {
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", time.Now().Unix(), randomHex(12), randomHex(8))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tail keeps the last max bytes written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(t.buf.String()); s != "" {
		return s
	}
	return "none"
}

// Build compiles the Go package pkg (such as ./functions/slaves, relative to
// the module root root) into out with the one build line of every function
// (the Makefile's lambda_build), for Linux on goarch; runtime.GOARCH runs
// it here.
func Build(ctx context.Context, root, goarch, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s: %w\n%s", pkg, goarch, err, output)
	}
	return nil
}
