//go:build otel

package tracing

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/fleetops/fleet/shared/web"
)

// scope names this package as the instrumentation that made the spans.
const scope = "github.com/fleetops/fleet/shared/tracing"

// flushTimeout bounds the export at the end of an invocation. The collector
// is a local process; an export this slow has failed, and the answer should
// not wait longer for it.
const flushTimeout = time.Second

// enabled reports whether getenv switches tracing on. OTEL_TRACES_EXPORTER
// must name otlp explicitly (the OpenTelemetry default is otlp, but a traced
// build deployed without the collector layer must stay quiet), and
// OTEL_SDK_DISABLED, the standard kill switch, wins over it.
func enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "otlp"
}

func start(ctx context.Context, getenv func(string) string) error {
	if !enabled(getenv) {
		return nil
	}
	// The exporter reads OTEL_EXPORTER_OTLP_* itself; it connects on the
	// first export, not here.
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return fmt.Errorf("start tracing: %w", err)
	}
	install(exp, getenv)
	return nil
}

// install makes a tracer provider exporting to exp the OpenTelemetry global,
// where the hooks (and any other instrumentation) find it: being set there is
// what "tracing is on" means, so this package keeps no state of its own.
func install(exp sdktrace.SpanExporter, getenv func(string) string) *sdktrace.TracerProvider {
	res := resource.NewSchemaless(
		attribute.String("service.name", cmp.Or(getenv("AWS_LAMBDA_FUNCTION_NAME"), "fleet")),
		attribute.String("cloud.provider", "aws"),
		attribute.String("cloud.platform", "aws_lambda"),
	)
	// Batching, not exporting span by span, keeps the export off the
	// request's path until the flush at the end of the invocation.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return tp
}

// provider returns the tracer provider install set, or nil when tracing is off.
func provider() *sdktrace.TracerProvider {
	tp, _ := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return tp
}

func instrumentSDK(cfg *aws.Config) {
	tp := provider()
	if tp == nil {
		return
	}
	tracer := tp.Tracer(scope)
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		// After the operation's own initialize middleware, which puts the
		// service and operation names in the context; before the retry
		// loop, so one span covers every attempt of a call.
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("fleetTrace",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				service, method := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				ctx, span := tracer.Start(ctx, service+"."+method, trace.WithSpanKind(trace.SpanKindClient),
					trace.WithAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", service),
						attribute.String("rpc.method", method), attribute.String("cloud.region", awsmiddleware.GetRegion(ctx))))
				defer span.End()
				out, md, err := next.HandleInitialize(ctx, in)
				if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok {
					span.SetAttributes(attribute.String("aws.request_id", id))
				}
				if err != nil {
					span.RecordError(err)
					span.SetStatus(codes.Error, err.Error())
				}
				return out, md, err
			}), middleware.After)
	})
}

func httpHandler(h http.Handler) http.Handler {
	tp := provider()
	if tp == nil {
		return h
	}
	tracer := tp.Tracer(scope)
	propagator := otel.GetTextMapPropagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
				attribute.String("request_id", web.RequestID(r))))
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(ctx)
		defer func() {
			p := recover()
			if p != nil {
				rec.status = http.StatusInternalServerError // what web.Wrap answers
			}
			// ServeMux has set the pattern ("GET /api/slaves") by now.
			route := r.Pattern
			if _, path, ok := strings.Cut(route, " "); ok {
				route = path
			}
			if route != "" {
				span.SetName(r.Method + " " + route)
				span.SetAttributes(attribute.String("http.route", route))
			}
			span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
			if rec.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(rec.status))
			}
			span.End()
			if p != nil {
				panic(p)
			}
		}()
		h.ServeHTTP(rec, r)
	})
}

// statusWriter remembers the status of the response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func lambdaHandler[E, R any](h func(context.Context, E) (R, error), name string) func(context.Context, E) (R, error) {
	tp := provider()
	if tp == nil {
		return h
	}
	tracer := tp.Tracer(scope)
	return func(ctx context.Context, event E) (R, error) {
		defer flush(ctx, tp)
		if name == "" {
			return h(ctx, event)
		}
		var attrs []attribute.KeyValue
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			attrs = append(attrs, attribute.String("faas.invocation_id", lc.AwsRequestID))
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		res, err := h(ctx, event)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return res, err
	}
}

// flush exports the spans of the invocation that is ending, even when its
// context is already cancelled. A failed export is reported to
// OpenTelemetry's error handler (stderr), never to the caller.
func flush(ctx context.Context, tp *sdktrace.TracerProvider) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := tp.ForceFlush(ctx); err != nil {
		otel.Handle(err)
	}
}
