package dynamo_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/awsfault/awsfaulttest"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

var (
	faultTables = dynamo.Tables{Slaves: "slaves", History: "history", Expiring: "expiring", Requests: "requests"}
	quiet       = web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	limits      = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}
)

// slaveRoutes serves the slave routes on store, open to every caller.
func slaveRoutes(store *dynamo.Store) http.Handler {
	return web.Wrap(slaves.New(store, access.Policy{Mode: access.ModeNone}, limits), quiet)
}

func serve(h http.Handler, method, target string) *http.Response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

// A refused connection, a throttle, a server error and a timeout answer
// the same through the store as through the slave routes, reads and
// changes alike, as every adapter answers them (shared/awsfault).
func TestEveryFailureOfDynamoDBAnswersAsTheOthers(t *testing.T) {
	for _, f := range awsfaulttest.Failures(t, awsfault.DynamoDB) {
		t.Run(f.Name, func(t *testing.T) {
			store := dynamo.New(awsfaulttest.DynamoDBClient(t, f), faultTables, 90*24*time.Hour)
			_, err := store.Get(context.Background(), "S1")
			if got := fault.Message(err); got != f.Message {
				t.Errorf("Get: got %q (%v), want %q", got, err, f.Message)
			}
			for _, route := range []struct{ method, target string }{
				{"GET", "/api/slaves/slave/S1/details"},
				{"GET", "/api/slaves"},
				{"POST", "/api/slaves/slave/S1/freeze"},
			} {
				t.Run(route.method+" "+route.target, func(t *testing.T) {
					if got := awsfaulttest.CheckAnswer(t, serve(slaveRoutes(store), route.method, route.target), f); got != f.Message {
						t.Errorf("got message %q, want %q", got, f.Message)
					}
				})
			}
		})
	}
}

// Keys that DynamoDB keeps leaving unprocessed are its throttling in
// another form: the expiring list answers them as a throttle, a 503 with
// Retry-After, after awsfault.Attempts reads.
func TestKeysLeftUnprocessedAnswerAsAThrottle(t *testing.T) {
	var batches atomic.Int64
	endpoint := awsfaulttest.DynamoDB(t, func(op string, body []byte) (int, string) {
		switch op {
		case "Scan":
			return http.StatusOK, `{"Count":1,"ScannedCount":1,"Items":[{"machineId":{"S":"S1"},"startMillis":{"N":"1"},` +
				`"actionId":{"S":"a1"},"revertToState":{"S":"ACTIVE"},"killTasksOnDecommissionTimeout":{"BOOL":false},` +
				`"request":{"M":{}},"dueAt":{"N":"2"},"dueShard":{"N":"0"},"expiresAt":{"N":"99999999999"}}]}`
		case "BatchGetItem":
			batches.Add(1)
			var in struct{ RequestItems json.RawMessage }
			if err := json.Unmarshal(body, &in); err != nil {
				return http.StatusBadRequest, `{"__type":"com.amazon.coral.validate#ValidationException","message":"bad body"}`
			}
			return http.StatusOK, `{"Responses":{},"UnprocessedKeys":` + string(in.RequestItems) + `}`
		}
		return http.StatusBadRequest, `{"__type":"com.amazon.coral.validate#ValidationException","message":"unexpected ` + op + `"}`
	})
	store := dynamo.New(awsfaulttest.DynamoDBClient(t, awsfaulttest.Failure{Endpoint: endpoint, AttemptTimeout: awsfaulttest.Patient}), faultTables, 90*24*time.Hour)
	busy := awsfaulttest.Failure{Name: "keys left unprocessed", Status: http.StatusServiceUnavailable, Message: "DynamoDB is busy, try again"}
	if got := awsfaulttest.CheckAnswer(t, serve(slaveRoutes(store), "GET", "/api/slaves/expiring"), busy); got != busy.Message {
		t.Errorf("got message %q, want %q", got, busy.Message)
	}
	if got := batches.Load(); got != awsfault.Attempts {
		t.Errorf("got %d BatchGetItem calls, want %d", got, awsfault.Attempts)
	}
}
