package edge

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/web"
)

// seen is what the test mux saw of a request, sent back as the response body.
type seen struct {
	Pattern       string
	SlaveID       string
	Method        string
	Path          string
	RequestURI    string
	Host          string
	RemoteAddr    string
	RequestID     string
	Query         url.Values
	Header        http.Header
	Body          string
	ContentLength int64
	Identity      *access.Identity
}

// answer is a streamed answer as API Gateway reads it: the prelude's
// status, headers and cookies, and the body.
type answer struct {
	StatusCode int
	Headers    map[string]string
	Cookies    []string
	Body       string
}

func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := seen{Pattern: r.Pattern, SlaveID: r.PathValue("slaveId"), Method: r.Method, Path: r.URL.Path,
		RequestURI: r.RequestURI, Host: r.Host, RemoteAddr: r.RemoteAddr, RequestID: RequestID(r),
		Query: r.URL.Query(), Header: r.Header, Body: string(body), ContentLength: r.ContentLength}
	if id, ok := access.FromContext(r.Context()); ok {
		s.Identity = &id
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}

func testMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range []string{
		"GET /api/slaves",
		"GET /api/slaves/expiring",
		"DELETE /api/slaves/dead",
		"GET /api/slaves/slave/{slaveId}",
		"GET /api/slaves/slave/{slaveId}/details",
		"POST /api/slaves/slave/{slaveId}/freeze",
		"POST /api/slaves/slave/{slaveId}/decommission",
		"POST /api/slaves/slave/{slaveId}/activate",
		"DELETE /api/slaves/slave/{slaveId}/expiring",
	} {
		mux.HandleFunc(p, echo)
	}
	return mux
}

func fixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invoke runs event through StreamHandler(h) and reads its answer whole.
func invoke(t *testing.T, ctx context.Context, h http.Handler, event json.RawMessage) answer {
	t.Helper()
	a, err := serve(ctx, h, event)
	if err != nil {
		t.Fatalf("got error %v, want an answer", err)
	}
	return a
}

// serve runs event through StreamHandler(h) and reads its answer whole.
func serve(ctx context.Context, h http.Handler, event json.RawMessage) (answer, error) {
	res, err := StreamHandler(h)(ctx, event)
	if err != nil {
		return answer{}, err
	}
	body, err := io.ReadAll(res.Body)
	return answer{StatusCode: res.StatusCode, Headers: res.Headers, Cookies: res.Cookies, Body: string(body)}, err
}

const slaveID = "20261121-051400-16777343-5050-1234-S3"

func TestHandlerServesEveryFixtureThroughTheMux(t *testing.T) {
	tests := []struct {
		name, file   string
		pattern      string
		slaveID      string
		path         string
		requestURI   string
		host         string
		remoteAddr   string
		requestID    string
		query        url.Values
		header       http.Header // subset that must be present, exactly
		body         string
		identity     *access.Identity
		absentHeader string
	}{
		{
			name: "a REST GET routes on the path without the stage and keeps every query and header value", file: "rest-get-query.json",
			pattern: "GET /api/slaves/slave/{slaveId}/details", slaveID: slaveID,
			path: "/api/slaves/slave/" + slaveID + "/details", requestURI: "/api/slaves/slave/" + slaveID + "/details?state=ACTIVE&state=FROZEN&verbose=true",
			host: "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", remoteAddr: "203.0.113.7", requestID: "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
			query:        url.Values{"state": {"ACTIVE", "FROZEN"}, "verbose": {"true"}},
			header:       http.Header{"X-Fleet-Trace": {"alpha", "beta"}, "Accept": {"application/json"}},
			absentHeader: "Host",
		},
		{
			name: "a REST POST with a base64 body arrives decoded with its length", file: "rest-post-base64.json",
			pattern: "POST /api/slaves/slave/{slaveId}/freeze", slaveID: slaveID, path: "/api/slaves/slave/" + slaveID + "/freeze",
			requestURI: "/api/slaves/slave/" + slaveID + "/freeze",
			host:       "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", remoteAddr: "203.0.113.7", requestID: "5c1e6c4d-2f0b-4a52-9a63-6d1f3b0e8a11",
			query:  url.Values{},
			header: http.Header{"Content-Type": {"application/json"}},
			body:   `{"message":"kernel upgrade","durationMillis":3600000,"revertToState":"ACTIVE"}`,
		},
		{
			name: "a REST Cognito caller gets the claims identity with groups parsed from a bracketed string", file: "rest-cognito.json",
			pattern: "POST /api/slaves/slave/{slaveId}/decommission", slaveID: slaveID, path: "/api/slaves/slave/" + slaveID + "/decommission",
			requestURI: "/api/slaves/slave/" + slaveID + "/decommission",
			host:       "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", remoteAddr: "203.0.113.7", requestID: "9b7c2a10-5d4e-4f3a-8b21-0c9d8e7f6a55",
			query: url.Values{}, body: `{"message":"retire rack r12"}`,
			identity: &access.Identity{ID: "jdoe", Name: "Jane Doe", Email: "jane.doe@example.com", Groups: []string{"admin", "ops"}},
		},
		{
			name: "a REST Lambda authorizer caller is its principal with the context's email, name and comma-separated groups", file: "rest-lambda-authorizer.json",
			pattern: "GET /api/slaves/expiring", path: "/api/slaves/expiring", requestURI: "/api/slaves/expiring",
			host: "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", remoteAddr: "203.0.113.7", requestID: "3f2e1d0c-9b8a-4776-8554-433221100fed",
			query:    url.Values{},
			identity: &access.Identity{ID: "u-1042", Name: "Ops Bot", Email: "ops.bot@example.com", Groups: []string{"ops", "readers"}},
		},
		{
			name: "a REST IAM caller is its user ARN", file: "rest-iam.json",
			pattern: "DELETE /api/slaves/dead", path: "/api/slaves/dead", requestURI: "/api/slaves/dead",
			host: "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", remoteAddr: "203.0.113.7", requestID: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
			query:    url.Values{},
			identity: &access.Identity{ID: "arn:aws:iam::123456789012:user/fleet-operator", Name: "AIDAJQABLZS4A3QDU576Q"},
		},
		{
			name: "a REST slave id with an escaped slash and space is decoded exactly once", file: "rest-encoded-slave-id.json",
			pattern: "GET /api/slaves/slave/{slaveId}/details", slaveID: "a/b c", path: "/api/slaves/slave/a/b c/details",
			requestURI: "/api/slaves/slave/a%2Fb%20c/details",
			host:       "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", remoteAddr: "203.0.113.7", requestID: "7e6d5c4b-3a29-4817-a6f5-e4d3c2b1a090",
			query: url.Values{},
		},
		{
			name: "an HTTP API GET keeps the raw query string and turns cookies into a Cookie header", file: "http-get-cookies.json",
			pattern: "GET /api/slaves/slave/{slaveId}", slaveID: slaveID, path: "/api/slaves/slave/" + slaveID,
			requestURI: "/api/slaves/slave/" + slaveID + "?state=ACTIVE&state=FROZEN&note=a%20b%26c",
			host:       "q7w8e9r0t1.execute-api.us-east-1.amazonaws.com", remoteAddr: "198.51.100.23", requestID: "BVfLWhTmoAMEVbQ=",
			query:        url.Values{"state": {"ACTIVE", "FROZEN"}, "note": {"a b&c"}},
			header:       http.Header{"Cookie": {"session=abc123; theme=dark"}, "X-Fleet-Trace": {"alpha,beta"}, "Accept": {"application/json"}},
			absentHeader: "Host",
		},
		{
			name: "an HTTP API JWT caller gets the claims identity, whose bracketed space-separated groups are one name", file: "http-jwt.json",
			pattern: "POST /api/slaves/slave/{slaveId}/activate", slaveID: slaveID, path: "/api/slaves/slave/" + slaveID + "/activate",
			requestURI: "/api/slaves/slave/" + slaveID + "/activate",
			host:       "q7w8e9r0t1.execute-api.us-east-1.amazonaws.com", remoteAddr: "198.51.100.23", requestID: "BVgA1jKLoAMEc2Q=",
			query: url.Values{}, body: `{"message":"back in service"}`,
			header:   http.Header{"Content-Type": {"application/json"}},
			identity: &access.Identity{ID: "jdoe", Name: "Jane Doe", Email: "jane.doe@example.com", Groups: []string{"admin ops"}},
		},
		{
			name: "an HTTP API Lambda authorizer caller is its context's userId with JSON-array groups", file: "http-lambda-authorizer.json",
			pattern: "GET /api/slaves", path: "/api/slaves", requestURI: "/api/slaves?state=frozen",
			host: "q7w8e9r0t1.execute-api.us-east-1.amazonaws.com", remoteAddr: "198.51.100.23", requestID: "BVgB7mNPoAMEd4R=",
			query:    url.Values{"state": {"frozen"}},
			identity: &access.Identity{ID: "svc-reporter", Email: "reporter@example.com", Groups: []string{"readers", "ops"}},
		},
		{
			name: "an HTTP API IAM caller is its user ARN", file: "http-iam.json",
			pattern: "DELETE /api/slaves/slave/{slaveId}/expiring", slaveID: slaveID, path: "/api/slaves/slave/" + slaveID + "/expiring",
			requestURI: "/api/slaves/slave/" + slaveID + "/expiring",
			host:       "q7w8e9r0t1.execute-api.us-east-1.amazonaws.com", remoteAddr: "198.51.100.23", requestID: "BVgC3pQRoAMEe5S=",
			query:    url.Values{},
			identity: &access.Identity{ID: "arn:aws:sts::123456789012:assumed-role/fleet-ci/fleet-ci", Name: "AROA7ZJZYVRE7C3DUXHH6:fleet-ci"},
		},
		{
			name: "an HTTP API slave id with an escaped slash and space is decoded exactly once", file: "http-encoded-slave-id.json",
			pattern: "GET /api/slaves/slave/{slaveId}/details", slaveID: "a/b c", path: "/api/slaves/slave/a/b c/details",
			requestURI: "/api/slaves/slave/a%2Fb%20c/details",
			host:       "q7w8e9r0t1.execute-api.us-east-1.amazonaws.com", remoteAddr: "198.51.100.23", requestID: "BVgD9sTUoAMEf6T=",
			query: url.Values{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := invoke(t, t.Context(), testMux(), fixture(t, tt.file))
			if a.StatusCode != http.StatusOK {
				t.Fatalf("got status %d (body %s), want 200", a.StatusCode, a.Body)
			}
			var s seen
			if err := json.Unmarshal([]byte(a.Body), &s); err != nil {
				t.Fatalf("got body %q, want the echo JSON: %v", a.Body, err)
			}
			for _, f := range []struct{ field, got, want string }{
				{"pattern", s.Pattern, tt.pattern},
				{"slaveId", s.SlaveID, tt.slaveID},
				{"URL.Path", s.Path, tt.path},
				{"RequestURI", s.RequestURI, tt.requestURI},
				{"Host", s.Host, tt.host},
				{"RemoteAddr", s.RemoteAddr, tt.remoteAddr},
				{"RequestID", s.RequestID, tt.requestID},
				{"body", s.Body, tt.body},
			} {
				if f.got != f.want {
					t.Errorf("got %s %q, want %q", f.field, f.got, f.want)
				}
			}
			if s.ContentLength != int64(len(tt.body)) {
				t.Errorf("got ContentLength %d, want %d", s.ContentLength, len(tt.body))
			}
			if !reflect.DeepEqual(s.Query, tt.query) {
				t.Errorf("got query %v, want %v", s.Query, tt.query)
			}
			for k, want := range tt.header {
				if got := s.Header[k]; !slices.Equal(got, want) {
					t.Errorf("got header %s %q, want %q", k, got, want)
				}
			}
			if tt.absentHeader != "" && s.Header.Get(tt.absentHeader) != "" {
				t.Errorf("got header %s %q, want it moved out of the header map", tt.absentHeader, s.Header.Get(tt.absentHeader))
			}
			if !reflect.DeepEqual(s.Identity, tt.identity) {
				t.Errorf("got identity %+v, want %+v", s.Identity, tt.identity)
			}
		})
	}
}

func TestEventFieldsMatchOnlyTheirExactNames(t *testing.T) {
	tests := []struct {
		name          string
		event         string
		pattern, path string
		groups        []string
	}{
		{
			name:    "a REST method and path in another case are unknown fields",
			event:   `{"httpMethod":"GET","path":"/api/slaves","PATH":"/api/slaves/dead","HttpMethod":"DELETE"}`,
			pattern: "GET /api/slaves", path: "/api/slaves",
		},
		{
			name: "a REST request context in another case cannot add to the authorizer's",
			event: `{"httpMethod":"GET","path":"/api/slaves","requestContext":{"authorizer":{"principalId":"u","groups":"ops"}},` +
				`"RequestContext":{"authorizer":{"groups":"admin"}}}`,
			pattern: "GET /api/slaves", path: "/api/slaves", groups: []string{"ops"},
		},
		{
			name: "an HTTP API path and method in another case are unknown fields",
			event: `{"version":"2.0","rawPath":"/api/slaves","RawPath":"/api/slaves/dead",` +
				`"requestContext":{"http":{"method":"GET"},"HTTP":{"method":"DELETE"},"authorizer":{"lambda":{"id":"u","groups":"ops"}},"Authorizer":{"lambda":{"groups":"admin"}}}}`,
			pattern: "GET /api/slaves", path: "/api/slaves", groups: []string{"ops"},
		},
		{
			name: "a version in another case does not make a REST event an HTTP API one",
			event: `{"Version":"2.0","httpMethod":"GET","path":"/api/slaves",` +
				`"rawPath":"/api/slaves/dead","requestContext":{"http":{"method":"DELETE"}}}`,
			pattern: "GET /api/slaves", path: "/api/slaves",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := invoke(t, t.Context(), testMux(), json.RawMessage(tt.event))
			var s seen
			if err := json.Unmarshal([]byte(a.Body), &s); err != nil || a.StatusCode != http.StatusOK {
				t.Fatalf("got status %d body %s, want 200 and the echo JSON", a.StatusCode, a.Body)
			}
			if s.Pattern != tt.pattern || s.Path != tt.path {
				t.Errorf("got %q at %q, want %q at %q", s.Pattern, s.Path, tt.pattern, tt.path)
			}
			var groups []string
			if s.Identity != nil {
				groups = s.Identity.Groups
			}
			if !slices.Equal(groups, tt.groups) {
				t.Errorf("got groups %q, want %q", groups, tt.groups)
			}
		})
	}
}

// The gateway refuses a query string it cannot parse; one it passed on is
// read as the gateway read it, so web.Wrap never refuses it in Lambda.
func TestAnHTTPAPIQueryThatDoesNotParseIsReadFromTheGatewaysParameters(t *testing.T) {
	tests := []struct {
		name, raw string
		params    map[string]string
		want      url.Values
	}{
		{"a semicolon inside a value", "state=FROZEN;x", map[string]string{"state": "FROZEN;x"}, url.Values{"state": {"FROZEN;x"}}},
		{"a percent sign escaping nothing", "state=FROZEN%", map[string]string{"state": "FROZEN%"}, url.Values{"state": {"FROZEN%"}}},
		{"a query that parses keeps its raw form and every value", "state=ACTIVE&state=FROZEN", map[string]string{"state": "ACTIVE,FROZEN"}, url.Values{"state": {"ACTIVE", "FROZEN"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params, _ := json.Marshal(tt.params)
			event := fmt.Sprintf(`{"version":"2.0","rawPath":"/api/slaves","rawQueryString":%q,"queryStringParameters":%s,"requestContext":{"http":{"method":"GET"}}}`, tt.raw, params)
			h := web.Wrap(testMux(), web.Options{Logger: slog.New(slog.DiscardHandler)})
			a := invoke(t, t.Context(), h, json.RawMessage(event))
			var s seen
			if err := json.Unmarshal([]byte(a.Body), &s); err != nil || a.StatusCode != http.StatusOK {
				t.Fatalf("got status %d body %s, want 200 and the echo JSON", a.StatusCode, a.Body)
			}
			if !reflect.DeepEqual(s.Query, tt.want) {
				t.Errorf("got query %v, want %v", s.Query, tt.want)
			}
		})
	}
}

func TestRequestIDPrefersTheGatewayIDOverTheLambdaID(t *testing.T) {
	lambdaCtx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-7"})
	noGatewayID := withField(t, fixture(t, "rest-iam.json"), []string{"requestContext", "requestId"}, "")
	tests := []struct {
		name  string
		ctx   context.Context
		event json.RawMessage
		want  string
	}{
		{"the gateway id wins when both are present", lambdaCtx, fixture(t, "rest-iam.json"), "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"},
		{"the Lambda id is used when the event has none", lambdaCtx, noGatewayID, "lambda-7"},
		{"the id is empty when neither is present", context.Background(), noGatewayID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, err := Request(tt.ctx, tt.event)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if got := RequestID(r); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("a request that did not come through edge has no id", func(t *testing.T) {
		if got := RequestID(httptest.NewRequest(http.MethodGet, "/", nil)); got != "" {
			t.Errorf("got %q, want empty", got)
		}
	})
}

func TestHandlerAnswersMalformedEventsWith400WithoutCallingTheHandler(t *testing.T) {
	tests := []struct {
		name   string
		event  json.RawMessage
		format Format
	}{
		{"a REST body that is not base64", fixture(t, "rest-post-bad-base64.json"), FormatV1},
		{"an HTTP API body that is not base64", withField(t, fixture(t, "http-jwt.json"), []string{"isBase64Encoded"}, true), FormatV2},
		{"a path with a broken escape", withField(t, fixture(t, "rest-iam.json"), []string{"path"}, "/api/slaves/slave/a%zz"), FormatV1},
		{"an escaped path that is not absolute", withField(t, fixture(t, "http-jwt.json"), []string{"rawPath"}, "%2Fapi%2Fslaves"), FormatV2},
		{"a body of the wrong JSON type", withField(t, fixture(t, "rest-iam.json"), []string{"body"}, 42), FormatV1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("got the handler called, want it skipped") })
			a := invoke(t, t.Context(), h, tt.event)
			var body struct {
				Code    int     `json:"code"`
				Message *string `json:"message"`
			}
			if err := json.Unmarshal([]byte(a.Body), &body); err != nil || a.StatusCode != 400 || body.Code != 400 || body.Message == nil || *body.Message == "" {
				t.Errorf("got status %d body %s, want 400 with a JSON code and message", a.StatusCode, a.Body)
			}
			if got := a.Headers["Content-Type"]; got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			// The same headers and ending as every other error of the API.
			if a.Headers["X-Content-Type-Options"] != "nosniff" || a.Headers["Cache-Control"] != "no-store" || !strings.HasSuffix(a.Body, "}\n") {
				t.Errorf("got headers %v and body %q, want nosniff, no-store and one line, ended", a.Headers, a.Body)
			}
		})
	}
}

func TestHandlerReturnsAnErrorForPayloadsThatAreNotProxyEvents(t *testing.T) {
	for _, tt := range []struct{ name, event string }{
		{"a JSON string", `"hello"`},
		{"a JSON array", `[1, 2]`},
		{"JSON null", `null`},
		{"an empty object", `{}`},
		{"an SQS event", `{"Records":[{"messageId":"1","body":"x"}]}`},
		{"a 2.0 event without a method", `{"version":"2.0","rawPath":"/api/slaves","requestContext":{}}`},
		{"a REST event without a method", `{"path":"/api/slaves","requestContext":{"requestId":"x"}}`},
		{"a method of the wrong type", `{"httpMethod":5}`},
		{"text that is not JSON", `GET /api/slaves`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("got the handler called, want it skipped") })
			a, err := serve(t.Context(), h, json.RawMessage(tt.event))
			if !errors.Is(err, ErrNotProxyEvent) {
				t.Errorf("got answer %+v error %v, want ErrNotProxyEvent", a, err)
			}
		})
	}
}

func TestHandlerConvertsTheResponse(t *testing.T) {
	gz := gzipped(t, `{"id":"x"}`)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	tests := []struct {
		name    string
		file    string
		serve   http.HandlerFunc
		status  int
		headers map[string]string
		cookies []string
		body    []byte
	}{
		{
			name: "a handler that writes nothing answers 200 with an empty body", file: "rest-get-query.json",
			serve:  func(http.ResponseWriter, *http.Request) {},
			status: 200, headers: map[string]string{}, body: nil,
		},
		{
			name: "repeated headers are joined, and Set-Cookie goes to the cookies", file: "rest-get-query.json",
			serve: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header()["Vary"] = []string{"Accept", "Origin"}
				w.Header().Add("Set-Cookie", "a=1")
				w.Header().Add("Set-Cookie", "b=2; HttpOnly")
				w.WriteHeader(http.StatusConflict)
				_, _ = io.WriteString(w, `{"code":409,"message":"busy"}`)
			},
			status:  409,
			headers: map[string]string{"Content-Type": "application/json", "Vary": "Accept, Origin"},
			cookies: []string{"a=1", "b=2; HttpOnly"},
			body:    []byte(`{"code":409,"message":"busy"}`),
		},
		{
			name: "an HTTP API event is answered in the same format", file: "http-get-cookies.json",
			serve: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{"ok":true}`)
			},
			status:  201,
			headers: map[string]string{"Content-Type": "application/json"},
			body:    []byte(`{"ok":true}`),
		},
		{
			name: "a gzip body goes as its bytes", file: "rest-get-query.json",
			serve: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", "gzip")
				_, _ = w.Write(gz)
			},
			status:  200,
			headers: map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"},
			body:    gz,
		},
		{
			name: "a binary body goes as its bytes", file: "rest-get-query.json",
			serve: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				_, _ = w.Write(png)
			},
			status:  200,
			headers: map[string]string{"Content-Type": "image/png"},
			body:    png,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := invoke(t, t.Context(), tt.serve, fixture(t, tt.file))
			if a.StatusCode != tt.status {
				t.Errorf("got status %d, want %d", a.StatusCode, tt.status)
			}
			if !reflect.DeepEqual(a.Headers, tt.headers) {
				t.Errorf("got headers %v, want %v", a.Headers, tt.headers)
			}
			if !slices.Equal(a.Cookies, tt.cookies) {
				t.Errorf("got cookies %q, want %q", a.Cookies, tt.cookies)
			}
			if !bytes.Equal([]byte(a.Body), tt.body) {
				t.Errorf("got body %q, want %q", a.Body, tt.body)
			}
		})
	}
}

func TestGroupsReadsEveryFormTheGatewayDelivers(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want []string
	}{
		{"a single group", "admin", []string{"admin"}},
		{"a comma-separated list", "admin,ops", []string{"admin", "ops"}},
		{"space around names is trimmed", " admin , ops ", []string{"admin", "ops"}},
		{"a REST Cognito bracketed list", "[admin, ops]", []string{"admin", "ops"}},
		{"a JSON array in a string", `["admin","ops"]`, []string{"admin", "ops"}},
		{"a JSON array in a string with space around it", ` ["admin", "ops"] `, []string{"admin", "ops"}},
		{"a real JSON array", []any{"admin", "ops"}, []string{"admin", "ops"}},
		{"an empty string", "", nil},
		{"only space", " \t ", nil},
		{"only commas", " , ,", nil},
		{"empty brackets", "[]", nil},
		{"an empty JSON array", []any{}, nil},
		{"no claim at all", nil, nil},
		{"a claim that is neither a string nor an array", json.Number("7"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := groups(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A group name may hold spaces: splitting on them would read "Helpdesk
// Admins" as the group "Admins" and let a help desk change slaves.
func TestGroupsKeepSpacesInsideNames(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want []string
	}{
		{"a name with a space is one group", "Helpdesk Admins", []string{"Helpdesk Admins"}},
		{"a name with a tab is one group", "Helpdesk\tAdmins", []string{"Helpdesk\tAdmins"}},
		{"a list of names with spaces", "Ops, Helpdesk Admins ,Site Reliability", []string{"Ops", "Helpdesk Admins", "Site Reliability"}},
		{"a bracketed name with a space is one group", "[Helpdesk Admins]", []string{"Helpdesk Admins"}},
		{"a bracketed space-separated list is one name", "[admin ops]", []string{"admin ops"}},
		{"a bracketed list of names with spaces", "[Ops, Helpdesk Admins]", []string{"Ops", "Helpdesk Admins"}},
		{"only one pair of brackets is stripped", "[[admin]]", []string{"[admin]"}},
		{"a JSON array in a string keeps spaces inside names", `["Helpdesk Admins", " ops "]`, []string{"Helpdesk Admins", "ops"}},
		{"a real JSON array keeps spaces inside names", []any{"Helpdesk Admins", " ops ", ""}, []string{"Helpdesk Admins", "ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := groups(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLambdaAuthorizerIDsKeepTheirExactText(t *testing.T) {
	event := fixture(t, "rest-lambda-authorizer.json")
	tests := []struct {
		name, from, to, want string
	}{
		{"a numeric userId keeps every digit", `"principalId": "u-1042"`, `"userId": 90071992547409931`, "90071992547409931"},
		{"a boolean id reads as its JSON text", `"principalId": "u-1042"`, `"id": true`, "true"},
		{"an empty principalId falls back to id", `"principalId": "u-1042"`, `"principalId": "", "id": "u-7"`, "u-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := bytes.Replace(event, []byte(tt.from), []byte(tt.to), 1)
			if bytes.Equal(changed, event) {
				t.Fatalf("fixture has no %s", tt.from)
			}
			r, _, err := Request(t.Context(), changed)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := access.FromContext(r.Context())
			if id.ID != tt.want {
				t.Errorf("got id %q, want %q", id.ID, tt.want)
			}
		})
	}
	t.Run("a context with no id key attaches no identity", func(t *testing.T) {
		r, _, err := Request(t.Context(), bytes.Replace(event, []byte(`"principalId": "u-1042"`), []byte(`"principalId": ""`), 1))
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := access.FromContext(r.Context()); ok {
			t.Errorf("got identity %+v, want none", id)
		}
	})
}

// withField returns event with the value at path replaced.
func withField(t *testing.T, event json.RawMessage, path []string, value any) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(event, &m); err != nil {
		t.Fatal(err)
	}
	inner := m
	for _, k := range path[:len(path)-1] {
		inner = inner[k].(map[string]any)
	}
	inner[path[len(path)-1]] = value
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
