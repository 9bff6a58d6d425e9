package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetops/fleet/shared/access"
)

// Authorize is a Lambda REQUEST authorizer: it answers API Gateway's
// event with a policy and a context, or fails with "Unauthorized". The
// service has no authorizer of its own (template.yaml's AuthorizerArn names
// the deployer's); this file plays API Gateway's side of one, so it speaks
// the authorizer's event, which no service package outside shared/edge does.
type Authorize func(context.Context, events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error)

// RequestAuthorizer plays API Gateway in front of a LAMBDA_REQUEST
// authorizer whose identity source is header (the template's AuthHeader):
// a request without that header is a 401 and never reaches the
// authorizer; any other becomes the authorizer's event, and only a
// request the answer allows reaches next, with the identity the answer's
// context names. Other headers, Authorization included, are the
// authorizer's to ignore.
func RequestAuthorizer(header string, authorize Authorize, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(header) == "" {
			gatewayError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		event := events.APIGatewayCustomAuthorizerRequestTypeRequest{
			Type:              "REQUEST",
			MethodArn:         "arn:aws:execute-api:us-east-1:123456789012:local/prod/" + r.Method + r.URL.Path,
			Resource:          r.URL.Path,
			Path:              r.URL.Path,
			HTTPMethod:        r.Method,
			Headers:           map[string]string{},
			MultiValueHeaders: map[string][]string(r.Header.Clone()),
			RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
				Path: r.URL.Path, Stage: "prod", HTTPMethod: r.Method, ResourcePath: r.URL.Path},
		}
		for name := range r.Header {
			event.Headers[name] = r.Header.Get(name)
		}
		answer, err := authorize(r.Context(), event)
		if err != nil {
			gatewayError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		if !allows(answer.PolicyDocument) {
			gatewayError(w, http.StatusForbidden, "User is not authorized to access this resource with an explicit deny")
			return
		}
		id := access.Identity{ID: answer.PrincipalID}
		id.Email, _ = answer.Context["email"].(string)
		if groups, _ := answer.Context["groups"].(string); groups != "" {
			id.Groups = strings.Split(groups, ",")
		}
		next.ServeHTTP(w, r.WithContext(access.WithIdentity(r.Context(), id)))
	})
}

// allows reports whether a policy allows execute-api:Invoke (the sample
// authorizer allows the whole API, as its answer is cached per token).
func allows(p events.APIGatewayCustomAuthorizerPolicy) bool {
	for _, s := range p.Statement {
		if s.Effect == "Allow" && len(s.Action) > 0 && s.Action[0] == "execute-api:Invoke" {
			return true
		}
	}
	return false
}

// gatewayError is API Gateway's own answer to a refused caller.
func gatewayError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": message})
}

// errUnauthorized is the one error a Lambda authorizer fails with for API
// Gateway to answer 401: API Gateway matches this exact text.
var errUnauthorized = errors.New("Unauthorized")

// TokenAuthorizer is a sample Lambda authorizer keyed on header: "Bearer
// <AdminToken>" is an admin, "Bearer <ReaderToken>" may only read, and
// anything else is Unauthorized. It reads its token from the header it is
// deployed with, as the event carries every header of the request.
func TokenAuthorizer(header string) Authorize {
	return func(_ context.Context, e events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		var value string
		for name, v := range e.Headers {
			if strings.EqualFold(name, header) {
				value = v
			}
		}
		token, _ := strings.CutPrefix(value, "Bearer ")
		u, ok := tokenUsers[token]
		if !ok {
			return events.APIGatewayCustomAuthorizerResponse{}, errUnauthorized
		}
		return events.APIGatewayCustomAuthorizerResponse{
			PrincipalID: u.ID,
			PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
				{Action: []string{"execute-api:Invoke"}, Effect: "Allow", Resource: []string{"arn:aws:execute-api:*:*:*/*/*/api/*"}}}},
			Context: map[string]any{"email": u.Email, "groups": strings.Join(u.Groups, ",")},
		}, nil
	}
}
