//go:build integration

package dynamo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/machine"
)

// A list scans in as many segments as the fleet it last read pays for:
// eight on an instance that has not listed yet, one for a small fleet
// after that, and every slave either way.
func TestAListScansInSegmentsTheLastListPaysFor(t *testing.T) {
	store, c, _ := importStore(t)
	at := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 12 {
		if _, err := importWith(t, store, oldHistory(fmt.Sprintf("S%d", i), 2, at), machine.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{8, 1, 1} {
		c.take()
		n := 0
		if err := store.List(t.Context(), func(machine.Slave) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		_, _, by := c.take()
		if n != 12 || by["Scan"] != want {
			t.Errorf("got %d slaves in %d Scan calls, want 12 in %d", n, by["Scan"], want)
		}
	}
}
