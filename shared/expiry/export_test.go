package expiry

import "time"

// SetClock makes r read the time from now.
func SetClock(r *Runner, now func() time.Time) { r.now = now }
