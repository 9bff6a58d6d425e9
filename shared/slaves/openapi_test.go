package slaves_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// TestOpenAPIDescribesEveryRoute holds openapi.yaml and the route table
// together: the routes New registers are exactly the operations described
// under /api/slaves, each described operation is served (probed through the
// real handler, whose answers must match), and no other method of a
// described path is.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := apidoc.MustLoad(t)
	served, err := apidoc.ServedRoutes("slaves.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(served) == 0 {
		t.Fatal("got no routes in slaves.go")
	}
	if err := doc.CompareRoutes("/api/slaves", served); err != nil {
		t.Error(err)
	}
	h := web.Wrap(slaves.New(newFleet(false), fuzzPolicy(authOff), fuzzLimits),
		web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	doc.Probe(t, h, "/api/slaves", map[string]string{"slaveId": activeID})
}
