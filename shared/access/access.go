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

// Need is what a request asks to do.
type Need int

const (
	// Read is looking: lists, details, histories, log lookups.
	Read Need = iota + 1
	// Change is any state change or deletion.
	Change
	// Anyone is what a public route needs: nothing. The console's page and
	// assets are public, since a browser loads them before anyone signs in.
	Anyone
)

// Valid reports whether n is one of Read, Change and Anyone; the zero Need
// is none of them, so a route table refuses a route that declares nothing.
func (n Need) Valid() bool { return n == Read || n == Change || n == Anyone }

// String names n as docs/behaviour.md does.
func (n Need) String() string {
	switch n {
	case Read:
		return "read"
	case Change:
		return "change"
	case Anyone:
		return "anyone"
	}
	return fmt.Sprintf("Need(%d)", int(n))
}

// Authorize returns who makes the request ctx belongs to, and an error
// unless they may do what need says. Behind an authorizer the caller is the
// identity API Gateway established (fault.Unauthorized without one), and
// fault.Forbidden unless its groups allow need. With auth off anyone may do
// anything, and the caller is anonymous: a route may then take the actor a
// request names (Actor). Anyone may make a request that needs Anyone, and
// its caller is anonymous.
func (p Policy) Authorize(ctx context.Context, need Need) (Identity, error) {
	if p.Open() || need == Anyone {
		return Identity{}, nil
	}
	id, ok := FromContext(ctx)
	if !ok {
		return Identity{}, fault.Unauthorized("authentication required")
	}
	if need == Change {
		return id, p.canChange(id)
	}
	return id, p.canRead(id)
}

// Open reports whether anyone may do anything (AUTH_MODE none): no
// identity is established, and nobody signs in.
func (p Policy) Open() bool { return p.Mode != ModeAuthorizer }

// Actor returns who acts in a request whose caller Authorize returned and
// whose body names a user: with auth off the named user, whom nothing
// verifies but who is the only name there is; behind an authorizer always
// the caller, never a name the request chose.
func (p Policy) Actor(caller, named Identity) Identity {
	if p.Open() {
		return named
	}
	return caller
}

func (p Policy) canRead(id Identity) error {
	if len(p.ReadGroups) == 0 || p.isAdmin(id) || overlaps(id.Groups, p.ReadGroups) {
		return nil
	}
	return fault.Forbidden(fmt.Sprintf("%s must be part of one or more read groups: %s", id.ID, strings.Join(p.ReadGroups, ",")))
}

func (p Policy) canChange(id Identity) error {
	if p.isAdmin(id) {
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
