package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/web"
)

// route records what the route table let through, or why it stopped.
type route struct {
	caller access.Identity
	err    error
	served bool
}

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.caller, rt.served = web.CallerOf(r), true
}

func (rt *route) Fail(w http.ResponseWriter, r *http.Request, err error) { rt.err = err }

func TestTheTableTakesTheActorFromTheBodyOnlyWithAuthOff(t *testing.T) {
	alice := access.Identity{ID: "alice", Email: "alice@example.com", Groups: []string{"ops"}}
	mallory := access.Identity{ID: "mallory", Name: "M", Email: "mallory@example.com", Groups: []string{"admins"}}
	const malloryBody = `{"id":"mallory","name":"M","email":"mallory@example.com","groups":["admins"],"authenticated":true}`
	off := access.Policy{Mode: access.ModeNone}
	authz := access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"ops"}}
	tests := []struct {
		name     string
		policy   access.Policy
		identity *access.Identity // set by the edge
		body     string
		want     access.Identity
		wantKind fault.Kind // KindInternal: no error
	}{
		{name: "with auth off the body's user is the actor", policy: off, body: malloryBody, want: mallory},
		{name: "with auth off and no body the actor is anonymous", policy: off},
		{name: "with auth off the edge's identity is not the actor", policy: off, identity: &alice, body: malloryBody, want: mallory},
		{name: "with the authorizer a body user is ignored", policy: authz, identity: &alice, body: malloryBody, want: alice},
		{name: "with the authorizer no identity is unauthorized, body or not", policy: authz, body: malloryBody, wantKind: fault.KindUnauthorized},
		{name: "with the authorizer a caller outside the groups is forbidden", policy: authz, identity: &mallory, wantKind: fault.KindForbidden},
		{name: "with auth off a malformed user record is invalid", policy: off, body: `{"groups":"ops"}`, wantKind: fault.KindInvalid},
		{name: "with the authorizer a malformed user record is invalid", policy: authz, identity: &alice, body: `{"authenticated":"yes"}`, wantKind: fault.KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("DELETE", "/api/slaves/dead", strings.NewReader(tt.body))
			if tt.identity != nil {
				r = r.WithContext(access.WithIdentity(context.Background(), *tt.identity))
			}
			rt := &route{}
			table := web.NewRoutes(tt.policy)
			table.HandleNamed("DELETE /api/slaves/dead", access.Change, rt)
			table.ServeHTTP(httptest.NewRecorder(), r)
			got, err := rt.caller, rt.err
			if rt.served == (err != nil) {
				t.Fatalf("served %v with error %v: a route either runs or fails", rt.served, err)
			}
			if tt.wantKind != fault.KindInternal {
				if k := fault.KindOf(err); err == nil || k != tt.wantKind {
					t.Fatalf("got (%+v, %v), want a fault of kind %v", got, err, tt.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got actor %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestATableRefusesARouteThatDeclaresNoPermission(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("got no panic registering a route without a permission, want one")
		}
	}()
	web.NewRoutes(access.Policy{}).Handle("GET /x", access.Need(0), web.Plain(web.NotFound))
}

func TestAPublicRouteServesAnyoneBehindTheAuthorizer(t *testing.T) {
	rt := &route{}
	table := web.NewRoutes(access.Policy{Mode: access.ModeAuthorizer, AdminGroups: []string{"ops"}})
	table.Handle("GET /", access.Anyone, rt)
	table.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/index.html", nil))
	if !rt.served || rt.err != nil {
		t.Errorf("got served %v, error %v; want served without error", rt.served, rt.err)
	}
}
