package logs

import "time"

// SetClock makes h read the time from now.
func SetClock(h *Handler, now func() time.Time) { h.now = now }
