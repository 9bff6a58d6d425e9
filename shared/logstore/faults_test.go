package logstore_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/awsfault/awsfaulttest"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// routeDeadline is the log routes' list and link timeout in these tests:
// the emulators, and a local server answering faults, are slowed many
// times over on a busy machine, and no test here is about those deadlines.
const routeDeadline = time.Minute

// A refused connection, a throttle (SlowDown), a server error and a
// timeout answer the same through the store as through a log route that
// lists the buckets, as every adapter answers them (shared/awsfault).
func TestEveryFailureOfS3AnswersAsTheOthers(t *testing.T) {
	for _, f := range awsfaulttest.Failures(t, awsfault.S3) {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			client := awsfaulttest.S3Client(t, f)
			store := logstore.New(client, s3.NewPresignClient(client))
			_, _, err := store.Page(ctx, "logs", "web-api/", "", 10)
			if got := fault.Message(err); got != f.Message {
				t.Errorf("Page: got %q (%v), want %q", got, err, f.Message)
			}
			_, _, err = store.Times(ctx, "logs", "web-api/stdout")
			if got := fault.Message(err); got != f.Message {
				t.Errorf("Times: got %q (%v), want %q", got, err, f.Message)
			}

			h := logs.New(store, logs.Config{Buckets: []string{"logs"}, URLTTL: time.Hour, Lookback: 24 * time.Hour,
				ListTimeout: routeDeadline, LinkTimeout: routeDeadline})
			rec := httptest.NewRecorder()
			web.Wrap(h, web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).
				ServeHTTP(rec, httptest.NewRequest("GET", "/api/logs/request/web-api", nil))
			msg := awsfaulttest.CheckAnswer(t, rec.Result(), f)
			if msg != f.Message && !(f.Status == http.StatusGatewayTimeout && strings.HasPrefix(msg, "Timed out waiting for response from S3")) {
				t.Errorf("got message %q, want %q", msg, f.Message)
			}
		})
	}
}
