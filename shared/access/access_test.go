package access_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/fault"
)

func TestAuthorizeEstablishesTheCaller(t *testing.T) {
	alice := access.Identity{ID: "alice", Name: "Alice", Email: "alice@example.com", Groups: []string{"ops"}}
	tests := []struct {
		name     string
		mode     access.Mode
		ctx      context.Context
		want     access.Identity
		wantKind fault.Kind // KindInternal: no error
		wantMsg  string
	}{
		{name: "with auth off the caller is anonymous", mode: access.ModeNone,
			ctx: context.Background(), want: access.Identity{}},
		{name: "with auth off the context identity is not taken", mode: access.ModeNone,
			ctx: access.WithIdentity(context.Background(), alice), want: access.Identity{}},
		{name: "an empty mode behaves as auth off", mode: "",
			ctx: context.Background(), want: access.Identity{}},
		{name: "with the authorizer the identity comes from the context", mode: access.ModeAuthorizer,
			ctx: access.WithIdentity(context.Background(), alice), want: alice},
		{name: "with the authorizer no identity is unauthorized", mode: access.ModeAuthorizer,
			ctx: context.Background(), wantKind: fault.KindUnauthorized, wantMsg: "authentication required"},
		{name: "with the authorizer an identity without an id is unauthorized", mode: access.ModeAuthorizer,
			ctx:      access.WithIdentity(context.Background(), access.Identity{Email: "x@example.com"}),
			wantKind: fault.KindUnauthorized, wantMsg: "authentication required"},
	}
	for _, tt := range tests {
		for _, need := range []access.Need{access.Read, access.Change} {
			t.Run(tt.name, func(t *testing.T) {
				got, err := access.Policy{Mode: tt.mode}.Authorize(tt.ctx, need)
				if tt.wantKind != fault.KindInternal {
					if err == nil {
						t.Fatalf("got caller %+v, want a fault of kind %v", got, tt.wantKind)
					}
					if k := fault.KindOf(err); k != tt.wantKind {
						t.Errorf("got kind %v, want %v", k, tt.wantKind)
					}
					if m := fault.Message(err); m != tt.wantMsg {
						t.Errorf("got message %q, want %q", m, tt.wantMsg)
					}
					return
				}
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got caller %+v, want %+v", got, tt.want)
				}
			})
		}
	}
}

func TestFromContext(t *testing.T) {
	if _, ok := access.FromContext(context.Background()); ok {
		t.Errorf("got an identity from an empty context, want none")
	}
	want := access.Identity{ID: "u1", Groups: []string{"g"}}
	got, ok := access.FromContext(access.WithIdentity(context.Background(), want))
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("got (%+v, %v), want (%+v, true)", got, ok, want)
	}
}

func TestAuthorizeChecksTheCallersGroups(t *testing.T) {
	user := func(groups ...string) access.Identity { return access.Identity{ID: "u-123", Groups: groups} }
	authz := func(admin, read []string) access.Policy {
		return access.Policy{Mode: access.ModeAuthorizer, AdminGroups: admin, ReadGroups: read}
	}
	ab := []string{"a", "b"}
	viewers := []string{"viewers", "auditors"}
	const adminMsg = "u-123 must be part of one or more admin groups: a,b"
	const readMsg = "u-123 must be part of one or more read groups: viewers,auditors"
	tests := []struct {
		name          string
		policy        access.Policy
		id            access.Identity
		wantReadMsg   string // "": allowed
		wantChangeMsg string // "": allowed
	}{
		{name: "with auth off anyone may read and change",
			policy: access.Policy{Mode: access.ModeNone, AdminGroups: ab, ReadGroups: viewers}, id: user("x")},
		{name: "with no groups configured any authenticated user is admin",
			policy: authz(nil, nil), id: user()},
		{name: "a member of an admin group may read and change",
			policy: authz(ab, nil), id: user("x", "b")},
		{name: "a non-admin may read but not change when no read groups are configured",
			policy: authz(ab, nil), id: user("x"), wantChangeMsg: adminMsg},
		{name: "a user with no groups may not change when admin groups are configured",
			policy: authz(ab, nil), id: user(), wantChangeMsg: adminMsg},
		{name: "a member of a read group may read but not change",
			policy: authz(ab, viewers), id: user("auditors"), wantChangeMsg: adminMsg},
		{name: "an admin may always read even outside the read groups",
			policy: authz(ab, viewers), id: user("a")},
		{name: "a user in neither group may do nothing",
			policy: authz(ab, viewers), id: user("x"), wantReadMsg: readMsg, wantChangeMsg: adminMsg},
		{name: "with read groups but no admin groups everyone is admin and may read",
			policy: authz(nil, viewers), id: user("x")},
		{name: "group names match exactly",
			policy: authz(ab, viewers), id: user("A", "viewer"), wantReadMsg: readMsg, wantChangeMsg: adminMsg},
	}
	check := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		if want == "" {
			if err != nil {
				t.Errorf("%s: got %v, want allowed", what, err)
			}
			return
		}
		if err == nil {
			t.Errorf("%s: got allowed, want 403 %q", what, want)
			return
		}
		if k := fault.KindOf(err); k != fault.KindForbidden {
			t.Errorf("%s: got kind %v, want forbidden", what, k)
		}
		if m := fault.Message(err); m != want {
			t.Errorf("%s: got message %q, want %q", what, m, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := access.WithIdentity(context.Background(), tt.id)
			_, err := tt.policy.Authorize(ctx, access.Read)
			check(t, "read", err, tt.wantReadMsg)
			_, err = tt.policy.Authorize(ctx, access.Change)
			check(t, "change", err, tt.wantChangeMsg)
		})
	}
}
