//go:build otel

package tracing

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/web"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// reset puts back the no-op global provider (tracing off) after a test.
func reset(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		want bool
	}{
		{"nothing set leaves tracing off", nil, false},
		{"OTEL_TRACES_EXPORTER=otlp switches it on", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"another exporter leaves it off", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{"OTEL_SDK_DISABLED=true wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{"OTEL_SDK_DISABLED=false does not disable", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := enabled(env(tc.vars)); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// pointerHandler is comparable, so a test can tell whether HTTP wrapped it.
type pointerHandler struct{}

func (*pointerHandler) ServeHTTP(http.ResponseWriter, *http.Request) {}

func TestOffByDefault(t *testing.T) {
	reset(t)
	if err := Start(context.Background(), env(nil)); err != nil {
		t.Fatal(err)
	}
	if tp := provider(); tp != nil {
		t.Fatalf("got a tracer provider without configuration, want none")
	}
	h := &pointerHandler{}
	if got := HTTP(h); got != http.Handler(h) {
		t.Errorf("HTTP wrapped the handler with tracing off")
	}
	cfg := aws.Config{}
	InstrumentSDK(&cfg)
	if len(cfg.APIOptions) != 0 {
		t.Errorf("got %d API options with tracing off, want 0", len(cfg.APIOptions))
	}
}

func TestStartWithOTLP(t *testing.T) {
	reset(t)
	if err := Start(context.Background(), env(map[string]string{"OTEL_TRACES_EXPORTER": "otlp"})); err != nil {
		t.Fatal(err)
	}
	tp := provider()
	if tp == nil {
		t.Fatal("got no tracer provider with OTEL_TRACES_EXPORTER=otlp")
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
}

// memoryHTTP answers every SDK request with an empty DynamoDB result.
type memoryHTTP struct{}

func (memoryHTTP) Do(r *http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", "ddb-request-1")
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

func client(t *testing.T) *dynamodb.Client {
	t.Helper()
	cfg := aws.Config{Region: "eu-west-1", HTTPClient: memoryHTTP{},
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	InstrumentSDK(&cfg)
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://dynamodb.test") })
}

func getItem(table string) *dynamodb.GetItemInput {
	return &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "s1"}}}
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestRequestSpans(t *testing.T) {
	reset(t)
	exp := tracetest.NewInMemoryExporter()
	tp := install(exp, env(map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "SlavesFunction"}))
	db := client(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/slaves/slave/{slaveId}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := db.GetItem(r.Context(), getItem("slaves")); err != nil {
			web.Error(w, r, err)
			return
		}
		web.OK(w)
	})
	invoke := Lambda(edge.StreamHandler(web.Wrap(HTTP(mux), web.Options{Logger: slog.New(slog.DiscardHandler), RequestID: edge.RequestID})))

	const parent = "4bf92f3577b34da6a3ce929d0e0e4736"
	event := json.RawMessage(`{"version":"2.0","rawPath":"/api/slaves/slave/s1","headers":{"traceparent":"00-` + parent + `-00f067aa0ba902b7-01"},
		"requestContext":{"requestId":"gateway-1","http":{"method":"GET","sourceIp":"10.0.0.1"}}}`)
	res, err := invoke(context.Background(), event)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatal(err)
	}
	// A streamed answer's server span ends with its body, after the
	// invocation returned and flushed (docs/decisions.md "Streamed
	// answers"): it leaves with the next invocation's export, forced here.
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 2 {
		t.Fatalf("got %d spans after one request, want 2 (server, client)", len(spans))
	}
	var server, clientSpan sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.SpanKind() {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			clientSpan = s
		}
	}
	if server == nil || clientSpan == nil {
		t.Fatalf("got span kinds %v and %v, want a server and a client span", spans[0].SpanKind(), spans[1].SpanKind())
	}

	t.Run("the server span names the route, status and request id", func(t *testing.T) {
		a := attrs(server)
		if got, want := server.Name(), "GET /api/slaves/slave/{slaveId}"; got != want {
			t.Errorf("name: got %q, want %q", got, want)
		}
		if got, want := a["http.route"].AsString(), "/api/slaves/slave/{slaveId}"; got != want {
			t.Errorf("http.route: got %q, want %q", got, want)
		}
		if got, want := a["http.response.status_code"].AsInt64(), int64(200); got != want {
			t.Errorf("status: got %d, want %d", got, want)
		}
		if got, want := a["request_id"].AsString(), "gateway-1"; got != want {
			t.Errorf("request_id: got %q, want %q", got, want)
		}
		if got := server.SpanContext().TraceID().String(); got != parent {
			t.Errorf("trace id: got %s, want the caller's %s", got, parent)
		}
		if got, want := server.Resource().String(), "service.name=SlavesFunction"; !strings.Contains(got, want) {
			t.Errorf("resource: got %s, want it to hold %s", got, want)
		}
	})
	t.Run("the client span names the SDK call and belongs to the request", func(t *testing.T) {
		a := attrs(clientSpan)
		if got, want := a["rpc.service"].AsString(), "DynamoDB"; got != want {
			t.Errorf("rpc.service: got %q, want %q", got, want)
		}
		if got, want := a["rpc.method"].AsString(), "GetItem"; got != want {
			t.Errorf("rpc.method: got %q, want %q", got, want)
		}
		if got, want := a["aws.request_id"].AsString(), "ddb-request-1"; got != want {
			t.Errorf("aws.request_id: got %q, want %q", got, want)
		}
		if got, want := clientSpan.Parent().SpanID(), server.SpanContext().SpanID(); got != want {
			t.Errorf("parent: got %s, want the server span %s", got, want)
		}
	})

	t.Run("each request is one more server span", func(t *testing.T) {
		exp.Reset()
		for range 3 {
			if _, err := invoke(context.Background(), event); err != nil {
				t.Fatal(err)
			}
		}
		servers := 0
		for _, s := range exp.GetSpans().Snapshots() {
			if s.SpanKind() == trace.SpanKindServer {
				servers++
			}
		}
		if servers != 3 {
			t.Errorf("got %d server spans for 3 requests, want 3", servers)
		}
	})
}

func TestRunSpan(t *testing.T) {
	reset(t)
	exp := tracetest.NewInMemoryExporter()
	install(exp, env(nil))
	db := client(t)
	run := Run("expiry", func(ctx context.Context, _ json.RawMessage) (int, error) {
		_, err := db.GetItem(ctx, getItem("expiring"))
		return 0, err
	})
	if _, err := run(context.Background(), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 2 {
		t.Fatalf("got %d spans after one run, want 2 (run, client)", len(spans))
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	runSpan, call := byName["expiry"], byName["DynamoDB.GetItem"]
	if runSpan == nil || call == nil {
		t.Fatalf("got spans %v, want expiry and DynamoDB.GetItem", byName)
	}
	if got, want := call.Parent().SpanID(), runSpan.SpanContext().SpanID(); got != want {
		t.Errorf("parent of the SDK call: got %s, want the run's span %s", got, want)
	}
}
