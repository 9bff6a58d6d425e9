//go:build integration

package slaves_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// BenchmarkListFleet lists a fleet of 100,000 slaves, and the 20,000 of
// them FROZEN, gzip accepted, through the real store and SDK over the
// in-memory table of the bench (no latency): what remains is the CPU of the
// list, slave by slave (SDK decode, record decode, the wire encode,
// sorting, gzip). The change feed's reads around the list go to the
// emulator of TestMain. Run it with -cpuprofile to see where that goes:
// go test -tags integration -run '^$' -bench ListFleet ./shared/slaves
func BenchmarkListFleet(b *testing.B) {
	table, err := fleettable.New(fleettable.Items(100_000, 20_000), 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := table.Beside(emulator); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(table)
	defer srv.Close()
	db := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	store := dynamo.New(db, stack.Tables, 0)
	h := web.Wrap(slaves.New(store, access.Policy{}, machine.Limits{}), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, target := range []string{"/api/slaves", "/api/slaves?state=FROZEN"} {
		b.Run(target, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
				req.Header.Set("Accept-Encoding", "gzip")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("got status %d: %.200s", rec.Code, rec.Body)
				}
			}
		})
	}
}
