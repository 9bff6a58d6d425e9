package slaves_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// boundedRoutes serves the slave routes over f, as Lambda does; every
// answer must match openapi.yaml.
func boundedRoutes(t *testing.T, f *memstore.Store) http.Handler {
	return apidoc.MustLoad(t).Recorder(t, web.Wrap(slaves.New(f, fuzzPolicy(authOff), fuzzLimits),
		web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
}

// entries returns the whole history of slave id in f, newest first.
func entries(t *testing.T, f *memstore.Store, id string) []machine.Update {
	t.Helper()
	h, err := f.History(t.Context(), id, time.Now(), slaves.MaxHistoryLimit)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
	return rec
}

func TestChangeMessagesAreAtMost4096Characters(t *testing.T) {
	tests := []struct {
		name    string
		message string
		status  int
	}{
		{"4096 characters that JSON escapes are accepted", strings.Repeat(`<"`, slaves.MaxMessage/2), 200},
		{"4096 characters of four bytes each are accepted", strings.Repeat("😀", slaves.MaxMessage), 200},
		{"4097 characters are refused, however few bytes", strings.Repeat("a", slaves.MaxMessage+1), 400},
		{"4097 characters of two bytes each are refused", strings.Repeat("é", slaves.MaxMessage+1), 400},
	}
	for _, action := range []string{"freeze", "decommission", "activate"} {
		for _, tt := range tests {
			t.Run(action+": "+tt.name, func(t *testing.T) {
				f := newFleet(false)
				id := activeID
				if action == "activate" {
					id = frozenID
				}
				before := len(entries(t, f, id))
				body, _ := json.Marshal(map[string]string{"message": tt.message})
				rec := serve(boundedRoutes(t, f), "POST", "/api/slaves/slave/"+id+"/"+action, string(body))
				if rec.Code != tt.status {
					t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.status)
				}
				after := entries(t, f, id)
				if tt.status != 200 {
					if want := `{"code":400,"message":"message must be at most 4096 characters"}` + "\n"; rec.Body.String() != want {
						t.Errorf("got %s, want %s", rec.Body, want)
					}
					if len(after) != before {
						t.Errorf("got %d history entries, want %d: a refused change writes nothing", len(after), before)
					}
					return
				}
				if len(after) != before+1 || after[0].Message != tt.message {
					t.Errorf("got %d entries, want one more holding the message", len(after))
				}
			})
		}
	}
}

func TestActionIDsAreAtMost255Characters(t *testing.T) {
	for _, tt := range []struct {
		actionID string
		status   int
	}{{strings.Repeat("é", slaves.MaxActionID), 200}, {strings.Repeat("a", slaves.MaxActionID+1), 400}} {
		f := newFleet(false)
		body, _ := json.Marshal(map[string]any{"actionId": tt.actionID, "durationMillis": 60000, "revertToState": "ACTIVE"})
		rec := serve(boundedRoutes(t, f), "POST", "/api/slaves/slave/"+activeID+"/freeze", string(body))
		if rec.Code != tt.status {
			t.Errorf("actionId of %d characters: got %d %s, want %d", len([]rune(tt.actionID)), rec.Code, rec.Body, tt.status)
		}
	}
}
