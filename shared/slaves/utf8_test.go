package slaves_test

import (
	"strings"
	"testing"
	"time"
)

// TestBodiesThatAreNotUTF8AreRefusedAndChangeNothing sends every route that
// takes a body a message holding a byte that is not UTF-8 (Latin-1 "é"): the
// JSON decoder would store it as U+FFFD, a message nobody sent.
func TestBodiesThatAreNotUTF8AreRefusedAndChangeNothing(t *testing.T) {
	const body = "{\"message\":\"caf\xe9\",\"user\":\"ops\xff@example.com\",\"durationMillis\":60000,\"revertToState\":\"ACTIVE\"}"
	for _, tt := range []struct{ method, path, id string }{
		{"POST", "/freeze", activeID},
		{"POST", "/decommission", activeID},
		{"POST", "/activate", frozenID},
		{"DELETE", "", deadID},
		{"DELETE", "/expiring", frozenID},
		{"GET", "/details", activeID},
		{"GET", "", activeID},
	} {
		t.Run(tt.method+" slave"+tt.path, func(t *testing.T) {
			f := newFleet(false)
			before := entries(t, f, tt.id)
			beforeExpiring, _ := f.ListExpiring(t.Context(), time.Now())
			rec := serve(boundedRoutes(t, f), tt.method, "/api/slaves/slave/"+tt.id+tt.path, body)
			if want := `{"code":400,"message":"request body is not valid UTF-8"}` + "\n"; rec.Code != 400 || rec.Body.String() != want {
				t.Fatalf("got %d %s, want 400 %s", rec.Code, rec.Body, want)
			}
			after := entries(t, f, tt.id)
			if len(after) != len(before) || after[0] != before[0] {
				t.Errorf("got history %+v, want %+v: a refused body changes nothing", after, before)
			}
			if afterExpiring, _ := f.ListExpiring(t.Context(), time.Now()); len(afterExpiring) != len(beforeExpiring) {
				t.Errorf("got %d expiring records, want %d", len(afterExpiring), len(beforeExpiring))
			}
		})
	}
	t.Run("a list with a user record", func(t *testing.T) {
		rec := serve(boundedRoutes(t, newFleet(false)), "GET", "/api/slaves", body)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), "not valid UTF-8") {
			t.Errorf("got %d %s, want a 400 naming UTF-8", rec.Code, rec.Body)
		}
	})
}
