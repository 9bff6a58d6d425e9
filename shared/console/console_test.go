package console_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/console"
)

func handler(t *testing.T, cfg console.Config) *console.Handler {
	t.Helper()
	h, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestThePageNamesTheCurrentAssetsAndIsRevalidated(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	res := get(h, "/")
	if res.Code != 200 || !strings.HasPrefix(res.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("got %d %s, want the page", res.Code, res.Header().Get("Content-Type"))
	}
	if got := res.Header().Get("Cache-Control"); got != "no-cache" {
		t.Errorf("got Cache-Control %q, want no-cache", got)
	}
	etag := res.Header().Get("ETag")
	if etag == "" {
		t.Fatal("got no ETag")
	}
	if again := get(h, "/", "If-None-Match", etag); again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Errorf("revalidation: got %d with %d bytes, want 304 and no body", again.Code, again.Body.Len())
	}
	page := res.Body.String()
	if strings.Contains(page, "{{") {
		t.Errorf("got an unfilled placeholder in the page:\n%s", page)
	}
	refs := regexp.MustCompile(`(?:href|src)="(assets/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("got asset references %v, want the stylesheet and the modules", refs)
	}
	for _, ref := range refs {
		if !strings.HasPrefix(ref[1], "assets/"+h.Version()+"/") {
			t.Errorf("got %s, want it under assets/%s/", ref[1], h.Version())
		}
		a := get(h, "/"+ref[1])
		if a.Code != 200 {
			t.Errorf("GET /%s: got %d, want 200", ref[1], a.Code)
		}
		if got := a.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("GET /%s: got Cache-Control %q, want immutable", ref[1], got)
		}
	}
	csp := res.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self' 'sha256-") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("got Content-Security-Policy %q, want scripts from the site and the hashed redirect only", csp)
	}
}

func TestEveryModuleImportsOnlyAssetsThatExist(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	imports := regexp.MustCompile(`from "\./([^"]+)"`)
	for _, name := range []string{"app.js", "api.js", "auth.js", "fleet.js", "machine.js", "actions.js", "expiring.js", "logs.js"} {
		body := get(h, "/assets/"+h.Version()+"/"+name).Body.String()
		if body == "" {
			t.Fatalf("got no %s", name)
		}
		for _, m := range imports.FindAllStringSubmatch(body, -1) {
			if res := get(h, "/assets/"+h.Version()+"/"+m[1]); res.Code != 200 {
				t.Errorf("%s imports %s: got %d", name, m[1], res.Code)
			}
		}
	}
}

func TestThePagePreloadsEveryModuleItImports(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	page := get(h, "/").Body.String()
	imports := regexp.MustCompile(`from "\./([^"]+)"`)
	seen := map[string]bool{"app.js": true}
	next := []string{"app.js"}
	for len(next) > 0 {
		name := next[0]
		next = next[1:]
		for _, m := range imports.FindAllStringSubmatch(get(h, "/assets/"+h.Version()+"/"+name).Body.String(), -1) {
			if seen[m[1]] {
				continue
			}
			seen[m[1]] = true
			next = append(next, m[1])
			if link := `<link rel="modulepreload" href="assets/` + h.Version() + "/" + m[1] + `">`; !strings.Contains(page, link) {
				t.Errorf("%s imports %s: got no %s in the page", name, m[1], link)
			}
		}
	}
	if len(seen) < 10 {
		t.Errorf("got %d modules from app.js, want every module the console has", len(seen))
	}
}

func TestAssetsAreGzippedForClientsThatAcceptIt(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	path := "/assets/" + h.Version() + "/fleet.js"
	plain := get(h, path)
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{{"gzip, deflate, br", true}, {"br;q=1, gzip;q=0.5", true}, {"gzip;q=0", false}, {"", false}} {
		res := get(h, path, "Accept-Encoding", tc.accept)
		if got := res.Header().Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("Accept-Encoding %q: got gzip %v, want %v", tc.accept, got, tc.gzip)
			continue
		}
		body := res.Body.Bytes()
		if tc.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		}
		if !bytes.Equal(body, plain.Body.Bytes()) {
			t.Errorf("Accept-Encoding %q: got another body", tc.accept)
		}
		if !strings.Contains(res.Header().Get("Vary"), "Accept-Encoding") {
			t.Errorf("got Vary %q, want Accept-Encoding", res.Header().Get("Vary"))
		}
	}
}

// The console names its assets' types itself, the same on every machine
// whatever its /etc/mime.types: each asset has one, a browser runs a module
// only if it is JavaScript, and applies a stylesheet only if it is CSS.
func TestEveryAssetIsServedWithItsType(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	entries, err := os.ReadDir("assets")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8"}
	for _, e := range entries {
		path := "/assets/" + h.Version() + "/" + e.Name()
		if e.Name() == "index.html" {
			path = "/"
		}
		got := get(h, path).Header().Get("Content-Type")
		if w, ok := want[filepath.Ext(e.Name())]; ok && got != w || got == "" || got == "application/octet-stream" {
			t.Errorf("%s: got Content-Type %q, want %q", e.Name(), got, cmp.Or(want[filepath.Ext(e.Name())], "its type"))
		}
	}
	if got := get(h, "/console-config.json").Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("console-config.json: got Content-Type %q, want application/json", got)
	}
}

// Assets are compressed when first asked for, by requests that may come at
// once (the local server serves the page's modules concurrently): each
// answer is its asset's own body, whole, not a neighbour's.
func TestEveryAssetsGzipFormIsItsOwnBodyUnderConcurrentFirstRequests(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	entries, err := os.ReadDir("assets")
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/", "/console-config.json"}
	for _, e := range entries {
		if e.Name() != "index.html" {
			paths = append(paths, "/assets/"+h.Version()+"/"+e.Name())
		}
	}
	const each = 4
	zipped := make([]*httptest.ResponseRecorder, len(paths)*each)
	var wg sync.WaitGroup
	for i := range zipped {
		wg.Go(func() { zipped[i] = get(h, paths[i%len(paths)], "Accept-Encoding", "gzip") })
	}
	wg.Wait()
	for i, res := range zipped {
		path := paths[i%len(paths)]
		plain := get(h, path)
		if plain.Code != 200 || res.Header().Get("Content-Encoding") != "gzip" {
			t.Errorf("%s: got %d and Content-Encoding %q, want 200 and gzip", path, plain.Code, res.Header().Get("Content-Encoding"))
			continue
		}
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.Equal(body, plain.Body.Bytes()) {
			t.Errorf("%s: got a gzip form of %d bytes unzipped, want its own body of %d", path, len(body), plain.Body.Len())
		}
	}
}

func TestUnknownPathsAndOldVersionsAreJSON404s(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthNone})
	for _, path := range []string{"/assets/0123456789ab/app.js", "/assets/" + h.Version() + "/nothing.js", "/api/nothing", "/index.htm"} {
		res := get(h, path)
		var body struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if res.Code != 404 || json.Unmarshal(res.Body.Bytes(), &body) != nil || body.Code != 404 {
			t.Errorf("GET %s: got %d %s, want a JSON 404", path, res.Code, res.Body)
		}
	}
	req := httptest.NewRequest("POST", "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 404 {
		t.Errorf("POST /: got %d, want 404", rec.Code)
	}
}

func TestSignInFollowsTheAPIsAuthorizer(t *testing.T) {
	for _, tc := range []struct {
		mode       access.Mode
		authorizer string
		want       console.Config
	}{
		{access.ModeNone, "AWS_IAM", console.Config{Auth: console.AuthNone}},
		{access.ModeAuthorizer, "AWS_IAM", console.Config{Auth: console.AuthIAM}},
		{access.ModeAuthorizer, "LAMBDA_TOKEN", console.Config{Auth: console.AuthToken}},
		{access.ModeAuthorizer, "LAMBDA_REQUEST", console.Config{Auth: console.AuthToken}},
		{access.ModeAuthorizer, "COGNITO_USER_POOLS", console.Config{Auth: console.AuthCognito, CognitoDomain: "fleet.auth.us-east-1.amazoncognito.com", CognitoClientID: "abc"}},
	} {
		got := console.SignIn(console.API{Policy: access.Policy{Mode: tc.mode}, Authorizer: tc.authorizer,
			CognitoDomain: "fleet.auth.us-east-1.amazoncognito.com", CognitoClientID: "abc"})
		if got != tc.want {
			t.Errorf("%s %s: got %+v, want %+v", tc.mode, tc.authorizer, got, tc.want)
		}
	}
	// Deployed with AuthHeader=X-Fleet-Token, the page sends its token there.
	for _, authorizer := range []string{"LAMBDA_TOKEN", "LAMBDA_REQUEST", "COGNITO_USER_POOLS"} {
		got := console.SignIn(console.API{Policy: access.Policy{Mode: access.ModeAuthorizer}, Authorizer: authorizer, AuthHeader: "X-Fleet-Token"})
		if got.AuthHeader != "X-Fleet-Token" {
			t.Errorf("%s with AuthHeader X-Fleet-Token: got %+v, want the token sent in X-Fleet-Token", authorizer, got)
		}
	}
}

func TestTheConfigIsServedAndCognitoIsAllowedByThePolicy(t *testing.T) {
	h := handler(t, console.Config{Auth: console.AuthCognito, CognitoDomain: "fleet.auth.us-east-1.amazoncognito.com", CognitoClientID: "abc"})
	res := get(h, "/console-config.json")
	if want := `{"auth":"cognito","cognitoDomain":"fleet.auth.us-east-1.amazoncognito.com","cognitoClientId":"abc"}`; res.Body.String() != want {
		t.Errorf("got %s, want %s", res.Body, want)
	}
	csp := get(h, "/").Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' https://fleet.auth.us-east-1.amazoncognito.com") {
		t.Errorf("got %q, want the token endpoint's origin allowed", csp)
	}
}
