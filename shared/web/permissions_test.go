package web_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/console"
	"github.com/fleetops/fleet/shared/logs"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// TestEveryRouteDeclaresThePermissionItNeeds walks every route table of
// the service and holds it to docs/behaviour.md "Identity and
// authorization": looking needs read, changing and deleting need change,
// and only the console's page and assets are public. A route added to a
// table but not here, or registered with another permission, fails.
func TestEveryRouteDeclaresThePermissionItNeeds(t *testing.T) {
	ui, err := console.New(console.Config{Auth: console.AuthNone})
	if err != nil {
		t.Fatal(err)
	}
	tables := []struct {
		name   string
		routes *web.Routes
		want   map[string]access.Need
	}{
		{"slaves", slaves.New(nil, access.Policy{}, machine.Limits{}).Routes(), map[string]access.Need{
			"GET /api/slaves":                               access.Read,
			"GET /api/slaves/{$}":                           access.Read,
			"GET /api/slaves/expiring":                      access.Read,
			"GET /api/slaves/changes":                       access.Read,
			"GET /api/slaves/slave/{slaveId}/details":       access.Read,
			"GET /api/slaves/slave/{slaveId}":               access.Read,
			"POST /api/slaves/slave/{slaveId}/freeze":       access.Change,
			"POST /api/slaves/slave/{slaveId}/decommission": access.Change,
			"POST /api/slaves/slave/{slaveId}/activate":     access.Change,
			"DELETE /api/slaves/slave/{slaveId}":            access.Change,
			"DELETE /api/slaves/slave/{slaveId}/expiring":   access.Change,
			"DELETE /api/slaves/dead":                       access.Change,
			"POST /api/slaves/import":                       access.Change,
		}},
		{"logs", logs.New(nil, logs.Config{}).Routes(), map[string]access.Need{
			"GET /api/logs/task/{taskId}":                         access.Read,
			"GET /api/logs/request/{requestId}":                   access.Read,
			"GET /api/logs/request/{requestId}/deploy/{deployId}": access.Read,
			"POST /api/logs/search":                               access.Read,
		}},
		{"console", ui.Routes(), map[string]access.Need{
			"GET /": access.Anyone,
		}},
	}
	for _, tt := range tables {
		t.Run("the "+tt.name+" table", func(t *testing.T) {
			got := tt.routes.Needs()
			for _, pattern := range slices.Sorted(maps.Keys(got)) {
				want, ok := tt.want[pattern]
				switch {
				case !ok:
					t.Errorf("%s declares %v, and no permission is documented for it here", pattern, got[pattern])
				case got[pattern] != want:
					t.Errorf("%s declares %v, want %v", pattern, got[pattern], want)
				}
			}
			for _, pattern := range slices.Sorted(maps.Keys(tt.want)) {
				if _, ok := got[pattern]; !ok {
					t.Errorf("%s is not in the table, want it with %v", pattern, tt.want[pattern])
				}
			}
		})
	}
}
