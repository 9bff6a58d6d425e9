// Package localapi assembles the whole API on one handler, as API Gateway
// routes it to the functions: /api/slaves to SlavesFunction, /api/logs to
// LogsFunction and, when asked, the console on / as ConsoleFunction serves
// it, each built by its composition root (app/*app) from the environment
// the caller gives it. make run (dev/run) and the tests' API (dev/apitest)
// both serve this assembly, so a route mounted for one is mounted for the
// other (docs/decisions.md "One composition root per function").
package localapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/consoleapp"
	"github.com/fleetops/fleet/app/logsapp"
	"github.com/fleetops/fleet/app/slavesapp"
	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/web"
)

// The template's logical ids of the functions the API routes to.
const (
	SlavesFunction  = "SlavesFunction"
	LogsFunction    = "LogsFunction"
	ConsoleFunction = "ConsoleFunction"
)

// Options say what the caller brings and what is served besides the
// API's routes.
type Options struct {
	// Env returns the getenv of a function, named by its logical id in
	// template.yaml (the constants above). Required.
	Env func(function string) (func(string) string, error)
	// DynamoDB is the slave routes' client; nil builds one from the SDK's
	// environment, as in Lambda.
	DynamoDB dynamo.API
	// S3 is the log routes' client; nil builds one from the SDK's
	// environment, as in Lambda.
	S3 *s3.Client
	// Log gets the log line of every request (web.Wrap); nil logs nothing.
	Log *slog.Logger
	// Console serves the operator console on /; without it, / is the
	// API's 404.
	Console bool
	// Document serves openapi.yaml at /api/openapi.yaml and, converted, at
	// /api/openapi.json. Only the local server serves it: API Gateway
	// routes nothing but /api/slaves and /api/logs.
	Document bool
}

// New returns the API behind web.Wrap, with the functions built by their
// constructors from opts.Env.
func New(ctx context.Context, opts Options) (http.Handler, error) {
	slavesEnv, err := opts.Env(SlavesFunction)
	if err != nil {
		return nil, err
	}
	slaveRoutes, err := slavesapp.New(ctx, slavesEnv, slavesapp.Options{DynamoDB: opts.DynamoDB})
	if err != nil {
		return nil, err
	}
	logsEnv, err := opts.Env(LogsFunction)
	if err != nil {
		return nil, err
	}
	logRoutes, err := logsapp.New(ctx, logsEnv, logsapp.Options{S3: opts.S3})
	if err != nil {
		return nil, err
	}
	var root http.Handler = http.HandlerFunc(web.NotFound)
	if opts.Console {
		consoleEnv, err := opts.Env(ConsoleFunction)
		if err != nil {
			return nil, err
		}
		if root, err = consoleapp.New(consoleEnv); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/api/slaves", slaveRoutes)
	mux.Handle("/api/slaves/", slaveRoutes)
	mux.Handle("/api/logs", logRoutes)
	mux.Handle("/api/logs/", logRoutes)
	if opts.Document {
		doc, err := apidoc.Load()
		if err != nil {
			return nil, err
		}
		mux.HandleFunc("GET /api/openapi.json", document("application/json", doc.JSON()))
		mux.HandleFunc("GET /api/openapi.yaml", document("application/yaml", doc.YAML()))
	}
	mux.Handle("/", root)
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// As API Gateway streams every function's answers (startup.API).
	return web.Wrap(mux, web.Options{Logger: log}), nil
}

// document serves the API's OpenAPI description, for tools such as
// Swagger UI or an HTTP client generator.
func document(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(body)
	}
}
