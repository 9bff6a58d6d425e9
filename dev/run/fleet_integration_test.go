//go:build integration

package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/sdkconfig"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// localFleet is the fleet the tests below hold in the emulator: three 1 MB
// pages of one state, enough to outlast the production deadline there.
const localFleet, localFrozen = 10_000, 100

// TestTheLocalStackAnswersTheListAndAStateQueryOfALargeFleet stores a
// fleet in the emulator and asks make run's handlers for all of it and for
// every ACTIVE slave: both answer whole, within the local stack's DynamoDB
// deadlines (DYNAMODB_ATTEMPT_TIMEOUT as make run sets it) and within
// SlavesFunction's timeout, which the request has for its deadline as the
// edge gives it one in Lambda.
func TestTheLocalStackAnswersTheListAndAStateQueryOfALargeFleet(t *testing.T) {
	local := fleetStack(t)
	h, err := api(context.Background(), local, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fn, err := local.Template.FunctionConfig("SlavesFunction")
	if err != nil {
		t.Fatal(err)
	}
	h = withDeadline(h, fn.Timeout-edge.AnswerMargin)
	for _, tt := range []struct {
		target string
		want   int
	}{
		{"/api/slaves?state=ACTIVE", localFleet - localFrozen},
		{"/api/slaves", localFleet},
	} {
		began := time.Now()
		status, got, body := getList(t, h, tt.target)
		if status != http.StatusOK || got != tt.want {
			t.Errorf("GET %s: got %d with %d slaves (%.200s), want 200 with %d", tt.target, status, got, body, tt.want)
		}
		t.Logf("GET %s: %d slaves in %v", tt.target, got, time.Since(began).Round(time.Millisecond))
	}
}

// TestTheProductionDeadlineGivesUpOnPagesTheLocalStackWaitsFor serves the
// same emulator through a proxy that answers every DynamoDB call after
// the production attempt timeout, as the emulator does for a page of a
// large fleet: with make run's deadline, the state query is the whole
// answer. With the deadline the functions have when nothing sets
// DYNAMODB_ATTEMPT_TIMEOUT it is a 504, asked of a proxy that never
// answers: one that answered a little after that deadline would race it
// on a busy machine.
func TestTheProductionDeadlineGivesUpOnPagesTheLocalStackWaitsFor(t *testing.T) {
	local := fleetStack(t)
	target, err := url.Parse(local.Moto.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // the attempts cut off
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(config.DefaultDynamoDBAttemptTimeout + 100*time.Millisecond):
			proxy.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	stop := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then net/http notices the client leaving
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer stalled.Close()
	defer close(stop) // first: Close waits for the requests held

	production, err := local.Template.FunctionEnv("SlavesFunction", stack.LocalName)
	if err != nil {
		t.Fatal(err)
	}
	// What the shell may say does not count here (t.Setenv restores it).
	t.Setenv("DYNAMODB_ATTEMPT_TIMEOUT", os.Getenv("DYNAMODB_ATTEMPT_TIMEOUT"))
	os.Unsetenv("DYNAMODB_ATTEMPT_TIMEOUT")
	local2, err := localEnv(local, "SlavesFunction")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		getenv   func(string) string
		emulator string
		status   int
	}{
		{"the template's environment: the production deadline", func(name string) string { return production[name] }, stalled.URL, http.StatusGatewayTimeout},
		{"make run's environment: the local stack's deadline", local2, slow.URL, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", tt.emulator)
			cfg, err := config.LoadSlaves(tt.getenv)
			if err != nil {
				t.Fatal(err)
			}
			sdk, err := sdkconfig.Load(context.Background(), sdkconfig.DynamoDB, cfg.DynamoDBAttemptTimeout)
			if err != nil {
				t.Fatal(err)
			}
			store := dynamo.New(dynamodb.NewFromConfig(sdk), dynamo.Tables(cfg.Tables), 0)
			h := web.Wrap(slaves.New(store, access.Policy{}, machine.Limits{}), web.Options{Logger: slog.New(slog.DiscardHandler)})
			began := time.Now()
			status, got, body := getList(t, h, "/api/slaves?state=ACTIVE")
			if status != tt.status {
				t.Fatalf("got %d (%.200s) after %v with DYNAMODB_ATTEMPT_TIMEOUT %v, want %d", status, body, time.Since(began).Round(time.Millisecond), cfg.DynamoDBAttemptTimeout, tt.status)
			}
			if status == http.StatusGatewayTimeout {
				var e web.ErrorBody
				if err := json.Unmarshal(body, &e); err != nil || e.Message != "Timed out waiting for DynamoDB" {
					t.Errorf("got %s, want the 504 of a DynamoDB timeout", body)
				}
			} else if got != localFleet-localFrozen {
				t.Errorf("got %d slaves, want %d", got, localFleet-localFrozen)
			}
		})
	}
}

// withDeadline gives every request of h a deadline after d.
func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// fleetStack returns the local stack the fleet tests share (they only read
// it), holding localFleet slaves, localFrozen of them FROZEN and the rest
// ACTIVE.
func fleetStack(t *testing.T) *stack.Local {
	t.Helper()
	return fleet.get(t, func(local *stack.Local) error {
		began := time.Now()
		if err := fleettable.Put(context.Background(), local.DynamoDB, stack.Tables.Slaves, fleettable.Items(localFleet, localFrozen)); err != nil {
			return err
		}
		t.Logf("%d slaves stored in %v", localFleet, time.Since(began).Round(time.Millisecond))
		return nil
	})
}

// getList GETs target from h and returns the status, how many slaves the
// answer holds (a 200's) and its body.
func getList(t *testing.T, h http.Handler, target string) (int, int, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	var list []json.RawMessage
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
	}
	return rec.Code, len(list), rec.Body.Bytes()
}
