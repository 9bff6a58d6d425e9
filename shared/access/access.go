// Package access owns who the caller is and what they may do: the identity model
// of docs/behaviour.md "Identity and authorization" and the admin/read group
// policy. It has no AWS imports; the edge package fills an Identity from API
// Gateway's authorizer context.
package access

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops/fleet/shared/fault"
)

// Mode says where identities come from.
type Mode string

const (
	// ModeNone allows every call; a user record in the body names the actor.
	ModeNone Mode = "none"
	// ModeAuthorizer trusts only API Gateway's authorizer context.
	ModeAuthorizer Mode = "authorizer"
)

// Identity is the caller as the platform established it.
type Identity struct {
	ID    string
	Name  string
	Email string
	// Groups are whole group names, spaces included; a policy compares
	// them with its own groups exactly.
	Groups []string
}

type identityKey struct{}

// WithIdentity returns a context carrying id, as set by the edge.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity the edge established, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok && id.ID != ""
}

// Policy decides reads and changes from configured groups.
type Policy struct {
	Mode        Mode
	AdminGroups []string
	ReadGroups  []string
}

// Actor resolves the acting identity of a request. In ModeNone the body's
// user record (may be nil) is the actor; in ModeAuthorizer the body is ignored
// and a missing identity is fault.Unauthorized.
func (p Policy) Actor(ctx context.Context, bodyUser *Identity) (Identity, error) {
	if p.Mode != ModeAuthorizer {
		if bodyUser != nil {
			return *bodyUser, nil
		}
		return Identity{}, nil
	}
	id, ok := FromContext(ctx)
	if !ok {
		return Identity{}, fault.Unauthorized("authentication required")
	}
	return id, nil
}

// CanRead returns fault.Forbidden unless id may read.
func (p Policy) CanRead(id Identity) error {
	if p.Mode != ModeAuthorizer || len(p.ReadGroups) == 0 || p.isAdmin(id) || overlaps(id.Groups, p.ReadGroups) {
		return nil
	}
	return fault.Forbidden(fmt.Sprintf("%s must be part of one or more read groups: %s", id.ID, strings.Join(p.ReadGroups, ",")))
}

// CanChange returns fault.Forbidden unless id is an admin.
func (p Policy) CanChange(id Identity) error {
	if p.Mode != ModeAuthorizer || p.isAdmin(id) {
		return nil
	}
	return fault.Forbidden(fmt.Sprintf("%s must be part of one or more admin groups: %s", id.ID, strings.Join(p.AdminGroups, ",")))
}

func (p Policy) isAdmin(id Identity) bool {
	return len(p.AdminGroups) == 0 || overlaps(id.Groups, p.AdminGroups)
}

func overlaps(have, want []string) bool {
	for _, g := range have {
		if slices.Contains(want, g) {
			return true
		}
	}
	return false
}
