package edge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// FuzzHandler gives arbitrary bytes to the Lambda handler as its event,
// served by the real slave routes with auth off and behind the authorizer.
// The handler never panics; it either refuses a payload that is not a proxy
// event with an error wrapping ErrNotProxyEvent, or answers a proxy
// response in the event's payload format with a status below 500 (the
// store never fails), and with a 4xx body {"code": status, "message": ...};
// the answer of every request matches openapi.yaml.
func FuzzHandler(f *testing.F) {
	var files []string
	for _, pattern := range []string{filepath.Join("testdata", "*.json"), filepath.Join("..", "..", "events", "*.json")} {
		matches, err := filepath.Glob(pattern)
		if err != nil || len(matches) == 0 {
			f.Fatalf("got %v (%v) for %s, want sample events", matches, err, pattern)
		}
		files = append(files, matches...)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2]) // cut mid-event: not JSON at all
	}
	for _, s := range []string{
		`null`, `[]`, `{}`, `"GET"`, `{"httpMethod":""}`, `{"httpMethod":7}`,
		`{"httpMethod":"GET"}`,
		`{"httpMethod":"GET","path":"api/slaves"}`,
		`{"httpMethod":"GET","path":"/api/slaves","multiValueQueryStringParameters":{"state":["frozen","bogus"]},"queryStringParameters":{"state":"ACTIVE"}}`,
		`{"httpMethod":"POST","path":"/api/slaves/slave/` + slaveID + `/freeze","body":"@@","isBase64Encoded":true}`,
		`{"httpMethod":"POST","path":"/api/slaves/slave/` + slaveID + `/freeze","body":"{\"durationMillis\":1,\"revertToState\":\"ACTIVE\"}","headers":{"Idempotency-Key":"k"}}`,
		`{"httpMethod":"DELETE","path":"/api/slaves/slave/` + slaveID + `","requestContext":{"authorizer":{"principalId":"u","groups":"admin"}}}`,
		`{"version":"2.0","requestContext":{"http":{"method":"GET"}}}`,
		`{"version":"2.0","rawPath":"/api/slaves/slave/%2F/details","requestContext":{"http":{"method":"GET"}}}`,
		`{"version":"2.0","rawPath":"/api/slaves/slave/%zz","requestContext":{"http":{"method":"GET"}}}`,
		`{"version":"2.0","rawPath":"/api/slaves","requestContext":{"http":{"method":"GET"},"authorizer":{"jwt":{"claims":{"sub":"u","cognito:groups":7}}}}}`,
		`{"version":"2.0","rawPath":"/api/slaves/expiring","requestContext":{"http":{"method":"GET"},"authorizer":{"lambda":{"id":12345678901234567890,"groups":["readers"]}}}}`,
		`{"version":"2.0","rawPath":"/api/slaves/dead","requestContext":{"http":{"method":"DELETE"},"authorizer":{"iam":{"userArn":"arn:aws:iam::1:user/u"}}},"body":"AAEC","isBase64Encoded":true}`,
		`{"version":2,"httpMethod":"GET","path":"/api/slaves"}`,
	} {
		f.Add([]byte(s))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	policies := []access.Policy{
		{Mode: access.ModeNone},
		{Mode: access.ModeAuthorizer, AdminGroups: []string{"admin"}, ReadGroups: []string{"readers"}},
	}
	doc := apidoc.MustLoad(f)
	f.Fuzz(func(t *testing.T, event []byte) {
		// Lambda always gives a deadline, which the handler shortens.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, policy := range policies {
			routes := slaves.New(newRoutesStore(), policy, machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour})
			h := web.Wrap(routes, web.Options{Logger: quiet, RequestID: RequestID})
			out, err := Handler(h)(ctx, event)
			if err != nil {
				if !errors.Is(err, ErrNotProxyEvent) {
					t.Fatalf("got error %v, want a proxy response or ErrNotProxyEvent", err)
				}
				continue
			}
			checkProxyResponse(t, event, out)
			checkDescribed(t, doc, event, out)
		}
	})
}

// checkDescribed checks out, the answer to event, against openapi.yaml;
// the 400 of a malformed event answers no route, so it is left out.
func checkDescribed(t *testing.T, doc *apidoc.Doc, event, out json.RawMessage) {
	t.Helper()
	r, _, err := Request(context.Background(), event)
	if err != nil {
		return
	}
	var a answer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("got %s, want a proxy response (%v)", out, err)
	}
	body := []byte(a.Body)
	if a.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(a.Body); err != nil {
			t.Fatalf("got a body marked base64 that is not: %v", err)
		}
	}
	header := http.Header{}
	for k, v := range a.Headers {
		header.Set(k, v)
	}
	for k, vs := range a.MultiValueHeaders {
		header[http.CanonicalHeaderKey(k)] = vs
	}
	if err := doc.CheckAny(r, a.StatusCode, header, body); err != nil {
		t.Errorf("%s %s: answer does not match %s: %v", r.Method, r.URL.RequestURI(), apidoc.File, err)
	}
}

// checkProxyResponse checks out, the answer to event, against the proxy
// response format of the event's payload version and docs/behaviour.md "Wire conventions".
func checkProxyResponse(t *testing.T, event, out json.RawMessage) {
	t.Helper()
	var probe struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(event, &probe); err != nil {
		t.Fatalf("got a proxy response to %q, which is not a JSON object: %v", event, err)
	}
	var fields map[string]json.RawMessage
	var a answer
	if err := json.Unmarshal(out, &fields); err != nil || json.Unmarshal(out, &a) != nil {
		t.Fatalf("got %s, want a proxy response (%v)", out, err)
	}
	// Only payload 2.0 responses carry cookies; only payload 1.0 ones fill
	// multiValueHeaders.
	_, cookies := fields["cookies"]
	if v2 := probe.Version == "2.0"; cookies != v2 || (!v2 && a.MultiValueHeaders == nil) {
		t.Errorf("got %s to an event of version %q, want the response format of that version", out, probe.Version)
	}
	if a.StatusCode < 200 || a.StatusCode >= 500 {
		t.Fatalf("got status %d (%s), want 2xx to 4xx from a store that never fails", a.StatusCode, out)
	}
	body := []byte(a.Body)
	if a.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(a.Body); err != nil {
			t.Fatalf("got a body marked base64 that is not: %v", err)
		}
	}
	contentType := a.Headers["Content-Type"]
	if vs := a.MultiValueHeaders["Content-Type"]; len(vs) > 0 {
		contentType = vs[0]
	}
	if contentType != "application/json" {
		t.Errorf("got Content-Type %q on %d, want application/json", contentType, a.StatusCode)
	}
	if a.StatusCode < 300 {
		if len(body) > 0 && !json.Valid(body) {
			t.Errorf("got %d with body %q, want JSON or nothing", a.StatusCode, body)
		}
		return
	}
	var e web.ErrorBody
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil || d.More() {
		t.Fatalf("got %d with body %q, want a JSON error body (%v)", a.StatusCode, body, err)
	}
	if e.Code != a.StatusCode || e.Message == "" {
		t.Errorf("got error body %+v on %d, want code %d and a message", e, a.StatusCode, a.StatusCode)
	}
}

// routesStore is the slave routes' store at its smallest: slaves in a map,
// each change decided by the machine package on a snapshot and kept. It
// lets the real routes answer every 2xx and 4xx they can without AWS; the
// slaves package's fuzz target has the fake with the adapter's full
// semantics (history, expiring records, the limit, receipts).
type routesStore struct {
	mu     sync.Mutex
	slaves map[string]machine.Slave
}

func newRoutesStore() *routesStore {
	s := &routesStore{slaves: map[string]machine.Slave{}}
	for id, state := range map[string]machine.State{slaveID: machine.Active, "S2": machine.Frozen, "S3": machine.Dead} {
		s.slaves[id] = machine.Slave{ID: id, FirstSeenAt: 1, Current: machine.Update{SlaveID: id, State: state, Timestamp: 1}, RackID: "DEFAULT"}
	}
	return s
}

func (s *routesStore) Get(ctx context.Context, id string) (*machine.Slave, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl, ok := s.slaves[id]; ok {
		return &sl, nil
	}
	return nil, nil
}

func (s *routesStore) List(ctx context.Context, each func(machine.Slave) error) error {
	return s.ListByState(ctx, "", each)
}

func (s *routesStore) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	for _, sl := range s.inState(state) {
		if err := each(sl); err != nil {
			return err
		}
	}
	return nil
}

func (s *routesStore) inState(state machine.State) []machine.Slave {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []machine.Slave
	for _, id := range slices.Sorted(maps.Keys(s.slaves)) {
		if sl := s.slaves[id]; state == "" || sl.Current.State == state {
			out = append(out, sl)
		}
	}
	return out
}

func (s *routesStore) History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error) {
	sl, _ := s.Get(ctx, id)
	if sl == nil {
		return nil, nil
	}
	return []machine.Update{sl.Current}, nil
}

func (s *routesStore) ListExpiring(ctx context.Context, now time.Time) ([]machine.Expiring, error) {
	return nil, nil
}

func (s *routesStore) ApplyOnce(ctx context.Context, id string, once machine.Idempotency, decide machine.Decide) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var snap machine.Snapshot
	if sl, ok := s.slaves[id]; ok {
		snap.Slave = &sl
	}
	plan, err := decide(snap)
	if err == nil && plan != nil && plan.Entry != nil {
		s.slaves[id] = plan.Slave
	}
	return err
}

func (s *routesStore) Delete(ctx context.Context, id string, match func(machine.Slave) bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slaves[id]
	if !ok || match != nil && !match(sl) {
		return false, nil
	}
	delete(s.slaves, id)
	return true, nil
}

func (s *routesStore) DeleteDead(ctx context.Context, before int64) (int, error) {
	dead := s.inState(machine.Dead)
	for _, sl := range dead {
		s.Delete(ctx, sl.ID, nil)
	}
	return len(dead), nil
}

func (s *routesStore) DeleteExpiring(ctx context.Context, id string) error { return nil }
