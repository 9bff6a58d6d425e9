package config_test

import (
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/config"
)

func TestLoadConsole(t *testing.T) {
	c, err := config.LoadConsole(env(map[string]string{"AUTH_MODE": "authorizer", "API_AUTHORIZER": "COGNITO_USER_POOLS",
		"COGNITO_DOMAIN": " fleet.auth.us-east-1.amazoncognito.com ", "COGNITO_CLIENT_ID": "abc"}))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Console{Policy: access.Policy{Mode: access.ModeAuthorizer}, Authorizer: "COGNITO_USER_POOLS",
		CognitoDomain: "fleet.auth.us-east-1.amazoncognito.com", CognitoClientID: "abc"}
	if c.Authorizer != want.Authorizer || c.CognitoDomain != want.CognitoDomain || c.CognitoClientID != want.CognitoClientID || c.Policy.Mode != want.Policy.Mode {
		t.Errorf("got %+v, want %+v", c, want)
	}
	if c, _ := config.LoadConsole(env(nil)); c.Authorizer != "AWS_IAM" || c.Policy.Mode != access.ModeNone || c.AuthHeader != "Authorization" {
		t.Errorf("defaults: got %+v, want AWS_IAM, AUTH_MODE none and the Authorization header", c)
	}
	for _, good := range []string{"X-Fleet-Token", "x-api-key-2", "Authorization"} {
		if c, err := config.LoadConsole(env(map[string]string{"API_AUTH_HEADER": good})); err != nil || c.AuthHeader != good {
			t.Errorf("got %+v, %v, want the token in %s", c, err, good)
		}
	}
	// S3 takes an x-amz- header it was not signed with for an error, and
	// a header name has no room for spaces or colons.
	for _, bad := range []string{"X-Amz-Token", "x-amz-security-token", "X Token", "Token:", "X_Token", "Tökén", "X\x00Token"} {
		if _, err := config.LoadConsole(env(map[string]string{"API_AUTH_HEADER": bad})); err == nil || !strings.Contains(err.Error(), "API_AUTH_HEADER") {
			t.Errorf("API_AUTH_HEADER %q: got %v, want an error naming API_AUTH_HEADER", bad, err)
		}
	}
	if _, err := config.LoadConsole(env(map[string]string{"API_AUTHORIZER": "COGNITO"})); err == nil || !strings.Contains(err.Error(), "API_AUTHORIZER") {
		t.Errorf("got %v, want an error naming API_AUTHORIZER", err)
	}
}
