//go:build integration

package slaves_test

import (
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// MAX_DECOMMISSIONING_SLAVES=0 means no limit (the template's
// MaxDecommissioningSlaves accepts 0): every decommission is let through,
// however many slaves already decommission.
func TestNoDecommissionLimit(t *testing.T) {
	unlimited := machine.Limits{MaxDecommissioning: 0, MaxExpiring: 30 * 24 * time.Hour}
	h := apidoc.MustLoad(t).Recorder(t, web.Wrap(slaves.New(store, access.Policy{}, unlimited), web.Options{Logger: quiet}))
	ids := seed(t, "nolimit", 5)
	for _, id := range ids {
		call(t, h, "POST", "/api/slaves/slave/"+id+"/decommission", "").want(t, 200, "")
	}
	for _, id := range ids {
		if got := state(t, h, id); got != "STARTING_DECOMMISSION" {
			t.Errorf("%s: got %s, want STARTING_DECOMMISSION", id, got)
		}
		call(t, h, "POST", "/api/slaves/slave/"+id+"/activate", "").want(t, 200, "")
	}
}
