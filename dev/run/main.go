// Command run serves the whole API on http://127.0.0.1:3000 (PORT
// overrides) against local emulated AWS, with the same handlers the Lambda
// functions use: it uses the emulator running on 127.0.0.1:4566 (EMULATOR_ADDR
// overrides) or starts moto there, creates the tables and log buckets
// of template.yaml if absent, and stops what it started on Ctrl-C: moto holds
// its data in memory, so the data goes with it. A second make run on
// another PORT shares the running emulator, says so, and says when that
// emulator stops (emulator.go). It takes
// its port before anything else, and says who holds it when it cannot. The
// emulator always runs in one region with its own credentials, whatever AWS
// variables the shell has (stack.LocalAWS). It also serves the API's
// OpenAPI description, openapi.yaml, at /api/openapi.yaml and, converted,
// at /api/openapi.json, and the operator console at / (shared/console).
// The log buckets' S3 events reach IndexerFunction's handler as deployed,
// through EventBridge (stack.DeliverLogEvents), and the log lookups read
// the index it keeps, as the template's default has them. The changes
// table's stream reaches PublisherFunction's handler as deployed
// (stack.DeliverSlaveChanges), which puts a "Slave Changed" event per change
// on the local bus; make events shows them.
// Like API Gateway, it answers a request that is not
// valid HTTP with a JSON error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetops/fleet/app/indexerapp"
	"github.com/fleetops/fleet/app/publisherapp"
	"github.com/fleetops/fleet/dev/jsonerrors"
	"github.com/fleetops/fleet/dev/localapi"
	"github.com/fleetops/fleet/dev/reconcile"
	"github.com/fleetops/fleet/dev/stack"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	port := 3000
	if p := os.Getenv("PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("PORT=%q is not a port number", p)
		}
		port = n
	}
	// The port first: a second make run stops here, having started nothing.
	ln, err := listen("127.0.0.1", port)
	if err != nil {
		return err
	}
	defer ln.Close()
	local, err := stack.UpWith(ctx, stack.Addr(), stack.Options{Command: "make run", Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer local.Close()
	h, err := api(ctx, local, log)
	if err != nil {
		return err
	}
	events, err := deliverLogEvents(ctx, local, log)
	if err != nil {
		return err
	}
	defer events.Close()
	// The emulator's owner publishes its changes: a second make run on it
	// would publish each one again.
	if local.Moto.Started {
		changes, err := deliverSlaveChanges(ctx, local, log)
		if err != nil {
			return err
		}
		defer changes.Close()
	}
	// Its events flow: a reconciliation makes the index complete, and the
	// lookups read it (docs/behaviour.md "Reconciliation").
	runs, err := reconcile.Buckets(ctx, local)
	if err != nil {
		return err
	}
	for _, r := range runs {
		fmt.Fprintf(os.Stderr, "make run: bucket %s reconciled with the log index: %d added, %d removed, %d updated\n", r.Bucket, r.Drift.Added, r.Drift.Removed, r.Drift.Updated)
	}
	// The commands started meanwhile (make invoke, make seed-logs...) have
	// waited for this: the tables, buckets and event routes are there, and
	// the buckets are reconciled.
	if err := local.Moto.Ready(); err != nil {
		return err
	}
	emulator := strings.TrimPrefix(local.Moto.Endpoint, "http://")
	fmt.Fprintln(os.Stderr, emulatorNotice(local.Moto.Started, emulator, port))
	if !local.Moto.Started {
		go watchEmulator(ctx, emulator, 2*time.Second, os.Stderr, func(ctx context.Context) error {
			if err := local.Template.CreateTables(ctx, local.DynamoDB, stack.LocalName); err != nil {
				return err
			}
			if err := stack.CreateBuckets(ctx, local.S3, local.LogBuckets...); err != nil {
				return err
			}
			if _, err := local.RouteLogEvents(ctx); err != nil {
				return err
			}
			return local.CreateEventBuses(ctx)
		})
	}
	fmt.Fprintf(os.Stderr, "make run: serving the API and the console on http://%s/ (DynamoDB and S3 at %s, log buckets %v, indexed from their S3 events as they arrive); Ctrl-C stops\n", ln.Addr(), local.Moto.Endpoint, local.LogBuckets)
	err = serve(ctx, ln, h)
	if local.Moto.Started {
		fmt.Fprintf(os.Stderr, "make run: stopping moto on %s, and with it its tables and log buckets\n", emulator)
	}
	return err
}

// api returns the whole API over the emulator of local, with the console
// and the OpenAPI description, assembled as the tests' API is (localapi)
// from the variables the template gives each function (localEnv).
func api(ctx context.Context, local *stack.Local, log *slog.Logger) (http.Handler, error) {
	return localapi.New(ctx, localapi.Options{
		Env:      func(function string) (func(string) string, error) { return localEnv(local, function) },
		Log:      log,
		Console:  true, // signing in the way AUTH_MODE says (none unless the shell sets it)
		Document: true,
	})
}

// deliverLogEvents delivers the log buckets' S3 events to IndexerFunction's
// handler, built by its own constructor from the variables the template
// gives it (localEnv), until Close: from the start, so that the buckets a
// make run creates are indexed from their first log.
func deliverLogEvents(ctx context.Context, local *stack.Local, log *slog.Logger) (*stack.Delivery, error) {
	env, err := localEnv(local, stack.IndexerFunction)
	if err != nil {
		return nil, err
	}
	handle, err := indexerapp.New(ctx, env, indexerapp.Options{Log: log})
	if err != nil {
		return nil, err
	}
	return local.DeliverLogEvents(ctx, func(ctx context.Context, event json.RawMessage) error {
		_, err := handle(ctx, event)
		return err
	}, log)
}

// deliverSlaveChanges hands the changes table's stream to
// PublisherFunction's handler, built by its own constructor from the
// variables the template gives it, until Close: each change of the fleet
// becomes a "Slave Changed" event on the local bus (make events shows them).
func deliverSlaveChanges(ctx context.Context, local *stack.Local, log *slog.Logger) (*stack.ChangeDelivery, error) {
	env, err := localEnv(local, stack.PublisherFunction)
	if err != nil {
		return nil, err
	}
	handle, err := publisherapp.New(ctx, env, publisherapp.Options{Log: log})
	if err != nil {
		return nil, err
	}
	return local.DeliverSlaveChanges(ctx, handle, log)
}

// serve serves h on ln until ctx ends. A request that net/http refuses
// before any handler runs (a malformed path escape, oversized headers, a
// bad Host) gets a JSON error like every other answer of the API, not
// net/http's plain text: API Gateway never hands such a request to the
// functions, so only the local server meets it (see jsonerrors).
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(jsonerrors.Listener(ln)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// localEnv returns the getenv of function run locally: this process's
// environment first, then the function's environment in the template, with
// auth off, S3 buckets in the path (the emulator has no bucket host names),
// DynamoDB attempts that wait for the emulator (stack.DynamoDBAttemptTimeout)
// and longer log lookup deadlines: the emulator answers one request at a
// time (dev/motoserver.py), so the HEADs a lookup sends S3 at once take
// turns there, and a lookup of a few hundred logs would end in a 504 that
// AWS would not give.
func localEnv(local *stack.Local, function string) (func(string) string, error) {
	env, err := local.Template.FunctionEnv(function, stack.LocalName)
	if err != nil {
		return nil, err
	}
	env["AUTH_MODE"] = "none"
	env["S3_FORCE_PATH_STYLE"] = "true"
	env["DYNAMODB_ATTEMPT_TIMEOUT"] = stack.DynamoDBAttemptTimeout.String()
	if _, ok := env["LOG_LIST_TIMEOUT"]; ok {
		env["LOG_LIST_TIMEOUT"], env["LOG_LINK_TIMEOUT"] = "30s", "30s"
	}
	return func(name string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return env[name]
	}, nil
}
