package web

import (
	"net/http"

	"github.com/fleetops/fleet/shared/access"
)

// Authorize is where every route learns who calls and whether they may do
// what need says (access.Policy.Authorize); the caller goes on the
// request's log line.
func Authorize(r *http.Request, p access.Policy, need access.Need) (access.Identity, error) {
	id, err := p.Authorize(r.Context(), need)
	Note(r, "user", id.ID)
	return id, err
}

// Caller authorizes a request whose optional body is a SchedulerUser
// record (the reads and the deletions), and reads that body (400 when
// malformed). With auth off the record names the actor; behind an
// authorizer it is only checked to be well formed, and the identity API
// Gateway established is the actor.
func Caller(r *http.Request, p access.Policy, need access.Need) (access.Identity, error) {
	id, err := Authorize(r, p, need)
	if err != nil {
		return id, err
	}
	var u userJSON
	present, err := DecodeBody(r, &u)
	if err != nil || !present || p.Mode == access.ModeAuthorizer {
		return id, err
	}
	id = access.Identity{ID: u.ID, Name: u.Name, Email: u.Email, Groups: u.Groups}
	Note(r, "user", id.ID)
	return id, nil
}

// userJSON is SchedulerUser (openapi.yaml).
type userJSON struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Email         string   `json:"email,omitempty"`
	Groups        []string `json:"groups"`
	Authenticated bool     `json:"authenticated"`
}
