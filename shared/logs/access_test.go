package logs_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logs"
)

// Who may read logs with AUTH_MODE=authorizer (docs/behaviour.md "Identity and
// authorization"): admins and members of READ_GROUPS, or any authenticated
// caller when READ_GROUPS is empty; nobody without an identity. The identity is
// the one the edge put in the request's context (shared/slaves' access tests
// send each way API Gateway delivers one through the edge); a user record in a
// body never counts.

// serveAs serves a request from id (nil: no identity).
func serveAs(t *testing.T, h http.Handler, id *access.Identity, method, path, body string) result {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if id != nil {
		req = req.WithContext(access.WithIdentity(req.Context(), *id))
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return result{rec.Code, rec.Body.String(), rec.Header()}
}

// logReads are the four log lookups, each finding the two files that
// readable uploads for taskID.
var logReads = [][3]string{
	{"GET", "/api/logs/task/" + taskID, ""},
	{"GET", "/api/logs/request/web-api", ""},
	{"GET", "/api/logs/request/web-api/deploy/d1", ""},
	{"POST", "/api/logs/search", `{"taskIds":["` + taskID + `"]}`},
}

func readable() *recordingStore {
	f := newRecordingStore()
	uploaded(f.fakeStore, "logs", taskID, 2)
	return f
}

// found returns how many logs an answer of route holds.
func found(t *testing.T, route [3]string, r result) int {
	t.Helper()
	if route[0] == "POST" {
		return len(decode[page](t, r).Results)
	}
	return len(decode[[]logEntry](t, r))
}

var (
	withReaders = access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admins"}, ReadGroups: []string{"readers"}}
	onlyAdmins  = access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admins"}}
	anyone      = access.Policy{Mode: access.ModeAuthorizer}

	// stranger's groups look like the configured ones but are not them.
	stranger = &access.Identity{ID: "eve", Email: "eve@example.com", Groups: []string{"ops", "Readers", "readers-old", "administrators", "admins "}}
	reader   = &access.Identity{ID: "rita", Email: "rita@example.com", Groups: []string{"ops", "readers"}}
	admin    = &access.Identity{ID: "alice", Email: "alice@example.com", Groups: []string{"admins"}}
	// iamCaller is an IAM caller as the edge reads one: a user ARN and a
	// caller id, never groups. With READ_GROUPS set it may not read.
	iamCaller = &access.Identity{ID: "arn:aws:iam::123456789012:user/fleet-ci", Name: "AIDAJQABLZS4A3QDU576Q"}
)

func TestAccessLogReadsFollowReadGroups(t *testing.T) {
	tests := []struct {
		name    string
		policy  access.Policy
		who     *access.Identity
		status  int
		message string
	}{
		{"nobody is 401 with read groups", withReaders, nil, 401, "authentication required"},
		{"nobody is 401 without read groups", anyone, nil, 401, "authentication required"},
		{"a stranger is 403 with read groups", withReaders, stranger, 403, "eve must be part of one or more read groups: readers"},
		{"an IAM caller is 403 with read groups", withReaders, iamCaller, 403, iamCaller.ID + " must be part of one or more read groups: readers"},
		{"a caller without groups is 403 with read groups", withReaders, &access.Identity{ID: "bare"}, 403, "bare must be part of one or more read groups: readers"},
		{"a reader reads", withReaders, reader, 200, ""},
		{"an admin reads", withReaders, admin, 200, ""},
		{"a stranger reads without read groups", onlyAdmins, stranger, 200, ""},
		{"an IAM caller reads without read groups", onlyAdmins, iamCaller, 200, ""},
		{"anyone authenticated reads with no groups configured", anyone, iamCaller, 200, ""},
	}
	for _, tt := range tests {
		for _, route := range logReads {
			t.Run(tt.name+": "+route[0]+" "+route[1], func(t *testing.T) {
				f := readable()
				cfg := settings("logs")
				cfg.Policy = tt.policy
				r := serveAs(t, handler(t, f, cfg), tt.who, route[0], route[1], route[2])
				if cc := r.header.Get("Cache-Control"); cc != "no-store" {
					t.Errorf("got Cache-Control %q, want no-store", cc)
				}
				if tt.status == 200 {
					if n := found(t, route, r); n != 2 {
						t.Errorf("got %d logs, want 2", n)
					}
					return
				}
				r.wantError(t, tt.status, tt.message)
				f.untouched(t)
			})
		}
	}
}

func TestAccessLogBodiesNeverElevate(t *testing.T) {
	forgedUser := `{"id":"root","name":"Root","email":"root@example.com","groups":["admins","readers"],"authenticated":true}`
	forgedSearch := `{"taskIds":["` + taskID + `"],"id":"root","groups":["admins","readers"],"user":{"id":"root","groups":["readers"]}}`
	for _, route := range logReads {
		body := forgedUser
		if route[0] == "POST" {
			body = forgedSearch
		}
		t.Run(route[0]+" "+route[1], func(t *testing.T) {
			cfg := settings("logs")
			cfg.Policy = withReaders
			f := readable()
			h := handler(t, f, cfg)
			serveAs(t, h, stranger, route[0], route[1], body).wantError(t, 403, "eve must be part of one or more read groups: readers")
			serveAs(t, h, iamCaller, route[0], route[1], body).wantError(t, 403, iamCaller.ID+" must be part of one or more read groups: readers")
			serveAs(t, h, nil, route[0], route[1], body).wantError(t, 401, "authentication required")
			// Identity and permission come before the body (as in
			// docs/behaviour.md "User changes"): a refused caller learns nothing
			// from a bad body.
			serveAs(t, h, nil, route[0], route[1], "{not json").wantError(t, 401, "authentication required")
			serveAs(t, h, stranger, route[0], route[1], strings.Repeat(" ", 70000)).wantError(t, 403, "eve must be part of one or more read groups: readers")
			f.untouched(t)
			if n := found(t, route, serveAs(t, h, reader, route[0], route[1], body)); n != 2 {
				t.Errorf("a reader with the same body: got %d logs, want 2", n)
			}
		})
	}
	t.Run("with auth off, anyone reads and the body is only checked to be well formed", func(t *testing.T) {
		cfg := settings("logs")
		cfg.Policy = access.Policy{Mode: access.ModeNone, AdminGroups: []string{"admins"}, ReadGroups: []string{"readers"}}
		for _, route := range logReads {
			body := forgedUser
			if route[0] == "POST" {
				body = forgedSearch
			}
			if n := found(t, route, serveAs(t, handler(t, readable(), cfg), nil, route[0], route[1], body)); n != 2 {
				t.Errorf("%s %s: got %d logs, want 2", route[0], route[1], n)
			}
		}
	})
}

// urlTTL loads the log function's configuration with LOG_URL_TTL set to v.
func urlTTL(v string) (config.Logs, error) {
	return config.LoadLogs(func(name string) string {
		return map[string]string{"LOG_BUCKETS": "logs", "LOG_URL_TTL": v}[name]
	})
}

// acceptedTTLs are LOG_URL_TTL values within the cap, and what they mean.
var acceptedTTLs = map[string]time.Duration{
	"":              time.Hour, // the default
	"1s":            time.Second,
	"1h":            time.Hour,
	"90m":           90 * time.Minute,
	"11h59m59.999s": 12*time.Hour - time.Millisecond,
	"12h":           12 * time.Hour,
	"43200s":        12 * time.Hour,
	"720m":          12 * time.Hour,
}

func TestAccessPresignedURLLifetimeIsCappedAtConfigLoad(t *testing.T) {
	if config.MaxURLTTL != 12*time.Hour {
		t.Fatalf("got MaxURLTTL %v, want 12h (docs/behaviour.md, Task logs)", config.MaxURLTTL)
	}
	for v, want := range acceptedTTLs {
		t.Run(v+" is accepted", func(t *testing.T) {
			cfg, err := urlTTL(v)
			if err != nil || cfg.URLTTL != want || cfg.URLTTL > config.MaxURLTTL {
				t.Errorf("got %v (%v), want %v", cfg.URLTTL, err, want)
			}
		})
	}
	for _, v := range []string{
		"12h0m0.001s", "12h1ns", "43201s", "721m", "13h", "24h", "1d", "30d", "8760h",
		"2562047h", "9223372036854775807ns", "2562048h", "-1h", "0", "0s", "1e3h", "forever", "12 h",
	} {
		t.Run(v+" is refused", func(t *testing.T) {
			_, err := urlTTL(v)
			if err == nil || !strings.Contains(err.Error(), "LOG_URL_TTL") || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want one line naming LOG_URL_TTL", err)
			}
		})
	}
}

func TestAccessPresignedLinksLiveExactlyTheConfiguredTTL(t *testing.T) {
	for v, want := range acceptedTTLs {
		cfg, err := urlTTL(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, route := range logReads {
			t.Run(v+": "+route[0]+" "+route[1], func(t *testing.T) {
				f := readable()
				r := serveAs(t, handler(t, f, logs.Config(cfg)), nil, route[0], route[1], route[2])
				var entries []logEntry
				if route[0] == "POST" {
					entries = decode[page](t, r).Results
				} else {
					entries = decode[[]logEntry](t, r)
				}
				if len(entries) != 2 || len(f.ttls) != len(entries) {
					t.Fatalf("got %d logs and %d presign calls, want 2 and 2", len(entries), len(f.ttls))
				}
				for _, ttl := range f.ttls {
					if ttl != want || ttl > config.MaxURLTTL {
						t.Errorf("links presigned for %v, want %v (and never over %v)", ttl, want, config.MaxURLTTL)
					}
				}
				for _, e := range entries {
					if !strings.HasSuffix(e.GetURL, "?ttl="+want.String()) {
						t.Errorf("got getUrl %s, want the one presigned for %v", e.GetURL, want)
					}
				}
			})
		}
	}
	t.Run("lookups without links presign nothing", func(t *testing.T) {
		cfg, _ := urlTTL("")
		for _, route := range [][3]string{
			{"GET", "/api/logs/task/" + taskID + "?list=true", ""},
			{"GET", "/api/logs/request/web-api?list=TRUE", ""},
			{"POST", "/api/logs/search", `{"taskIds":["` + taskID + `"],"listOnly":true}`},
		} {
			f := readable()
			if n := found(t, route, serveAs(t, handler(t, f, logs.Config(cfg)), nil, route[0], route[1], route[2])); n != 2 || len(f.ttls) != 0 {
				t.Errorf("%s %s: got %d logs and %d presign calls, want 2 and none", route[0], route[1], n, len(f.ttls))
			}
		}
	})
}

func TestAuthorizerModeNeedsAReadGroup(t *testing.T) {
	cfg := settings("logs")
	cfg.Policy = access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admins"}, ReadGroups: []string{"readers"}}
	h := handler(t, &fakeStore{}, cfg)
	call := func(groups ...string) int {
		req := httptest.NewRequest("GET", "/api/logs/task/"+taskID, nil)
		if groups != nil {
			req = req.WithContext(access.WithIdentity(req.Context(), access.Identity{ID: "u", Groups: groups}))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := call(); got != 401 {
		t.Errorf("no identity: got %d, want 401", got)
	}
	if got := call("others"); got != 403 {
		t.Errorf("not a reader: got %d, want 403", got)
	}
	if got := call("readers"); got != 200 {
		t.Errorf("a reader: got %d, want 200", got)
	}
}
