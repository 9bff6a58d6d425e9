//go:build integration

package slaves_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// Access control with AUTH_MODE=authorizer, through the real edge adapter:
// every request is an API Gateway proxy event built from a captured fixture
// of shared/edge/testdata, changed only in its route, body and identity.

// gatewayEvent is a captured proxy event, decoded with its numbers kept as
// written.
type gatewayEvent map[string]any

func loadEvent(t *testing.T, file string) gatewayEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "edge", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return decodeEvent(t, raw)
}

func decodeEvent(t *testing.T, raw []byte) gatewayEvent {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var e gatewayEvent
	if err := d.Decode(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e gatewayEvent) v2() bool { return e["version"] == "2.0" }

func (e gatewayEvent) requestContext() map[string]any { return e["requestContext"].(map[string]any) }

// to points the event at method and target (an escaped path and an
// optional query), with body ("" for none), in the event's own format.
func (e gatewayEvent) to(method, target, body string) gatewayEvent {
	path, query, _ := strings.Cut(target, "?")
	values, _ := url.ParseQuery(query)
	rc := e.requestContext()
	if e.v2() {
		e["rawPath"], e["rawQueryString"], e["routeKey"] = path, query, "$default"
		rc["routeKey"] = "$default"
		rc["http"].(map[string]any)["method"] = method
		rc["http"].(map[string]any)["path"] = path
		single := map[string]any{}
		for k := range values {
			single[k] = values.Get(k)
		}
		e["queryStringParameters"] = single
		delete(e, "pathParameters")
	} else {
		e["httpMethod"], e["path"], e["resource"] = method, path, "/{proxy+}"
		rc["httpMethod"], rc["path"], rc["resourcePath"] = method, "/prod"+path, "/{proxy+}"
		single, multi := map[string]any{}, map[string]any{}
		for k, vs := range values {
			single[k] = vs[len(vs)-1]
			multi[k] = vs
		}
		e["queryStringParameters"], e["multiValueQueryStringParameters"] = single, multi
		e["pathParameters"] = nil
	}
	e["isBase64Encoded"] = false
	if body == "" {
		e["body"] = nil
	} else {
		e["body"] = body
	}
	return e
}

// person is a caller as an identity provider describes it.
type person struct {
	id, email string
	groups    []string
}

// delivery is one way API Gateway hands the function a caller.
type delivery struct {
	name, file string
	// as makes the event's caller p; anonymous removes every identity.
	as        func(e gatewayEvent, p person)
	anonymous func(e gatewayEvent)
	// groups tells whether the delivery carries groups and email at all:
	// IAM callers have neither (edge reads only the user ARN and caller id),
	// so with ADMIN_GROUPS set they are never admins, and with READ_GROUPS
	// set they may not read; with none configured they are, and may.
	groups bool
	// groupsField returns the object holding the caller's groups, and the
	// groups' key there, for a test to write them in a form of its own.
	groupsField func(e gatewayEvent) (map[string]any, string)
}

func setOrDelete(m map[string]any, key string, value any, keep bool) {
	if keep {
		m[key] = value
	} else {
		delete(m, key)
	}
}

var deliveries = []delivery{
	{
		name: "REST API Cognito claims", file: "rest-cognito.json", groups: true,
		groupsField: func(e gatewayEvent) (map[string]any, string) {
			return e.requestContext()["authorizer"].(map[string]any)["claims"].(map[string]any), "cognito:groups"
		},
		as: func(e gatewayEvent, p person) {
			claims := e.requestContext()["authorizer"].(map[string]any)["claims"].(map[string]any)
			claims["cognito:username"], claims["sub"] = p.id, "sub-"+p.id
			setOrDelete(claims, "email", p.email, p.email != "")
			// REST APIs deliver the group claim as "[a, b]".
			setOrDelete(claims, "cognito:groups", "["+strings.Join(p.groups, ", ")+"]", p.groups != nil)
		},
		anonymous: func(e gatewayEvent) { delete(e.requestContext(), "authorizer") },
	},
	{
		name: "REST API Lambda authorizer context", file: "rest-lambda-authorizer.json", groups: true,
		groupsField: func(e gatewayEvent) (map[string]any, string) {
			return e.requestContext()["authorizer"].(map[string]any), "groups"
		},
		as: func(e gatewayEvent, p person) {
			auth := e.requestContext()["authorizer"].(map[string]any)
			auth["principalId"] = p.id
			setOrDelete(auth, "email", p.email, p.email != "")
			// A REST API context holds only strings, numbers and booleans:
			// groups go as a comma-separated string.
			setOrDelete(auth, "groups", strings.Join(p.groups, ", "), p.groups != nil)
		},
		anonymous: func(e gatewayEvent) { delete(e.requestContext(), "authorizer") },
	},
	{
		name: "HTTP API Lambda authorizer context", file: "http-lambda-authorizer.json", groups: true,
		groupsField: func(e gatewayEvent) (map[string]any, string) {
			return e.requestContext()["authorizer"].(map[string]any)["lambda"].(map[string]any), "groups"
		},
		as: func(e gatewayEvent, p person) {
			auth := e.requestContext()["authorizer"].(map[string]any)["lambda"].(map[string]any)
			auth["userId"] = p.id
			setOrDelete(auth, "email", p.email, p.email != "")
			groups, _ := json.Marshal(p.groups)
			setOrDelete(auth, "groups", string(groups), p.groups != nil)
		},
		anonymous: func(e gatewayEvent) { delete(e.requestContext(), "authorizer") },
	},
	{
		name: "HTTP API JWT claims", file: "http-jwt.json", groups: true,
		groupsField: func(e gatewayEvent) (map[string]any, string) {
			return e.requestContext()["authorizer"].(map[string]any)["jwt"].(map[string]any)["claims"].(map[string]any), "cognito:groups"
		},
		as: func(e gatewayEvent, p person) {
			claims := e.requestContext()["authorizer"].(map[string]any)["jwt"].(map[string]any)["claims"].(map[string]any)
			claims["username"], claims["sub"] = p.id, "sub-"+p.id
			setOrDelete(claims, "email", p.email, p.email != "")
			// HTTP APIs deliver the group claim as "[a b]", which reads as
			// the one group "a b": with several groups, a caller here is
			// in none of them.
			setOrDelete(claims, "cognito:groups", "["+strings.Join(p.groups, " ")+"]", p.groups != nil)
		},
		anonymous: func(e gatewayEvent) { delete(e.requestContext(), "authorizer") },
	},
	{
		name: "REST API IAM caller", file: "rest-iam.json",
		as: func(e gatewayEvent, p person) {
			e.requestContext()["identity"].(map[string]any)["userArn"] = p.id
		},
		anonymous: func(e gatewayEvent) {
			id := e.requestContext()["identity"].(map[string]any)
			id["userArn"], id["caller"], id["user"], id["accessKey"], id["accountId"] = nil, nil, nil, nil, nil
		},
	},
	{
		name: "HTTP API IAM caller", file: "http-iam.json",
		as: func(e gatewayEvent, p person) {
			e.requestContext()["authorizer"].(map[string]any)["iam"].(map[string]any)["userArn"] = p.id
		},
		anonymous: func(e gatewayEvent) { delete(e.requestContext(), "authorizer") },
	},
}

// gatewayCall sends method target body as caller through d, to the slave
// routes under policy, as the Lambda function serves them. edits change the
// event last.
func gatewayCall(t *testing.T, policy access.Policy, d delivery, who *person, method, target, body string, edits ...func(gatewayEvent)) response {
	t.Helper()
	e := loadEvent(t, d.file).to(method, target, body)
	if who == nil {
		d.anonymous(e)
	} else {
		d.as(e, *who)
	}
	for _, edit := range edits {
		edit(e)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	h := web.Wrap(slaves.New(store, policy, limits), web.Options{Logger: quiet, RequestID: edge.RequestID})
	res, err := edge.StreamHandler(h)(context.Background(), raw)
	if err != nil {
		t.Fatalf("%s %s: got error %v, want an answer", method, target, err)
	}
	answered, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, target, err)
	}
	a := struct {
		StatusCode int
		Headers    map[string]string
		Body       string
	}{res.StatusCode, res.Headers, string(answered)}
	header := http.Header{}
	for k, v := range a.Headers {
		header.Set(k, v)
	}
	req, _, err := edge.Request(context.Background(), raw)
	if err != nil {
		t.Fatalf("%s %s: got %v, want the event as a request", method, target, err)
	}
	if err := apidoc.MustLoad(t).CheckAny(req, a.StatusCode, header, []byte(a.Body)); err != nil {
		t.Errorf("%s %s: answer does not match %s: %v", method, target, apidoc.File, err)
	}
	return response{a.StatusCode, a.Body, header}
}

// principal names a caller of d: an IAM user ARN for IAM deliveries, whose
// callers have no email or groups.
func principal(d delivery, name string, groups ...string) *person {
	if !d.groups {
		return &person{id: "arn:aws:iam::123456789012:user/" + name}
	}
	return &person{id: name, email: name + "@example.com", groups: groups}
}

var adminsAndReaders = access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admin"}, ReadGroups: []string{"readers"}}

// changeRoutes are the admin-only routes, aimed at slaves where each would
// succeed for an admin (see hostileSlaves).
func changeRoutes(active, dead string) [][2]string {
	return [][2]string{
		{"POST", "/api/slaves/slave/" + active + "/freeze"},
		{"POST", "/api/slaves/slave/" + active + "/decommission"},
		{"POST", "/api/slaves/slave/" + dead + "/freeze"},
		{"POST", "/api/slaves/slave/" + dead + "/decommission"},
		{"POST", "/api/slaves/slave/" + dead + "/activate"},
		{"DELETE", "/api/slaves/slave/" + active},
		{"DELETE", "/api/slaves/slave/" + dead},
		{"DELETE", "/api/slaves/slave/" + active + "/expiring"},
		{"DELETE", "/api/slaves/dead"},
	}
}

func TestAccessChangesAreForAdminsOnly(t *testing.T) {
	active, dead := hostileSlaves(t, "acl")
	before := snapshot(t, active, dead)
	// Identity and permission are checked before the body is read
	// (docs/behaviour.md "User changes"), so a body that would be valid, or
	// invalid, makes no difference.
	bodies := []string{"", `{"durationMillis":60000,"revertToState":"ACTIVE"}`, "{not json"}
	for _, d := range deliveries {
		nonAdmin := principal(d, "mallory", "ops", "readers", "administrators", "Admin", "admin-readonly")
		t.Run(d.name+": nobody and a non-admin change nothing", func(t *testing.T) {
			for _, route := range changeRoutes(active, dead) {
				for _, body := range bodies {
					gatewayCall(t, adminsAndReaders, d, nil, route[0], route[1], body).wantError(t, 401, "authentication required")
					gatewayCall(t, adminsAndReaders, d, nonAdmin, route[0], route[1], body).
						wantError(t, 403, nonAdmin.id+" must be part of one or more admin groups: admin")
				}
			}
			unchanged(t, before, active, dead)
		})
		// The same events, from an admin, do change the slaves: the
		// refusals above are the policy's, not a broken gatewayEvent.
		t.Run(d.name+": an admin may change", func(t *testing.T) {
			own := "acl-own-" + strings.ReplaceAll(strings.ToLower(d.name), " ", "-")
			reportUp(t, own)
			policy, admin := adminsAndReaders, principal(d, "alice", "admin")
			if !d.groups {
				policy.AdminGroups = nil // the only way an IAM caller is an admin
			}
			gatewayCall(t, policy, d, admin, "POST", "/api/slaves/slave/"+own+"/freeze", "").want(t, 200, "")
			if got := state(t, api(t, access.Policy{}), own); got != "FROZEN" {
				t.Errorf("got %s, want FROZEN", got)
			}
			gatewayCall(t, policy, d, admin, "DELETE", "/api/slaves/slave/"+own, "").want(t, 200, "")
		})
	}
}

func TestAccessBodyUserNeverElevatesNorNamesTheActor(t *testing.T) {
	active, dead := hostileSlaves(t, "elevate")
	before := snapshot(t, active, dead)
	forged := `{"id":"root","name":"Root","email":"root@forged.example","groups":["admin","readers"],"authenticated":true}`
	forgedChange := `{"message":"m","user":"root@forged.example","email":"root@forged.example","id":"root","groups":["admin"],` +
		`"user_record":{"id":"root","groups":["admin"]},"authenticated":true}`
	for _, d := range deliveries {
		nonAdmin := principal(d, "mallory", "ops")
		t.Run(d.name+": a forged admin user record changes nothing", func(t *testing.T) {
			for _, route := range changeRoutes(active, dead) {
				body := forged
				if route[0] == "POST" {
					body = forgedChange
				}
				gatewayCall(t, adminsAndReaders, d, nonAdmin, route[0], route[1], body).
					wantError(t, 403, nonAdmin.id+" must be part of one or more admin groups: admin")
			}
			unchanged(t, before, active, dead)
		})
		t.Run(d.name+": nobody with a forged admin record is still nobody", func(t *testing.T) {
			gatewayCall(t, adminsAndReaders, d, nil, "DELETE", "/api/slaves/dead", forged).wantError(t, 401, "authentication required")
			gatewayCall(t, adminsAndReaders, d, nil, "GET", "/api/slaves", forged).wantError(t, 401, "authentication required")
			unchanged(t, before, active, dead)
		})
		t.Run(d.name+": a forged reader record does not let a stranger read", func(t *testing.T) {
			stranger := principal(d, "eve", "ops")
			r := gatewayCall(t, adminsAndReaders, d, stranger, "GET", "/api/slaves/slave/"+active+"/details", forged)
			r.wantError(t, 403, stranger.id+" must be part of one or more read groups: readers")
		})
		t.Run(d.name+": history and the expiring record name the authenticated caller", func(t *testing.T) {
			own := "elevate-own-" + strings.ReplaceAll(strings.ToLower(d.name), " ", "-")
			reportUp(t, own)
			policy, admin := adminsAndReaders, principal(d, "alice", "admin")
			if !d.groups {
				policy.AdminGroups = nil
			}
			gatewayCall(t, policy, d, admin, "POST", "/api/slaves/slave/"+own+"/freeze",
				`{"message":"m","durationMillis":60000,"revertToState":"ACTIVE","user":"root@forged.example","email":"root@forged.example"}`).want(t, 200, "")
			h := api(t, access.Policy{})
			hist := history(t, h, own)
			recs := listExpiring(t, h, own)
			if len(recs) != 1 {
				t.Fatalf("got %d expiring records, want 1", len(recs))
			}
			got := []*string{hist[0].User, recs[0].User}
			for i, u := range got {
				switch {
				case admin.email == "" && u != nil:
					t.Errorf("entry %d: got user %q, want none (an IAM caller has no email)", i, *u)
				case admin.email != "" && (u == nil || *u != admin.email):
					t.Errorf("entry %d: got user %v, want %s", i, u, admin.email)
				}
			}
			gatewayCall(t, policy, d, admin, "DELETE", "/api/slaves/slave/"+own, forged).want(t, 200, "")
		})
		if d.groups {
			t.Run(d.name+": an admin without an email leaves no user, not the body's", func(t *testing.T) {
				own := "elevate-noemail-" + strings.ReplaceAll(strings.ToLower(d.name), " ", "-")
				reportUp(t, own)
				admin := &person{id: "svc-admin", groups: []string{"admin"}}
				gatewayCall(t, adminsAndReaders, d, admin, "POST", "/api/slaves/slave/"+own+"/freeze",
					`{"message":"m","user":"root@forged.example","email":"root@forged.example"}`).want(t, 200, "")
				if hist := history(t, api(t, access.Policy{}), own); hist[0].User != nil {
					t.Errorf("got user %q, want none", *hist[0].User)
				}
			})
		}
	}
}

// readRoutes are every read of the slave routes.
func readRoutes(id string) []string {
	return []string{
		"/api/slaves", "/api/slaves/", "/api/slaves?state=frozen", "/api/slaves?state=",
		"/api/slaves/slave/" + id + "/details", "/api/slaves/slave/" + id, "/api/slaves/expiring",
	}
}

func TestAccessReadsFollowReadGroups(t *testing.T) {
	id := "acl-read"
	reportUp(t, id)
	before := snapshot(t, id)
	onlyAdmins := access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"admin"}}
	anyone := access.Policy{Mode: access.ModeAuthorizer}
	for _, d := range deliveries {
		stranger, reader, admin := principal(d, "eve", "ops"), principal(d, "rita", "readers"), principal(d, "alice", "admin")
		for _, path := range readRoutes(id) {
			t.Run(d.name+": GET "+path, func(t *testing.T) {
				gatewayCall(t, adminsAndReaders, d, nil, "GET", path, "").wantError(t, 401, "authentication required")
				gatewayCall(t, anyone, d, nil, "GET", path, "").wantError(t, 401, "authentication required")
				// An IAM caller has no groups: with READ_GROUPS set it is a
				// stranger whatever it is called.
				gatewayCall(t, adminsAndReaders, d, stranger, "GET", path, "").
					wantError(t, 403, stranger.id+" must be part of one or more read groups: readers")
				if d.groups {
					gatewayCall(t, adminsAndReaders, d, reader, "GET", path, "").want(t, 200, "*")
					gatewayCall(t, adminsAndReaders, d, admin, "GET", path, "").want(t, 200, "*")
					gatewayCall(t, adminsAndReaders, d, &person{id: "nogroups"}, "GET", path, "").
						wantError(t, 403, "nogroups must be part of one or more read groups: readers")
				}
				// Without READ_GROUPS any authenticated caller reads, admin or not.
				gatewayCall(t, onlyAdmins, d, stranger, "GET", path, "").want(t, 200, "*")
				gatewayCall(t, anyone, d, stranger, "GET", path, "").want(t, 200, "*")
			})
		}
		t.Run(d.name+": a reader reads the same slave as a read with auth off", func(t *testing.T) {
			who := reader
			policy := adminsAndReaders
			if !d.groups {
				policy = onlyAdmins
			}
			r := gatewayCall(t, policy, d, who, "GET", "/api/slaves/slave/"+id+"/details", "")
			r.want(t, 200, call(t, api(t, access.Policy{}), "GET", "/api/slaves/slave/"+id+"/details", "").body)
		})
	}
	unchanged(t, before, id)
}

func TestAccessEncodedIDsThroughTheGateway(t *testing.T) {
	ids := []string{"gw-nöde-1", "gw-ノード-1", "gw-🚀", "gw-.."}
	reportUp(t, ids...)
	reportUp(t, "gw-node-1")
	before := snapshot(t, "gw-node-1")
	policy := access.Policy{Mode: access.ModeAuthorizer}
	for _, d := range deliveries {
		who := principal(d, "alice", "admin")
		for _, id := range ids {
			t.Run(d.name+": "+id, func(t *testing.T) {
				p := "/api/slaves/slave/" + url.PathEscape(id)
				gatewayCall(t, policy, d, who, "POST", p+"/freeze", "").want(t, 200, "")
				r := gatewayCall(t, policy, d, who, "GET", p+"/details", "")
				r.want(t, 200, "*")
				if s := decode[slave](t, r.body); s.ID != id || s.CurrentState.State != "FROZEN" {
					t.Errorf("got %s in %s, want %s FROZEN", s.ID, s.CurrentState.State, id)
				}
				gatewayCall(t, policy, d, who, "POST", p+"/activate", "").want(t, 200, "")
			})
		}
		t.Run(d.name+": path navigation is a JSON 404", func(t *testing.T) {
			for _, target := range []string{"/api/slaves/slave/../dead", "/api/slaves/slave/gw-node-1/../gw-node-1/freeze"} {
				r := gatewayCall(t, policy, d, who, "POST", target, "")
				if r.status != 404 || !strings.HasPrefix(r.body, `{"code":404,`) || r.header.Get("Location") != "" {
					t.Errorf("%s: got %d %s, want a JSON 404", target, r.status, r.body)
				}
			}
		})
	}
	unchanged(t, before, "gw-node-1")
}

func TestAccessOversizedBodyThroughTheGateway(t *testing.T) {
	active, dead := hostileSlaves(t, "gwbig")
	before := snapshot(t, active, dead)
	big := `{"message":"` + strings.Repeat("x", web.MaxBody) + `"}`
	policy := access.Policy{Mode: access.ModeAuthorizer}
	for _, d := range deliveries {
		who := principal(d, "alice", "admin")
		t.Run(d.name, func(t *testing.T) {
			for _, route := range changeRoutes(active, dead) {
				gatewayCall(t, policy, d, who, route[0], route[1], big).wantError(t, 413, "request body is larger than 65536 bytes")
			}
			unchanged(t, before, active, dead)
		})
	}
}

// Group names are split on commas only: a name holding a space is one
// group, so a help desk group named "Helpdesk Admins" is never the admin
// group "Admins". ADMIN_GROUPS is read as the function reads it.
func TestAccessGroupNamesAreSplitOnCommasOnly(t *testing.T) {
	cfg, err := config.LoadSlaves(func(name string) string {
		return map[string]string{"SLAVES_TABLE": "SlavesTable", "HISTORY_TABLE": "HistoryTable", "EXPIRING_TABLE": "ExpiringTable",
			"REQUESTS_TABLE": "RequestsTable", "CHANGES_TABLE": "ChangesTable", "AUTH_MODE": "authorizer", "ADMIN_GROUPS": "Admins"}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	policy := cfg.Policy
	refused, allowed := "groups-refused", "groups-allowed"
	reportUp(t, refused, allowed)
	before := snapshot(t, refused)
	withGroups := func(d delivery, raw any) func(gatewayEvent) {
		return func(e gatewayEvent) {
			m, key := d.groupsField(e)
			m[key] = raw
		}
	}
	who := &person{id: "helpdesk", email: "helpdesk@example.com", groups: []string{"placeholder"}}
	for _, d := range deliveries {
		if d.groupsField == nil {
			continue
		}
		for _, raw := range []any{"Helpdesk Admins", " Helpdesk Admins ", "[Helpdesk Admins]", "Ops, Helpdesk Admins", "Helpdesk Admins,",
			`["Helpdesk Admins"]`, []any{"Helpdesk Admins", "Ops"}, "Admins Helpdesk", "admins", "[[Admins]]"} {
			t.Run(fmt.Sprintf("%s: %q may not freeze", d.name, raw), func(t *testing.T) {
				gatewayCall(t, policy, d, who, "POST", "/api/slaves/slave/"+refused+"/freeze", "", withGroups(d, raw)).
					wantError(t, 403, "helpdesk must be part of one or more admin groups: Admins")
				unchanged(t, before, refused)
			})
		}
		for _, raw := range []any{"Admins", "Ops, Admins", " Ops ,Admins ", "[Ops, Admins]", `["Ops","Admins"]`, []any{"Ops", " Admins "}} {
			t.Run(fmt.Sprintf("%s: %q may freeze", d.name, raw), func(t *testing.T) {
				gatewayCall(t, policy, d, who, "POST", "/api/slaves/slave/"+allowed+"/freeze", "", withGroups(d, raw)).want(t, 200, "")
				if got := state(t, api(t, access.Policy{}), allowed); got != "FROZEN" {
					t.Errorf("got %s, want FROZEN", got)
				}
				gatewayCall(t, policy, d, who, "POST", "/api/slaves/slave/"+allowed+"/activate", "", withGroups(d, raw)).want(t, 200, "")
			})
		}
	}
}
