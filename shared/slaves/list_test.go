package slaves

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/web"
)

// shuffledStore hands its slaves over in an order of its own, as the
// parallel scan does; only the list methods are implemented.
type shuffledStore struct {
	Store
	slaves []machine.Slave
}

func (s shuffledStore) List(ctx context.Context, each func(machine.Slave) error) error {
	return s.ListByState(ctx, "", each)
}

func (s shuffledStore) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	for _, sl := range s.slaves {
		if state == "" || sl.Current.State == state {
			if err := each(sl); err != nil {
				return err
			}
		}
	}
	return nil
}

// Listed reads the list and answers it as the state of a cursor of its own.
func (s shuffledStore) Listed(ctx context.Context, list func(context.Context) error) (map[string]*machine.Slave, string, error) {
	return nil, "cursor", list(ctx)
}

// listedAsBefore answers a list as the route did before it encoded slaves
// one by one: every slave decoded and sorted, then the one body that
// json.Marshal writes, which Wrap fits within Budget.
func listedAsBefore(slaves []machine.Slave, state machine.State) http.Handler {
	return web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sorted := slices.Clone(slaves)
		slices.SortFunc(sorted, func(a, b machine.Slave) int { return strings.Compare(a.ID, b.ID) })
		out := []slaveJSON{}
		for _, s := range sorted {
			if state == "" || s.Current.State == state {
				out = append(out, toSlaveJSON(s))
			}
		}
		body, err := json.Marshal(out)
		if err != nil {
			panic(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// awkwardFleet returns n slaves in no order, with every state, ids whose
// escaped JSON sorts otherwise than they do ('<' is \u003c), text JSON
// escapes (quotes, '<', '&', U+2028, control characters), other scripts,
// no or many attributes, resources or none; attrSize more characters of
// attributes each, half of them '<'.
func awkwardFleet(rng *rand.Rand, n, attrSize int) []machine.Slave {
	texts := []string{"plain", `quote " and \ backslash`, "<b>&amp;</b>", "line\u2028para\u2029", "tab\tnew\nline\x01",
		"é漢字😀", "", "Ω≈ç√", "\u00a0nbsp"}
	text := func() string { return texts[rng.IntN(len(texts))] }
	slaves := make([]machine.Slave, n)
	for i := range slaves {
		id := fmt.Sprintf("s-%05d", i)
		switch i % 5 {
		case 1:
			id = fmt.Sprintf("s<%05d", i)
		case 2:
			id = fmt.Sprintf("s=%05d-é", i)
		case 3:
			id = fmt.Sprintf("S-%05d-漢", i)
		}
		s := machine.Slave{
			ID:          id,
			FirstSeenAt: 1_700_000_000_000 + int64(i),
			Current: machine.Update{SlaveID: id, State: machine.States[i%len(machine.States)], Timestamp: 1_700_000_000_000 + int64(i)*7,
				User: text(), Message: text()},
			Host:   "node-" + text(),
			RackID: text(),
		}
		if i%4 != 0 {
			s.Attributes = map[string]string{"zone": text(), "<k>": text(), "é": "1"}
		}
		if attrSize > 0 {
			b := make([]byte, attrSize)
			for j := range b {
				b[j] = "<abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(2)*(1+rng.IntN(36))]
			}
			s.Attributes = map[string]string{"big": string(b)}
		}
		if i%3 != 0 {
			s.Resources = json.RawMessage(`{"cpus":16,"mem":63000.5,"ports":"[31000-32000]","note":"<&>"}`)
		}
		slaves[i] = s
	}
	rng.Shuffle(len(slaves), func(i, j int) { slaves[i], slaves[j] = slaves[j], slaves[i] })
	return slaves
}

func TestTheListAnswersTheSameBytesAsWhenItHeldEverySlave(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	fleets := []struct {
		name   string
		slaves []machine.Slave
	}{
		{"an empty fleet", nil},
		{"a few slaves, too few to compress", awkwardFleet(rng, 3, 0)},
		{"a hundred slaves", awkwardFleet(rng, 100, 0)},
		{"20,000 slaves", awkwardFleet(rng, 20_000, 0)},
		{"slaves with large attributes", awkwardFleet(rng, 150, 60_000)},
	}
	for _, f := range fleets {
		for _, state := range []machine.State{"", machine.Frozen} {
			for _, gz := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s, state %q, gzip %v", f.name, state, gz), func(t *testing.T) {
					target := "/api/slaves"
					if state != "" {
						target += "?state=" + strings.ToLower(string(state))
					}
					get := func(h http.Handler) *httptest.ResponseRecorder {
						req := httptest.NewRequest(http.MethodGet, target, nil)
						if gz {
							req.Header.Set("Accept-Encoding", "gzip")
						}
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, req)
						return rec
					}
					want := get(listedAsBefore(f.slaves, state))
					got := get(web.Wrap(New(shuffledStore{slaves: f.slaves}, access.Policy{}, machine.Limits{}),
						web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
					if got.Code != want.Code {
						t.Errorf("got status %d, want %d", got.Code, want.Code)
					}
					for _, h := range []string{"Content-Type", "Content-Encoding", "Vary"} {
						if g, w := got.Header().Values(h), want.Header().Values(h); !slices.Equal(g, w) {
							t.Errorf("got %s %q, want %q", h, g, w)
						}
					}
					if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
						t.Errorf("got a body of %d bytes, want the %d bytes of before", got.Body.Len(), want.Body.Len())
					}
				})
			}
		}
	}
}
