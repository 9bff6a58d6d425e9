package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// script serves answers in turn and records what each attempt sent.
type script struct {
	mu       sync.Mutex
	answers  []func(w http.ResponseWriter, r *http.Request)
	requests []*http.Request
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, r)
	s.mu.Unlock()
	if n >= len(s.answers) {
		http.Error(w, "no more answers", http.StatusTeapot)
		return
	}
	s.answers[n](w, r)
}

func status(code int, retryAfter, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(body))
	}
}

// hang never answers: it holds the request until its client gives up, so
// that an attempt timeout is the only way out, however slow the machine.
func hang(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // then net/http notices the client leaving
	<-r.Context().Done()
}

// newTest returns a client of s whose waits between attempts are recorded
// instead of slept.
func newTest(t *testing.T, s *script, opts Options) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	opts.Endpoint = srv.URL
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	return c, &waits
}

func TestA503IsRetriedAfterItsRetryAfterWithTheSameIdempotencyKey(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter, *http.Request){
		status(503, "3", `{"code":503,"message":"DynamoDB is busy, try again"}`),
		status(503, "1", `{"code":503,"message":"DynamoDB is busy, try again"}`),
		status(200, "", ``),
	}}
	c, waits := newTest(t, s, Options{})
	if err := c.FreezeSlave(context.Background(), "a/b", ChangeRequest{Message: "disk"}, ChangeOptions{}); err != nil {
		t.Fatalf("got %v, want success on the third attempt", err)
	}
	if got, want := *waits, []time.Duration{3 * time.Second, time.Second}; !slices.Equal(got, want) {
		t.Errorf("got waits %v, want %v (the Retry-After of each 503)", got, want)
	}
	key := s.requests[0].Header.Get("Idempotency-Key")
	if key == "" {
		t.Fatal("got no Idempotency-Key on a change")
	}
	for i, r := range s.requests {
		if got := r.Header.Get("Idempotency-Key"); got != key {
			t.Errorf("attempt %d: got Idempotency-Key %q, want %q as on the first", i+1, got, key)
		}
		if r.URL.EscapedPath() != "/api/slaves/slave/a%2Fb/freeze" {
			t.Errorf("attempt %d: got path %s, want the id as one escaped segment", i+1, r.URL.EscapedPath())
		}
	}
}

func TestEachChangeGetsItsOwnKeyUnlessOneIsGiven(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter, *http.Request){status(200, "", ""), status(200, "", ""), status(200, "", "")}}
	c, _ := newTest(t, s, Options{})
	ctx := context.Background()
	_ = c.ActivateSlave(ctx, "S1", ChangeRequest{}, ChangeOptions{})
	_ = c.ActivateSlave(ctx, "S1", ChangeRequest{}, ChangeOptions{})
	_ = c.ActivateSlave(ctx, "S1", ChangeRequest{}, ChangeOptions{IdempotencyKey: "maint-42"})
	k1, k2, k3 := s.requests[0].Header.Get("Idempotency-Key"), s.requests[1].Header.Get("Idempotency-Key"), s.requests[2].Header.Get("Idempotency-Key")
	if k1 == k2 {
		t.Errorf("got the key %q for two changes, want one each", k1)
	}
	if k3 != "maint-42" {
		t.Errorf("got key %q, want the given maint-42", k3)
	}
}

func TestTimeoutsAreRetriedForReadsAndKeyedChangesOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		send     func(c *Client) error
		attempts int
	}{
		{"a read", func(c *Client) error { _, err := c.GetSlave(context.Background(), "S1"); return err }, 2},
		{"a keyed change", func(c *Client) error {
			return c.FreezeSlave(context.Background(), "S1", ChangeRequest{}, ChangeOptions{})
		}, 2},
		{"a delete that would answer 404 when sent again", func(c *Client) error { return c.DeleteSlave(context.Background(), "S1") }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{answers: []func(http.ResponseWriter, *http.Request){
				hang,
				status(200, "", `{"id":"S1","firstSeenAt":1,"currentState":{"objectId":"S1","state":"ACTIVE","timestamp":1},"host":"h","rackId":"r","attributes":{}}`),
			}}
			// The second attempt has the same timeout, and answers at once:
			// a second is room for it on a busy machine.
			c, _ := newTest(t, s, Options{AttemptTimeout: time.Second})
			err := tc.send(c)
			if len(s.requests) != tc.attempts {
				t.Errorf("got %d attempts (last error %v), want %d", len(s.requests), err, tc.attempts)
			}
			if tc.attempts == 1 {
				var terr *TransportError
				if !errors.As(err, &terr) || !IsUnavailable(err) {
					t.Errorf("got %v, want a *TransportError that IsUnavailable", err)
				}
			} else if err != nil {
				t.Errorf("got %v, want success after the retry", err)
			}
		})
	}
}

func TestErrorsCarryTheStatusCodeAndMessage(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter, *http.Request){
		status(409, "", `{"code":409,"message":"FAILURE_ALREADY_AT_STATE - Slave S1 is in FROZEN state"}`),
		status(502, "", `<html>Bad Gateway</html>`),
	}}
	c, waits := newTest(t, s, Options{})
	err := c.FreezeSlave(context.Background(), "S1", ChangeRequest{}, ChangeOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Status != 409 || e.Code != 409 || e.Message != "FAILURE_ALREADY_AT_STATE - Slave S1 is in FROZEN state" || e.Operation != "freezeSlave" {
		t.Fatalf("got %#v, want the 409's code and message", err)
	}
	if !IsConflict(err) || IsNotFound(err) || IsUnavailable(err) {
		t.Errorf("got the wrong class for %v", err)
	}
	if len(*waits) != 0 {
		t.Errorf("got waits %v, want a 409 never retried", *waits)
	}
	_, err = c.ListSlaves(context.Background(), "")
	if !errors.As(err, &e) || e.Status != 502 || !strings.Contains(e.Message, "Bad Gateway") {
		t.Errorf("got %v, want a 502 *Error naming the body", err)
	}
}

func TestAttemptsStopAtMaxAttempts(t *testing.T) {
	busy := status(503, "0", `{"code":503,"message":"busy"}`)
	s := &script{answers: []func(http.ResponseWriter, *http.Request){busy, busy, busy, busy, busy}}
	c, _ := newTest(t, s, Options{MaxAttempts: 3})
	_, err := c.ListExpiring(context.Background())
	if len(s.requests) != 3 || StatusOf(err) != 503 {
		t.Errorf("got %d attempts and %v, want 3 and the last 503", len(s.requests), err)
	}
}

func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter, *http.Request){status(200, "", `[{"objectId":"S1","state":"ACTIVE","timestamp":5,"colour":"red"}]`)}}
	c, _ := newTest(t, s, Options{Strict: true})
	if _, err := c.GetSlaveHistory(context.Background(), "S1", 0); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("got %v, want an error naming the unknown field", err)
	}
}

func TestBearerAndDefaultHeadersAreSent(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter, *http.Request){status(200, "", `[]`)}}
	c, _ := newTest(t, s, Options{Auth: Bearer("tok"), Header: http.Header{"X-Team": {"ops"}}})
	if _, err := c.ListSlaves(context.Background(), "frozen"); err != nil {
		t.Fatal(err)
	}
	r := s.requests[0]
	if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Team") != "ops" || r.URL.Query().Get("state") != "frozen" {
		t.Errorf("got headers %v and query %q", r.Header, r.URL.RawQuery)
	}
}

// A stack whose authorizer reads another header (its AuthHeader) gets the
// token there, and no Authorization header at all.
func TestATokenGoesInTheHeaderTheAuthorizerReads(t *testing.T) {
	s := &script{answers: []func(http.ResponseWriter, *http.Request){status(200, "", `[]`)}}
	c, _ := newTest(t, s, Options{Auth: Token{Header: "X-Fleet-Token", Value: "tok"}})
	if _, err := c.ListSlaves(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	r := s.requests[0]
	if r.Header.Get("X-Fleet-Token") != "Bearer tok" || r.Header.Get("Authorization") != "" {
		t.Errorf("got headers %v, want the token in X-Fleet-Token only", r.Header)
	}
}
