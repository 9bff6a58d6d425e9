// Package lambdalog is the log/slog logger of every function: JSON lines on
// stdout, in the shape of Lambda's JSON log format (timestamp, level,
// message, requestId), at the level Lambda's advanced logging controls set,
// each line tagged with the id of the invocation it belongs to, which
// Lambda's own START, END and REPORT lines carry too.
//
// aws-lambda-go has such a handler (lambdacontext.NewLogHandler), but it
// writes text unless the function's log format is JSON, which is not
// Lambda's default, and only to os.Stdout. This one writes JSON whatever the
// format, so Logs Insights reads the fields of every line, and to any
// writer; it reuses the library's key names and its reading of the context.
package lambdalog

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// New returns a logger writing JSON lines to w, at the level
// AWS_LAMBDA_LOG_LEVEL names (read with getenv; INFO when unset or unknown).
// Lambda sets that variable when the function's application log level is
// configured, and drops lines below it anyway; honouring it here saves
// formatting them.
func New(w io.Writer, getenv func(string) string) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: Level(getenv("AWS_LAMBDA_LOG_LEVEL")), ReplaceAttr: lambdacontext.ReplaceAttr})
	return slog.New(handler{h})
}

// Level maps a Lambda log level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, in
// any case) to a slog level; anything else is INFO.
func Level(name string) slog.Level {
	switch strings.ToUpper(strings.TrimSpace(name)) {
	case "TRACE":
		return slog.LevelDebug - 4
	case "DEBUG":
		return slog.LevelDebug
	case "WARN":
		return slog.LevelWarn
	case "ERROR":
		return slog.LevelError
	case "FATAL":
		return slog.LevelError + 4
	}
	return slog.LevelInfo
}

// handler adds the invocation's request id to the records logged with a
// context that carries one (the ...Context methods of slog.Logger).
type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name)}
}
