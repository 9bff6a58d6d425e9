package logs_test

import (
	"testing"

	"github.com/fleetops/fleet/dev/apidoc"
)

// TestOpenAPIDescribesEveryRoute holds openapi.yaml and the route table
// together: the routes New registers are exactly the operations described
// under /api/logs, each described operation is served (probed through the
// real handler, whose answers must match), and no other method of a
// described path is.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := apidoc.MustLoad(t)
	served, err := apidoc.ServedRoutes("logs.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(served) == 0 {
		t.Fatal("got no routes in logs.go")
	}
	if err := doc.CompareRoutes("/api/logs", served); err != nil {
		t.Error(err)
	}
	f := &fakeStore{}
	uploaded(f, "logs", taskID, 2)
	doc.Probe(t, routes(f, settings("logs")), "/api/logs", map[string]string{"taskId": taskID, "requestId": "web-api", "deployId": "d1"})
}
