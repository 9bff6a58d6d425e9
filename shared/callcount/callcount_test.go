package callcount_test

import (
	"context"
	"sync"
	"testing"

	"github.com/fleetops/fleet/shared/callcount"
)

func TestACounterInTheContextCountsCallsFromEveryGoroutine(t *testing.T) {
	ctx, c := callcount.With(context.Background())
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() { callcount.From(ctx).Add(i%4 == 0) })
	}
	wg.Wait()
	if c.Calls() != 64 || c.Throttled() != 16 {
		t.Errorf("got %d calls, %d throttled, want 64 and 16", c.Calls(), c.Throttled())
	}
}

func TestWithoutACounterNothingIsCounted(t *testing.T) {
	c := callcount.From(context.Background())
	if c != nil {
		t.Fatalf("got counter %v, want nil", c)
	}
	c.Add(true)
	if c.Calls() != 0 || c.Throttled() != 0 {
		t.Errorf("got %d calls, %d throttled, want 0 and 0", c.Calls(), c.Throttled())
	}
}
