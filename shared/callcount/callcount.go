// Package callcount counts the backend calls one request or one scheduled
// run makes, so that its log line and its metrics can say what it cost the
// backends. The counter travels in the context: the AWS SDK middleware of
// sdkconfig adds to it, and whoever started the work (web.Wrap, the
// scheduled jobs) reads it. It is a package of its own so that the HTTP side
// can read the count without importing the AWS SDK.
package callcount

import (
	"context"
	"sync/atomic"
)

// Counter counts calls; it is safe for concurrent use, as a log lookup makes
// its calls from many goroutines. The methods of a nil *Counter do nothing
// and count zero, so code that runs without one needs no check.
type Counter struct {
	calls, throttled atomic.Int64
}

type key struct{}

// With returns a context carrying a new counter, and the counter.
func With(ctx context.Context) (context.Context, *Counter) {
	c := &Counter{}
	return context.WithValue(ctx, key{}, c), c
}

// From returns the counter ctx carries, or nil.
func From(ctx context.Context) *Counter {
	c, _ := ctx.Value(key{}).(*Counter)
	return c
}

// Add counts one call (one attempt: a retried call counts each time it was
// sent), and whether the backend refused it for throttling.
func (c *Counter) Add(throttled bool) {
	if c == nil {
		return
	}
	c.calls.Add(1)
	if throttled {
		c.throttled.Add(1)
	}
}

// Calls returns the calls counted so far.
func (c *Counter) Calls() int64 {
	if c == nil {
		return 0
	}
	return c.calls.Load()
}

// Throttled returns the calls counted so far that were throttled.
func (c *Counter) Throttled() int64 {
	if c == nil {
		return 0
	}
	return c.throttled.Load()
}
