package slaves_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
)

// fleetWithHistory returns a fleet whose active slave has n history
// entries, the newest with message "n-1".
func fleetWithHistory(n int) *memstore.Store {
	f := newFleet(false)
	history := make([]machine.Update, n)
	for i := range history {
		history[i] = machine.Update{SlaveID: activeID, State: machine.Active, Timestamp: seededAt + int64(i), Message: fmt.Sprint(i)}
	}
	f.Put(machine.Slave{ID: activeID, FirstSeenAt: seededAt, Current: history[n-1], RackID: "us-east-1a"}, history...)
	return f
}

func TestHistoryAnswersTheNewestEntriesUpToItsLimit(t *testing.T) {
	h := boundedRoutes(t, fleetWithHistory(slaves.MaxHistoryLimit+5))
	for _, tt := range []struct {
		name, query string
		want        int
	}{
		{"without a limit, the newest 1000", "", 1000},
		{"limit 1 answers the newest entry", "?limit=1", 1},
		{"limit 10000 is the most", "?limit=10000", 10000},
		{"a limit with leading zeros is the same number", "?limit=007", 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(h, "GET", "/api/slaves/slave/"+activeID+tt.query, "")
			var got []struct{ Message string }
			if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != 200 || err != nil {
				t.Fatalf("got %d %.200s, want 200 and a JSON array", rec.Code, rec.Body)
			}
			if len(got) != tt.want || got[0].Message != fmt.Sprint(slaves.MaxHistoryLimit+4) {
				t.Errorf("got %d entries starting with %q, want the newest %d", len(got), got[0].Message, tt.want)
			}
		})
	}
	for _, q := range []string{"0", "10001", "-1", "+5", "1.5", "1e3", "", "ten", "99999999999999999999"} {
		t.Run("limit "+q+" is a 400 naming the parameter and its range", func(t *testing.T) {
			rec := serve(h, "GET", "/api/slaves/slave/"+activeID+"?limit="+q, "")
			if want := `{"code":400,"message":"query param limit must be a whole number from 1 to 10000"}` + "\n"; rec.Code != 400 || rec.Body.String() != want {
				t.Errorf("got %d %s, want 400 %s", rec.Code, rec.Body, want)
			}
		})
	}
}
