package edge

import (
	"encoding/json"
	"strings"
	"unicode"

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

// groups reads a group list in every form the gateway delivers one: a JSON
// array, a JSON array in a string, or a string like "admin", "admin,ops",
// "[admin, ops]" (REST Cognito claims) or "[admin ops]" (HTTP API claims).
func groups(v any) []string {
	var list []string
	switch v := v.(type) {
	case []any:
		for _, g := range v {
			list = append(list, str(g))
		}
	case string:
		if json.Unmarshal([]byte(v), &list) != nil {
			list = strings.FieldsFunc(strings.Trim(strings.TrimSpace(v), "[]"), func(r rune) bool {
				return r == ',' || unicode.IsSpace(r)
			})
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
