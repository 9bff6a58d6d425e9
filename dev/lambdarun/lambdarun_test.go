package lambdarun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// helloBinary is testdata/hello, built by TestMain as the Makefile builds a
// function, but for this machine so that it runs here.
var helloBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lambdarun-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helloBinary = filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", helloBinary, "./testdata/hello")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testdata/hello: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// patient is the timeout of an invocation whose subject is not the timeout:
// Lambda's default 3 s is a race with the machine's speed when the test
// binary shares a busy machine.
const patient = time.Minute

func hello(t *testing.T) string {
	t.Helper()
	return helloBinary
}

type helloAnswer struct {
	Greeting    string            `json:"greeting"`
	RequestID   string            `json:"requestId"`
	FunctionARN string            `json:"functionArn"`
	HasDeadline bool              `json:"hasDeadline"`
	Env         map[string]string `json:"env"`
}

func TestInvokeReturnsTheResponseAndTimings(t *testing.T) {
	t.Setenv("AWS_PROFILE", "someone-elses")
	f := Function{
		Binary:     hello(t),
		Name:       "HelloFunction",
		MemorySize: 256,
		Env:        map[string]string{"GREETING_STYLE": "plain", "AWS_REGION": "eu-west-1"},
		Timeout:    patient,
		Logs:       t.Output(),
	}
	res, err := f.Invoke(context.Background(), []byte(`{"name": "fleet"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got helloAnswer
	if err := json.Unmarshal(res.Response, &got); err != nil {
		t.Fatalf("response %s: %v", res.Response, err)
	}

	if got.Greeting != "hello fleet" {
		t.Errorf("greeting: got %q, want %q", got.Greeting, "hello fleet")
	}
	if got.RequestID != res.RequestID || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(res.RequestID) {
		t.Errorf("request id: function saw %q, result has %q, want the same UUID", got.RequestID, res.RequestID)
	}
	if want := "arn:aws:lambda:eu-west-1:123456789012:function:HelloFunction"; got.FunctionARN != want {
		t.Errorf("function ARN: got %q, want %q", got.FunctionARN, want)
	}
	if !got.HasDeadline {
		t.Error("the handler's context has no deadline")
	}
	for k, want := range map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        "HelloFunction",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_REGION":                      "eu-west-1",
		"GREETING_STYLE":                  "plain",
	} {
		if got.Env[k] != want {
			t.Errorf("env %s: got %q, want %q", k, got.Env[k], want)
		}
	}
	if !strings.HasPrefix(got.Env["_X_AMZN_TRACE_ID"], "Root=1-") {
		t.Errorf("trace id: got %q, want an X-Ray header", got.Env["_X_AMZN_TRACE_ID"])
	}
	if v, ok := got.Env["AWS_PROFILE"]; ok {
		t.Errorf("AWS_PROFILE leaked into the function: %q", v)
	}
	if res.Init <= 0 || res.Total < res.Init || res.Handler() < 0 {
		t.Errorf("timings: init %v, total %v, want 0 < init <= total", res.Init, res.Total)
	}
}

func TestInvokeReportsFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   string
		env     map[string]string
		timeout time.Duration
		typ     string
		message string
		init    bool
	}{
		{name: "returned error", event: `{"fail": true}`, typ: "errorString", message: "asked to fail"},
		{name: "panic", event: `{"panic": true}`, typ: "string", message: "asked to panic"},
		{name: "timeout", event: `{"sleep": "10m"}`, timeout: 500 * time.Millisecond, typ: "Sandbox.Timedout", message: "Task timed out after 0.50 seconds"},
		{name: "exit while handling", event: `{"exit": 3}`, typ: "Runtime.ExitError", message: "exit status 3"},
		{name: "exit during init", event: `{}`, env: map[string]string{"HELLO_INIT_FAIL": "1"}, typ: "Runtime.ExitError", message: "HELLO_INIT_FAIL is set", init: true},
		{name: "response too large", event: `{"big": true}`, typ: "Function.ResponseSizeTooLarge", message: "exceeded maximum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Function{Binary: hello(t), Env: tc.env, Timeout: cmp.Or(tc.timeout, patient)}
			res, err := f.Invoke(context.Background(), []byte(tc.event))
			var ferr *FunctionError
			if !errors.As(err, &ferr) {
				t.Fatalf("got %v (response %s), want a *FunctionError", err, res.Response)
			}
			if ferr.Type != tc.typ || !strings.Contains(ferr.Message, tc.message) || ferr.Init != tc.init {
				t.Errorf("got %+v, want type %q, message containing %q, init %v", ferr, tc.typ, tc.message, tc.init)
			}
			if res.Response != nil {
				t.Errorf("got a response %s beside the error", res.Response)
			}
		})
	}
}

func TestInvokeCountsTheWholeResponseAgainstLambdasLimit(t *testing.T) {
	if MaxResponseSize != 6_291_456 {
		t.Fatalf("got MaxResponseSize %d, want Lambda's 6,291,456 bytes", MaxResponseSize)
	}
	for _, tc := range []struct {
		name  string
		bytes int
		fails bool
	}{
		{"a response of exactly the limit is delivered", MaxResponseSize, false},
		{"one byte more is refused", MaxResponseSize + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Function{Binary: hello(t), Timeout: patient}.Invoke(context.Background(), []byte(fmt.Sprintf(`{"bytes": %d}`, tc.bytes)))
			var ferr *FunctionError
			if tc.fails {
				if !errors.As(err, &ferr) || ferr.Type != "Function.ResponseSizeTooLarge" {
					t.Fatalf("got %v, want Function.ResponseSizeTooLarge", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Response) != tc.bytes {
				t.Errorf("got a response of %d bytes, want %d", len(res.Response), tc.bytes)
			}
		})
	}
}

func TestAStreamedResponseIsDeliveredPastTheBufferedLimitAsAGatewayResponse(t *testing.T) {
	const n = MaxResponseSize + 1<<20
	res, err := Function{Binary: hello(t), Timeout: patient}.Invoke(context.Background(), []byte(fmt.Sprintf(`{"streamBytes": %d}`, n)))
	if err != nil {
		t.Fatalf("got %v, want a streamed answer of %d bytes delivered", err, n)
	}
	var got struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Body       string            `json:"body"`
		Base64     bool              `json:"isBase64Encoded"`
	}
	if err := json.Unmarshal(res.Response, &got); err != nil {
		t.Fatalf("got %.200s, want a proxy response: %v", res.Response, err)
	}
	if !res.Streamed || got.StatusCode != 200 || got.Headers["Content-Type"] != "text/plain" || got.Base64 || len(got.Body) != n {
		t.Errorf("got streamed %v, %d %v, base64 %v, %d bytes; want streamed, 200 text/plain, %d bytes of text", res.Streamed,
			got.StatusCode, got.Headers, got.Base64, len(got.Body), n)
	}
}

func TestAStreamedResponseWhoseBodyFailsIsAFunctionError(t *testing.T) {
	_, err := Function{Binary: hello(t), Timeout: patient}.Invoke(context.Background(), []byte(`{"streamFail": true}`))
	var ferr *FunctionError
	if !errors.As(err, &ferr) || !strings.Contains(ferr.Message, "asked to fail half way") {
		t.Fatalf("got %v, want the function's error from the stream's trailers", err)
	}
}

func TestInvokeHelper(t *testing.T) {
	resp, err := Invoke(context.Background(), hello(t), nil, []byte(`{"name": "again"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), `"greeting":"hello again"`) {
		t.Errorf("got %s, want the greeting", resp)
	}
}

func TestInvokeStopsOnCancel(t *testing.T) {
	// Cancelled once the function has its event, whatever the machine's
	// speed: an Invoke that ignored the cancel would end only at the
	// function's timeout, with a Sandbox.Timedout error instead.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fn := Function{Binary: hello(t), Timeout: patient, BeforeEvent: func(string) { cancel() }}
	_, err := fn.Invoke(ctx, []byte(`{"sleep": "10m"}`))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestInvokeOfAMissingBinary(t *testing.T) {
	_, err := Function{Binary: filepath.Join(t.TempDir(), "bootstrap")}.Invoke(context.Background(), []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("got %v, want a missing-file error", err)
	}
}

func TestInvokeMeasuresAndBoundsMemory(t *testing.T) {
	var started string
	// The bound under test is memory: a busy machine may take more than
	// Lambda's default 3 s to touch 200 MB, so time is not what ends it.
	f := Function{Binary: hello(t), MemorySize: 128, Timeout: patient, BeforeEvent: func(id string) { started = id }}
	res, err := f.Invoke(context.Background(), []byte(`{"name": "small"}`))
	if err != nil {
		t.Fatal(err)
	}
	if started == "" || started != res.RequestID {
		t.Errorf("BeforeEvent: got %q, want the request id %q", started, res.RequestID)
	}
	if res.MaxMemory <= 0 || res.MaxMemory > 128<<20 {
		t.Errorf("got a peak of %d bytes, want some, under 128 MB", res.MaxMemory)
	}
	report := res.Report(128)
	for _, want := range []string{"REPORT RequestId: " + res.RequestID + "\t", "\tDuration: ", " ms\tBilled Duration: ", " ms\tMemory Size: 128 MB\tMax Memory Used: ", "\tInit Duration: "} {
		if !strings.Contains(report, want) {
			t.Errorf("got %q, want it to contain %q", report, want)
		}
	}

	res, err = f.Invoke(context.Background(), []byte(`{"name": "big", "allocateMB": 200}`))
	var ferr *FunctionError
	if !errors.As(err, &ferr) || ferr.Type != "Runtime.OutOfMemory" || !strings.Contains(ferr.Message, "over its memory size of 128 MB") {
		t.Fatalf("got %v, want Runtime.OutOfMemory", err)
	}
	if res.Response != nil || res.MaxMemory <= 128<<20 {
		t.Errorf("got response %s and a peak of %d bytes, want no response and over 128 MB", res.Response, res.MaxMemory)
	}
}

func TestReportBillsInitAndRoundsUp(t *testing.T) {
	r := Result{RequestID: "id", Init: 40 * time.Millisecond, Total: 52*time.Millisecond + 300*time.Microsecond, MaxMemory: 20<<20 + 1}
	want := "REPORT RequestId: id\tDuration: 12.30 ms\tBilled Duration: 53 ms\tMemory Size: 512 MB\tMax Memory Used: 21 MB\tInit Duration: 40.00 ms"
	if got := r.Report(512); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
