package slaves

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/fleetops/fleet/shared/fault"
)

// Bounds of a history answer. A slave changes state a few times a day at
// most, so the default covers months; the store reads no more entries than
// asked, which keeps a long history from costing reads nobody asked for.
const (
	// DefaultHistoryLimit is how many of the newest entries the history
	// answers without a limit parameter.
	DefaultHistoryLimit = 1000
	// MaxHistoryLimit is the largest limit parameter accepted.
	MaxHistoryLimit = 10000
)

// historyLimit reads the history's limit query parameter: a whole number
// from 1 to MaxHistoryLimit, DefaultHistoryLimit when absent. Anything else
// is fault.Invalid.
func historyLimit(r *http.Request) (int, error) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return DefaultHistoryLimit, nil
	}
	s := q.Get("limit")
	n, err := strconv.Atoi(s)
	if err != nil || strings.Trim(s, "0123456789") != "" || n < 1 || n > MaxHistoryLimit {
		return 0, fault.Invalid("query param limit must be a whole number from 1 to %d", MaxHistoryLimit)
	}
	return n, nil
}
