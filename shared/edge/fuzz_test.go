package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// FuzzHandler gives arbitrary bytes to the Lambda handler as its event,
// served by the real slave routes with auth off and behind the authorizer.
// The handler never panics; it either refuses a payload that is not a proxy
// event with an error wrapping ErrNotProxyEvent, or answers in the
// streaming format with a status below 500 (the store never fails), and
// with a 4xx body {"code": status, "message": ...}; the answer of every
// request matches openapi.yaml.
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
			a, err := serve(ctx, h, event)
			if err != nil {
				if !errors.Is(err, ErrNotProxyEvent) {
					t.Fatalf("got error %v, want an answer or ErrNotProxyEvent", err)
				}
				continue
			}
			checkAnswer(t, a)
			checkDescribed(t, doc, event, a)
		}
	})
}

// checkDescribed checks a, the answer to event, against openapi.yaml;
// the 400 of a malformed event answers no route, so it is left out.
func checkDescribed(t *testing.T, doc *apidoc.Doc, event json.RawMessage, a answer) {
	t.Helper()
	r, _, err := Request(context.Background(), event)
	if err != nil {
		return
	}
	header := http.Header{}
	for k, v := range a.Headers {
		header.Set(k, v)
	}
	if err := doc.CheckAny(r, a.StatusCode, header, []byte(a.Body)); err != nil {
		t.Errorf("%s %s: answer does not match %s: %v", r.Method, r.URL.RequestURI(), apidoc.File, err)
	}
}

// checkAnswer checks a against docs/behaviour.md "Wire conventions".
func checkAnswer(t *testing.T, a answer) {
	t.Helper()
	if a.StatusCode < 200 || a.StatusCode >= 500 {
		t.Fatalf("got status %d (%+v), want 2xx to 4xx from a store that never fails", a.StatusCode, a)
	}
	body := []byte(a.Body)
	if a.Headers["Content-Encoding"] == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == nil {
			body, err = io.ReadAll(zr)
		}
		if err != nil {
			t.Fatalf("got a gzip body that does not read: %v", err)
		}
	}
	if want := map[bool]string{true: "application/json", false: ""}[len(body) > 0]; a.Headers["Content-Type"] != want {
		t.Errorf("got Content-Type %q on %d with %d bytes of body, want %q", a.Headers["Content-Type"], a.StatusCode, len(body), want)
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

// newRoutesStore returns a store with an ACTIVE, a FROZEN and a DEAD slave,
// so that the real routes answer every 2xx and 4xx they can without AWS.
func newRoutesStore() *memstore.Store {
	s := memstore.New(0)
	for id, state := range map[string]machine.State{slaveID: machine.Active, "S2": machine.Frozen, "S3": machine.Dead} {
		s.Put(machine.Slave{ID: id, FirstSeenAt: 1, Current: machine.Update{SlaveID: id, State: state, Timestamp: 1}, RackID: "DEFAULT"})
	}
	return s
}
