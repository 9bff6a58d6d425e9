package logindex_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/awsfault/awsfaulttest"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// routeDeadline is the log routes' list and link timeout in these tests:
// the emulators, and a local server answering faults, are slowed many
// times over on a busy machine, and no test here is about those deadlines.
const routeDeadline = time.Minute

// A refused connection, a throttle, a server error and a timeout answer
// the same through the index as through a log route that reads it, as
// every adapter answers them (shared/awsfault): index lookups once matched
// the text of a throttle only, and answered a refused connection with a
// 500.
func TestEveryFailureOfTheIndexAnswersAsTheOthers(t *testing.T) {
	for _, f := range awsfaulttest.Failures(t, awsfault.DynamoDB) {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			table := logindex.NewTable(awsfaulttest.DynamoDBClient(t, f), "logindex")
			now := time.Now().UnixMilli()
			_, err := table.Request(ctx, "web-api", logkey.Window{Start: now - 3_600_000, End: now})
			if got := fault.Message(err); got != f.Message {
				t.Errorf("Request: got %q (%v), want %q", got, err, f.Message)
			}

			// The index answers the lookup before S3 is asked anything:
			// links are presigned without a call.
			client := s3.New(s3.Options{Region: "us-east-1"})
			h := logs.New(logstore.New(client, s3.NewPresignClient(client)), logs.Config{Buckets: []string{"logs"},
				URLTTL: time.Hour, Lookback: 24 * time.Hour, ListTimeout: routeDeadline, LinkTimeout: routeDeadline}).
				ReadsIndex(table)
			rec := httptest.NewRecorder()
			web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).
				ServeHTTP(rec, httptest.NewRequest("GET", "/api/logs/request/web-api", nil))
			msg := awsfaulttest.CheckAnswer(t, rec.Result(), f)
			if want := f.Message; msg != want && !(f.Status == http.StatusGatewayTimeout && strings.HasPrefix(msg, "Timed out waiting for the log index")) {
				t.Errorf("got message %q, want %q", msg, want)
			}
		})
	}
}

// Keys that DynamoDB keeps leaving unprocessed are its throttling in
// another form: Complete answers them as a throttle after
// awsfault.Attempts reads, with pauses between them, where it once asked
// again at once for as long as they came back.
func TestCompleteAnswersKeysLeftUnprocessedAsAThrottle(t *testing.T) {
	var batches atomic.Int64
	endpoint := awsfaulttest.DynamoDB(t, func(op string, body []byte) (int, string) {
		batches.Add(1)
		var in struct{ RequestItems json.RawMessage }
		if op != "BatchGetItem" || json.Unmarshal(body, &in) != nil {
			return http.StatusBadRequest, `{"__type":"com.amazon.coral.validate#ValidationException","message":"unexpected ` + op + `"}`
		}
		return http.StatusOK, `{"Responses":{},"UnprocessedKeys":` + string(in.RequestItems) + `}`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	table := logindex.NewTable(awsfaulttest.DynamoDBClient(t, awsfaulttest.Failure{Endpoint: endpoint, AttemptTimeout: awsfaulttest.Patient}), "logindex")
	_, err := table.Complete(ctx, []string{"logs", "more-logs"})
	if fault.KindOf(err) != fault.KindUnavailable || fault.Message(err) != "DynamoDB is busy, try again" {
		t.Errorf("got %v, want DynamoDB is busy (unavailable)", err)
	}
	if got := batches.Load(); got != awsfault.Attempts {
		t.Errorf("got %d BatchGetItem calls, want %d", got, awsfault.Attempts)
	}
}
