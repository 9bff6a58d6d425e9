package web

import (
	"context"
	"fmt"
	"maps"
	"net/http"

	"github.com/fleetops/fleet/shared/access"
)

// Routes is the route table of one endpoint group. Every route is
// registered with what its caller needs (access.Read, access.Change or
// access.Anyone), and the table checks it, through access.Policy, before the
// route runs: a rule that lives in the registration cannot be forgotten in a
// handler (docs/decisions.md "Routes declare their permission"). Build it
// with NewRoutes; paths no route matches get NotFound.
type Routes struct {
	mux    *http.ServeMux
	policy access.Policy
	needs  map[string]access.Need
}

// NewRoutes returns an empty table whose callers policy authorizes.
func NewRoutes(policy access.Policy) *Routes {
	t := &Routes{mux: http.NewServeMux(), policy: policy, needs: map[string]access.Need{}}
	t.mux.HandleFunc("/", NotFound)
	return t
}

// Route is what a table serves at one pattern. ServeHTTP answers a request
// the table let through, whose caller CallerOf returns; Fail answers one it
// stopped before the route ran (a caller the policy refused, or a malformed
// user record), so that a route which notes or counts its outcomes does so
// for those too.
type Route interface {
	http.Handler
	Fail(w http.ResponseWriter, r *http.Request, err error)
}

// Plain is a Route that answers a stopped request with Error alone.
type Plain http.HandlerFunc

// ServeHTTP calls p.
func (p Plain) ServeHTTP(w http.ResponseWriter, r *http.Request) { p(w, r) }

// Fail writes err.
func (Plain) Fail(w http.ResponseWriter, r *http.Request, err error) { Error(w, r, err) }

// Handle registers route at pattern for callers the policy allows need. The
// request's optional body is the route's own.
func (t *Routes) Handle(pattern string, need access.Need, route Route) {
	t.handle(pattern, need, false, route)
}

// HandleNamed is Handle for a route whose optional body is a SchedulerUser
// record (the reads and the deletions): it is read after the caller is
// authorized (400 when malformed), and it names the actor only where the
// policy says a request may (access.Policy.Actor).
func (t *Routes) HandleNamed(pattern string, need access.Need, route Route) {
	t.handle(pattern, need, true, route)
}

func (t *Routes) handle(pattern string, need access.Need, named bool, route Route) {
	if !need.Valid() {
		panic(fmt.Sprintf("route %s declares no permission", pattern))
	}
	t.needs[pattern] = need
	t.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, err := t.caller(r, need, named)
		if err != nil {
			route.Fail(w, r, err)
			return
		}
		route.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller)))
	}))
}

// caller authorizes r for need and, for a named route, reads the user record
// its body may hold. The caller goes on the request's log line.
func (t *Routes) caller(r *http.Request, need access.Need, named bool) (access.Identity, error) {
	id, err := t.policy.Authorize(r.Context(), need)
	if err != nil || !named {
		Note(r, "user", id.ID)
		return id, err
	}
	var u userJSON
	present, err := DecodeBody(r, &u)
	if err == nil && present {
		id = t.policy.Actor(id, access.Identity{ID: u.ID, Name: u.Name, Email: u.Email, Groups: u.Groups})
	}
	Note(r, "user", id.ID)
	return id, err
}

// Needs returns what each pattern's caller needs, for tests that hold the
// table to the routes' documented permissions.
func (t *Routes) Needs() map[string]access.Need { return maps.Clone(t.needs) }

// ServeHTTP routes the request.
func (t *Routes) ServeHTTP(w http.ResponseWriter, r *http.Request) { t.mux.ServeHTTP(w, r) }

type callerKey struct{}

// CallerOf returns the caller a route table let through: the identity the
// policy established, or the actor a user record named where it may.
func CallerOf(r *http.Request) access.Identity {
	id, _ := r.Context().Value(callerKey{}).(access.Identity)
	return id
}

// userJSON is SchedulerUser (openapi.yaml).
type userJSON struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Email         string   `json:"email,omitempty"`
	Groups        []string `json:"groups"`
	Authenticated bool     `json:"authenticated"`
}
