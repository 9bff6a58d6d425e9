//go:build integration

package inventory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
)

// TestOversizedEntriesAreSkippedOverDynamoDB sends reports to DynamoDB on
// moto, which refuses items over 400 KB as DynamoDB does: an entry whose
// description cannot be stored is skipped and counted, and the rest of the
// report applies, instead of the whole report failing on every retry.
func TestOversizedEntriesAreSkippedOverDynamoDB(t *testing.T) {
	ctx := context.Background()
	// The package's moto, on tables of this test alone: the complete report
	// below must find no other test's machines absent.
	store, _ := emptyFleet(t)
	h := inventory.New(store, machine.NoLossBrake, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	entry := func(id string, note int) map[string]any {
		return map[string]any{"id": id, "host": id + ".example.com", "rackId": "r1", "resources": map[string]int{"cpus": 16},
			"attributes": map[string]string{"note": strings.Repeat("x", note)}}
	}
	send := func(t *testing.T, complete bool, machines ...map[string]any) inventory.Result {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"complete": complete, "machines": machines})
		res, err := h.Handle(ctx, body)
		if err != nil {
			t.Fatalf("got %v, want the report applied", err)
		}
		return res
	}
	state := func(t *testing.T, id string) machine.State {
		t.Helper()
		s, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return ""
		}
		return s.Current.State
	}

	t.Run("one entry of 450 KB among good ones", func(t *testing.T) {
		res := send(t, false, entry("good-1", 10), entry("huge", 450_000), entry("good-2", 10))
		if res.Invalid != 1 || res.Failed != 0 {
			t.Errorf("got %+v, want 1 invalid and none failed", res)
		}
		for _, id := range []string{"good-1", "good-2"} {
			if got := state(t, id); got != machine.Active {
				t.Errorf("%s: got %q, want ACTIVE", id, got)
			}
		}
		if got := state(t, "huge"); got != "" {
			t.Errorf("huge: got %q, want it not stored", got)
		}
	})
	t.Run("a known machine grown too large is not taken for absent", func(t *testing.T) {
		res := send(t, true, entry("good-1", 10), entry("good-2", 450_000))
		if res.Invalid != 1 || res.Absent != 0 {
			t.Errorf("got %+v, want 1 invalid and none absent", res)
		}
		if got := state(t, "good-2"); got != machine.Active {
			t.Errorf("got %s, want ACTIVE", got)
		}
	})
	t.Run("a description at the bound leaves room for the longest message", func(t *testing.T) {
		frame := len("edge.example.com") + len("r1") + len(`{"cpus":16}`) + len("note") + 4
		if res := send(t, false, entry("edge", machine.MaxDescription-frame)); res.Invalid != 0 {
			t.Fatalf("got %+v, want the entry stored", res)
		}
		message := strings.Repeat("😀", 4096)
		freeze := machine.Change{SlaveID: "edge", Target: machine.Frozen, Request: machine.ChangeRequest{Message: message},
			User: strings.Repeat("u", 256) + "@example.com", Now: func() int64 { return time.Now().UnixMilli() }}
		if err := store.Apply(ctx, "edge", machine.UserChange(freeze, machine.Limits{})); err != nil {
			t.Fatalf("freeze with a message of %d bytes: %v", len(message), err)
		}
		if got := state(t, "edge"); got != machine.Frozen {
			t.Errorf("got %s, want FROZEN", got)
		}
	})
}

// TestAnEntryOfTenMegabytesIsSkippedAndTheRestApplies sends a report object
// in which one entry is 10 MB, more than the function holds of an entry
// (inventory.MaxValueBytes): it is read past, skipped and counted, the rest
// applies, and the complete report does not take that machine for absent.
func TestAnEntryOfTenMegabytesIsSkippedAndTheRestApplies(t *testing.T) {
	store, h := emptyFleet(t)
	upload(t, "reports/first.jsonl", reportBody(true, up("T1", "T2", "T3"), true), true)
	if res, err := h.Handle(t.Context(), objectEvent(time.Now(), local.ReportsBucket, "reports/first.jsonl")); err != nil || res.Machines != 3 {
		t.Fatalf("got %+v, %v, want 3 machines applied", res, err)
	}
	huge := fmt.Sprintf(`{"host":"t2.example.com","attributes":{"note":%q},"id":"T2"}`, strings.Repeat("x", 10<<20))
	machines := append(up("T1"), huge)
	machines = append(machines, up("T3", "T4")...)
	upload(t, "reports/huge.jsonl", reportBody(true, machines, true), true)
	res, err := h.Handle(t.Context(), objectEvent(time.Now().Add(time.Second), local.ReportsBucket, "reports/huge.jsonl"))
	if err != nil {
		t.Fatalf("got %v, want the report applied", err)
	}
	if res.Machines != 4 || res.Invalid != 1 || res.Absent != 0 || res.Failed != 0 {
		t.Errorf("got %+v, want 4 machines, 1 invalid, none absent, none failed", res)
	}
	want := map[string]machine.State{"T1": machine.Active, "T2": machine.Active, "T3": machine.Active, "T4": machine.Active}
	if got := states(t, store); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
