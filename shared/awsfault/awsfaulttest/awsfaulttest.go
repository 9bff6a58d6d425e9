// Package awsfaulttest serves the ways an AWS endpoint fails, for the
// contract tests of the adapters that talk to AWS: real SDK clients built by
// shared/sdkconfig are pointed at a small local HTTP server that answers as
// DynamoDB or S3 does when it throttles or fails, or that never answers, or
// at a port where nothing listens. Each adapter's test then shows that the
// same failure gives the same answer (docs/decisions.md "One translation of
// AWS errors").
package awsfaulttest

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// Failure is one way service fails, with the answer the service's routes
// give it.
type Failure struct {
	Name     string // reads as a sentence: "a refused connection"
	Endpoint string // URL of the failing endpoint
	Status   int    // the HTTP status of a route's answer
	Message  string // the fault's message, as the adapter returns it
	// AttemptTimeout is the attempt timeout to build clients of Endpoint
	// with (sdkconfig.Load): short where the endpoint never answers, so
	// that the test ends soon, and Patient elsewhere, so that a loaded
	// machine's slow answer is never taken for a timeout.
	AttemptTimeout time.Duration
}

// Patient is an attempt timeout no local answer comes near, however loaded
// the machine.
const Patient = 30 * time.Second

// hangTimeout cuts off each attempt at the endpoint that never answers.
const hangTimeout = 200 * time.Millisecond

// Failures starts one endpoint per way service (awsfault.DynamoDB or
// awsfault.S3) fails: a refused connection, a throttle on every attempt, a
// 5xx on every attempt, and an endpoint that never answers (a client's
// attempt timeout, AttemptTimeout, cuts it off). They stop when t ends.
func Failures(t testing.TB, service string) []Failure {
	t.Helper()
	throttle, serverErr := answer(service)
	return []Failure{
		{"a refused connection", refused(t), http.StatusServiceUnavailable, service + " could not be reached, try again", Patient},
		{"a throttle", serve(t, throttle), http.StatusServiceUnavailable, service + " is busy, try again", Patient},
		{"a server error", serve(t, serverErr), http.StatusServiceUnavailable, service + " is busy, try again", Patient},
		{"a timeout", hang(t), http.StatusGatewayTimeout, "Timed out waiting for " + service, hangTimeout},
	}
}

// S3Client is an S3 client of f's endpoint, built as the functions build
// theirs (sdkconfig.Load, with f's attempt timeout), addressing buckets in
// the path.
func S3Client(t *testing.T, f Failure) *s3.Client {
	t.Helper()
	Env(t, awsfault.S3, f.Endpoint)
	cfg, err := sdkconfig.Load(context.Background(), sdkconfig.S3, f.AttemptTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

// DynamoDBClient is a DynamoDB client of f's endpoint, built as the
// functions build theirs (sdkconfig.Load, with f's attempt timeout).
func DynamoDBClient(t *testing.T, f Failure) *dynamodb.Client {
	t.Helper()
	Env(t, awsfault.DynamoDB, f.Endpoint)
	cfg, err := sdkconfig.Load(context.Background(), sdkconfig.DynamoDB, f.AttemptTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg)
}

// Env points the SDK clients that sdkconfig.Load builds for service at
// endpoint, with a region and static credentials, for the rest of t.
func Env(t *testing.T, service, endpoint string) {
	t.Helper()
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFAULTTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "fault-test-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	switch service {
	case awsfault.DynamoDB:
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
	case awsfault.S3:
		t.Setenv("AWS_ENDPOINT_URL_S3", endpoint)
	default:
		t.Fatalf("no endpoint variable for service %q", service)
	}
}

// CheckAnswer checks that a route answered the failure f with f.Status, a
// JSON error {"code": f.Status, "message": ...} and Retry-After on a 503
// only, and returns the message.
func CheckAnswer(t *testing.T, resp *http.Response, f Failure) string {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != f.Status {
		t.Fatalf("got status %d (%s), want %d", resp.StatusCode, body, f.Status)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", got)
	}
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("got body %q, want a JSON error: %v", body, err)
	}
	msg, _ := e["message"].(string)
	if code, _ := e["code"].(float64); int(code) != f.Status || msg == "" || len(e) != 2 {
		t.Errorf(`got body %s, want {"code": %d, "message": "<reason>"}`, body, f.Status)
	}
	want := ""
	if f.Status == http.StatusServiceUnavailable {
		want = "1"
	}
	if got := resp.Header.Get("Retry-After"); got != want {
		t.Errorf("got Retry-After %q, want %q", got, want)
	}
	return msg
}

// answer returns service's answers to a throttle and to a server error, as
// AWS sends them: DynamoDB a 400 naming the exception in JSON (its body
// checksummed, as DynamoDB does), S3 an XML error.
func answer(service string) (throttle, serverErr http.HandlerFunc) {
	if service == awsfault.DynamoDB {
		return dynamoError(http.StatusBadRequest, "ProvisionedThroughputExceededException"),
			dynamoError(http.StatusInternalServerError, "InternalServerError")
	}
	return s3Error(http.StatusServiceUnavailable, "SlowDown"), s3Error(http.StatusInternalServerError, "InternalError")
}

func dynamoError(status int, code string) http.HandlerFunc {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#` + code + `","message":"injected by awsfaulttest"}`
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		writeDynamoDB(w, status, body)
	}
}

// DynamoDB serves DynamoDB's JSON protocol from answer, which is given each
// request's operation ("BatchGetItem", from X-Amz-Target) and body and
// returns the status and body of the answer. It stops when t ends.
func DynamoDB(t testing.TB, answer func(op string, body []byte) (status int, response string)) string {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		status, response := answer(op, body)
		writeDynamoDB(w, status, response)
	})
}

// writeDynamoDB writes an answer as DynamoDB does, its body checksummed.
func writeDynamoDB(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func s3Error(status int, code string) http.HandlerFunc {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>injected by awsfaulttest</Message><RequestId>awsfaulttest</RequestId></Error>`
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func serve(t testing.TB, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// hang serves requests that are never answered: each waits until its
// client gives up, or t ends.
func hang(t testing.TB) string {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: Close waits for the handlers
	return srv.URL
}

// refused returns the URL of a local port where nothing listens: a port
// taken and let go at once, which the system does not hand out again soon.
func refused(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}
