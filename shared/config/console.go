package config

import (
	"strings"

	"github.com/fleetops/fleet/shared/access"
)

// Console is the configuration of the console function: how the API it
// serves the page for is signed in to.
type Console struct {
	Policy          access.Policy // AUTH_MODE: none means the page needs no sign-in
	Authorizer      string        // API_AUTHORIZER: AWS_IAM, COGNITO_USER_POOLS, LAMBDA_TOKEN or LAMBDA_REQUEST
	CognitoDomain   string        // COGNITO_DOMAIN, the user pool's hosted UI domain (with COGNITO_USER_POOLS)
	CognitoClientID string        // COGNITO_CLIENT_ID, the user pool app client the console signs in with
	AuthHeader      string        // API_AUTH_HEADER, the header the authorizer reads its token from (default Authorization)
}

// headerName reports whether s is what the template's AuthHeader allows:
// letters, digits and '-' (^[A-Za-z0-9-]+$). A function rather than a
// regexp compiled at package level, which every function linking this
// package would pay for at cold start.
func headerName(s string) bool {
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return s != ""
}

// Authorizers are the values API_AUTHORIZER takes, the template's ApiAuthorizer.
var Authorizers = []string{"AWS_IAM", "COGNITO_USER_POOLS", "LAMBDA_TOKEN", "LAMBDA_REQUEST"}

// LoadConsole reads the console function's variables from getenv. Missing
// Cognito settings are not an error: the page then says sign-in is not
// configured, rather than the function failing to serve it.
func LoadConsole(getenv func(string) string) (Console, error) {
	r := reader{getenv: getenv}
	c := Console{
		Policy:          r.policy(),
		Authorizer:      strings.TrimSpace(getenv("API_AUTHORIZER")),
		CognitoDomain:   strings.TrimSpace(getenv("COGNITO_DOMAIN")),
		CognitoClientID: strings.TrimSpace(getenv("COGNITO_CLIENT_ID")),
		AuthHeader:      strings.TrimSpace(getenv("API_AUTH_HEADER")),
	}
	if c.AuthHeader == "" {
		c.AuthHeader = "Authorization"
	}
	if !headerName(c.AuthHeader) || strings.HasPrefix(strings.ToLower(c.AuthHeader), "x-amz-") {
		r.fail("API_AUTH_HEADER", "must be a header name of letters, digits and '-', not starting with x-amz-, got %q", c.AuthHeader)
	}
	if c.Authorizer == "" {
		c.Authorizer = "AWS_IAM"
	}
	valid := false
	for _, a := range Authorizers {
		valid = valid || a == c.Authorizer
	}
	if !valid {
		r.fail("API_AUTHORIZER", "must be one of %s, got %q", strings.Join(Authorizers, ", "), c.Authorizer)
	}
	return c, r.err
}
