package edge

import (
	"encoding/json"
	"strings"

	"github.com/fleetops/fleet/shared/access"
)

// identityFrom reads the caller from an authorizer context: JWT or Cognito
// claims (REST: authorizer.claims; HTTP API: authorizer.jwt.claims) or a Lambda
// authorizer's context (REST: flattened beside principalId; HTTP API:
// authorizer.lambda). IAM callers are read by the caller, from where each
// format puts them. The zero Identity means none was found.
func identityFrom(auth map[string]any) access.Identity {
	if jwt, ok := auth["jwt"].(map[string]any); ok {
		auth = jwt
	}
	if claims, ok := auth["claims"].(map[string]any); ok {
		return access.Identity{
			ID:     first(str(claims["cognito:username"]), str(claims["username"]), str(claims["sub"])),
			Email:  str(claims["email"]),
			Name:   str(claims["name"]),
			Groups: groups(claims["cognito:groups"]),
		}
	}
	if lambda, ok := auth["lambda"].(map[string]any); ok {
		auth = lambda
	}
	return access.Identity{
		ID:     first(str(auth["principalId"]), str(auth["id"]), str(auth["userId"])),
		Email:  str(auth["email"]),
		Name:   str(auth["name"]),
		Groups: groups(auth["groups"]),
	}
}

// groups reads a group list in the forms the contract allows: a JSON array
// of strings, a string holding one, or a comma-separated string such as
// "admin", "admin,ops" or "[admin, ops]" (REST API Cognito claims; one pair
// of surrounding brackets is dropped). Names are split on commas only:
// whitespace inside a name is part of it, so "Helpdesk Admins" is one group
// and can never be read as the admin group "Admins". Space around a name is
// trimmed and empty names are dropped.
//
// An HTTP API JWT authorizer renders an array claim as "[admin ops]", which
// is thus the one group "admin ops": a caller in several groups is refused
// there, never let in by a split name.
func groups(v any) []string {
	var list []string
	switch v := v.(type) {
	case []any:
		for _, g := range v {
			list = append(list, str(g))
		}
	case string:
		s := strings.TrimSpace(v)
		if json.Unmarshal([]byte(s), &list) != nil {
			if inner, ok := strings.CutPrefix(s, "["); ok {
				if inner, ok = strings.CutSuffix(inner, "]"); ok {
					s = inner
				}
			}
			list = strings.Split(s, ",")
		}
	}
	var out []string
	for _, g := range list {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	return out
}

// str renders the scalar values a Lambda authorizer context may hold.
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
