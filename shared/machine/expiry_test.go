package machine

import "testing"

func TestExpireDecidesEachDueRecordBySpecRules(t *testing.T) {
	due := someExpiring(Active)
	now := due.DueAt() + 1
	tests := []struct {
		name    string
		snap    Snapshot
		now     int64
		want    Outcome
		wantNil bool // no plan: nothing is written
	}{
		{"a slave with no record is left alone", Snapshot{Slave: someSlave(Frozen)}, now, Superseded, true},
		{"a record exactly at its due time is left alone", Snapshot{Slave: someSlave(Frozen), Expiring: due}, due.DueAt(), Superseded, true},
		{"a due record of a gone slave is dropped", Snapshot{Expiring: due}, now, Dropped, false},
		{"a due revert to the current state is skipped", Snapshot{Slave: someSlave(Active), Expiring: due}, now, Skipped, false},
		{"a due illegal revert is skipped", Snapshot{Slave: someSlave(Decommissioning), Expiring: someExpiring(Frozen)}, now, Skipped, false},
		{"a due legal revert is applied", Snapshot{Slave: someSlave(Frozen), Expiring: due}, now, Applied, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Outcome
			plan, err := Expire(slaveID, clockAt(tt.now), testLimits, &got)(tt.snap)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got != tt.want {
				t.Errorf("outcome: got %q, want %q", got, tt.want)
			}
			if (plan == nil) != tt.wantNil {
				t.Fatalf("plan: got %+v, want nil %v", plan, tt.wantNil)
			}
			if plan != nil && !plan.DropExpiring {
				t.Errorf("plan keeps the record; want it deleted in every case")
			}
			if plan != nil && tt.want != Applied && plan.Entry != nil {
				t.Errorf("plan writes history entry %+v; want only the record deleted", plan.Entry)
			}
		})
	}
}

func TestExpireRevertsWithTheRecordsUserAndTheSpecMessage(t *testing.T) {
	for _, revert := range []State{Active, Frozen, StartingDecommission, Decommissioned} {
		t.Run("revert to "+string(revert), func(t *testing.T) {
			e := someExpiring(revert)
			e.User = "operator@example.com"
			from := Frozen
			if revert == Frozen {
				from = Active
			}
			now := e.DueAt() + 5
			var outcome Outcome
			plan, err := Expire(slaveID, clockAt(now), testLimits, &outcome)(Snapshot{Slave: someSlave(from), Expiring: e})
			if err != nil || plan == nil {
				t.Fatalf("got plan %v, error %v; want a plan", plan, err)
			}
			want := Update{SlaveID: slaveID, State: revert, Timestamp: now, User: "operator@example.com", Message: ExpiryMessage}
			if plan.Entry == nil || *plan.Entry != want || plan.Slave.Current != want {
				t.Errorf("entry: got %+v (current %+v), want %+v", plan.Entry, plan.Slave.Current, want)
			}
			wantLimit := 0
			if revert == StartingDecommission {
				wantLimit = testLimits.MaxDecommissioning
			}
			if plan.Limit != wantLimit {
				t.Errorf("limit: got %d, want %d", plan.Limit, wantLimit)
			}
		})
	}
}

func TestExpireAppliesExactlyTheRevertsTheTransitionMatrixAllows(t *testing.T) {
	for _, current := range States {
		for _, revert := range []State{Active, Frozen, StartingDecommission, Decommissioned} {
			e := someExpiring(revert)
			var got Outcome
			if _, err := Expire(slaveID, clockAt(e.DueAt()+1), testLimits, &got)(Snapshot{Slave: someSlave(current), Expiring: e}); err != nil {
				t.Fatalf("%s -> %s: got error %v", current, revert, err)
			}
			want := Applied
			if CheckTransition(slaveID, current, revert) != nil {
				want = Skipped
			}
			if got != want {
				t.Errorf("%s reverting to %s: got %q, want %q", current, revert, got, want)
			}
		}
	}
}

// clockAt is a clock that always reads ms.
func clockAt(ms int64) func() int64 { return func() int64 { return ms } }
