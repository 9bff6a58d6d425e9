//go:build integration

package slaves_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
)

// These tests put a concurrent write exactly between a change's read and its
// write: the decision callback runs there, so a write made from inside it is
// one that won the race.

func TestAUserChangeNeverWritesBackTheDescriptionItRead(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "race-describe", 1)[0]
	now := time.Now().UnixMilli()
	refresh := machine.Observation{ID: id, Host: "refreshed.example.com", RackID: "us-east-1b", Attributes: map[string]string{"generation": "2"}, At: now}
	freeze := machine.UserChange(machine.Change{SlaveID: id, Target: machine.Frozen, Now: func() int64 { return now }}, limits)
	refreshed := false
	err := store.Apply(context.Background(), id, func(snap machine.Snapshot) (*machine.Plan, error) {
		if !refreshed {
			refreshed = true
			if err := store.Apply(context.Background(), id, machine.Observe(refresh, now)); err != nil {
				return nil, err
			}
		}
		return freeze(snap)
	})
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, h, "GET", "/api/slaves/slave/"+id+"/details", "")
	r.want(t, 200, "*")
	got := decode[slave](t, r.body)
	if got.CurrentState.State != "FROZEN" || got.Host != refresh.Host || got.RackID != refresh.RackID || got.Attributes["generation"] != "2" {
		t.Errorf("got %s on %s in %s with %v, want FROZEN with the refreshed description", got.CurrentState.State, got.Host, got.RackID, got.Attributes)
	}
}

func TestAChangeThatLostARaceIsStampedWhenItIsDecidedAgainAndNeverBeforeTheEntryItFollows(t *testing.T) {
	h := api(t, access.Policy{})
	id := seed(t, "race-time", 1)[0]
	start := time.Now().UnixMilli()
	// This instance's clock reads start, then, on the retry, 100 ms later;
	// the change that wins the race, a loss the scheduler saw, is 200 ms
	// ahead of it.
	readings := []int64{start, start + 100}
	clock := func() int64 {
		v := readings[0]
		if len(readings) > 1 {
			readings = readings[1:]
		}
		return v
	}
	freeze := machine.UserChange(machine.Change{SlaveID: id, Target: machine.Frozen, Now: clock}, limits)
	lost := machine.Observe(machine.Observation{ID: id, Lost: true, At: start + 200}, start+200)
	won := false
	err := store.Apply(context.Background(), id, func(snap machine.Snapshot) (*machine.Plan, error) {
		if !won {
			won = true
			if err := store.Apply(context.Background(), id, lost); err != nil {
				return nil, err
			}
		}
		return freeze(snap)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := history(t, h, id)
	if len(got) != 3 || got[0].State != "FROZEN" || got[1].State != "DEAD" {
		t.Fatalf("got history %+v, want FROZEN after DEAD after the report", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Timestamp < got[i].Timestamp {
			t.Errorf("entry %d (%s) at %d is older than the entry before it (%s at %d)", i-1, got[i-1].State, got[i-1].Timestamp, got[i].State, got[i].Timestamp)
		}
	}
	if got[0].Timestamp < start+200 {
		t.Errorf("got the freeze stamped %d, want no earlier than the loss it follows (%d)", got[0].Timestamp, start+200)
	}
}

func TestHistoryRetentionCountsFromWhenAnEntryWasSuperseded(t *testing.T) {
	h := api(t, access.Policy{})
	id := "retention-S0"
	t.Cleanup(func() { _, _ = store.Delete(context.Background(), id, nil) })
	// A machine first reported 100 days ago, longer than the 90-day
	// retention, and unchanged since.
	long := time.Now().Add(-100 * 24 * time.Hour).UTC().Format(time.RFC3339)
	report(t, fmt.Sprintf(`{"detail-type":"Machine Report","time":%q,"detail":{"machines":[{"id":%q,"host":"h"}]}}`, long, id))
	call(t, h, "POST", "/api/slaves/slave/"+id+"/freeze", "").want(t, 200, "")
	got := history(t, h, id)
	if len(got) != 2 || got[0].State != "FROZEN" || got[1].State != "ACTIVE" {
		t.Errorf("got history %+v, want FROZEN and the ACTIVE it left", got)
	}
}

func TestADecommissionOrderingTimeFromTheFutureDoesNotPushOtherSlavesForward(t *testing.T) {
	h := api(t, access.Policy{})
	ids := seed(t, "race-future", 2)
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = store.Delete(context.Background(), id, nil)
		}
	})
	unlimited := machine.Limits{MaxExpiring: limits.MaxExpiring}
	decommission := func(id string, at int64) {
		t.Helper()
		c := machine.Change{SlaveID: id, Target: machine.StartingDecommission, Now: func() int64 { return at }}
		if err := store.Apply(context.Background(), id, machine.UserChange(c, unlimited)); err != nil {
			t.Fatal(err)
		}
	}
	// A change stamped by a clock a day ahead (as a report from a skewed
	// scheduler was, before report times were clamped) left the
	// decommissioning set's ordering time in the future.
	ahead := time.Now().Add(24 * time.Hour).UnixMilli()
	decommission(ids[0], ahead)
	now := time.Now().UnixMilli()
	decommission(ids[1], now)
	if got := history(t, h, ids[1])[0]; got.Timestamp != now {
		t.Errorf("got the other slave's decommission stamped %d, want the time it was made, %d", got.Timestamp, now)
	}
}
