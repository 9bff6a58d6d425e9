package logs

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"
)

// missingBuckets collects the buckets of LOG_BUCKETS that one lookup found
// missing. A bucket that does not exist is the operator's misconfiguration,
// not the caller's mistake: the lookup answers what the other buckets hold
// and makes the missing ones visible (docs/behaviour.md "Task logs").
type missingBuckets struct {
	mu    sync.Mutex
	names map[string]bool
}

// skip reports whether err is the store's fault.NotFound, which a listing
// returns only when its bucket does not exist, and then notes the bucket.
func (m *missingBuckets) skip(bucket string, err error) bool {
	if fault.KindOf(err) != fault.KindNotFound {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names == nil {
		m.names = map[string]bool{}
	}
	m.names[bucket] = true
	return true
}

// report makes the missing buckets visible, once per lookup: a
// MissingLogBuckets metric, which an alarm watches, and an error log line
// naming them. When no configured bucket exists there is nothing to answer
// with: the lookup fails with an internal error (a 500, logged with the
// names by web.Error).
func (m *missingBuckets) report(r *http.Request, configured []string) error {
	if len(m.names) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(m.names))
	web.Metrics(r).Emit(nil, metrics.Metric{Name: metrics.MissingLogBuckets, Value: float64(len(names)), Unit: metrics.Count})
	if !slices.ContainsFunc(configured, func(b string) bool { return !m.names[b] }) {
		return fmt.Errorf("no bucket of LOG_BUCKETS exists: %s", strings.Join(names, ", "))
	}
	web.LogError(r, "log buckets of LOG_BUCKETS do not exist; answered with what the others hold", "missing_buckets", names)
	return nil
}
