//go:build integration

package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/machine"
)

// A list's calls are in proportion to the table and to what changed: it
// scans in as many segments as the fleet it last read pays for (eight on
// an instance that has not listed yet, one for a small fleet after that),
// and walks back only the feed's shards written within ListSettle.
func TestAListsCallsAreInProportionToTheFleetAndItsChanges(t *testing.T) {
	store, c, tables := importStore(t)
	// The fleet was imported a minute ago: every shard has settled.
	store.SetClock(func() time.Time { return time.Now().Add(-time.Minute) })
	at := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 12 {
		if _, err := importWith(t, store, oldHistory(fmt.Sprintf("S%d", i), 2, at), machine.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	store.SetClock(time.Now)
	list := func(t *testing.T, slaves int) map[string]int {
		t.Helper()
		c.take()
		n := 0
		if _, _, err := store.Listed(t.Context(), func(ctx context.Context) error {
			return store.List(ctx, func(machine.Slave) error { n++; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		_, _, by := c.take()
		if n != slaves {
			t.Errorf("got %d slaves, want %d", n, slaves)
		}
		return by
	}
	for i, want := range []map[string]int{
		{"Scan": 8, "BatchGetItem": 2, "GetItem": 2, "PutItem": 1}, // the instance's first list, the feed's key made
		{"Scan": 1, "BatchGetItem": 2},
	} {
		if got := list(t, 12); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("list %d: got calls %v, want %v", i+1, got, want)
		}
	}
	t.Run("a list stops at its caller's error, in one segment or eight", func(t *testing.T) {
		fresh := dynamo.New(local.DynamoDB, tables, 0) // has not listed: eight segments
		for _, s := range []*dynamo.Store{store, fresh} {
			stop := errors.New("enough")
			n := 0
			err := s.List(t.Context(), func(machine.Slave) error {
				if n++; n == 3 {
					return stop
				}
				return nil
			})
			if err != stop || n != 3 {
				t.Errorf("got %v after %d slaves, want the caller's error after 3", err, n)
			}
		}
	})
	t.Run("a shard written just now is walked back, alone", func(t *testing.T) {
		if _, err := importWith(t, store, oldHistory("S-new", 2, at), machine.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
		// The new slave's shard: one Query walks back from its head, one
		// reads the change the list may have missed.
		got := list(t, 13)
		if want := map[string]int{"Scan": 1, "BatchGetItem": 2, "Query": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("got calls %v, want %v", got, want)
		}
	})
}
