//go:build integration

package console_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/dev/browser"
	"github.com/fleetops/fleet/shared/console"
)

// signedSite serves the console with cfg in front of the test API, which
// answers 401 unless the header of cfg.AuthHeader (Authorization when
// empty) is token, as API Gateway's authorizer does. seen records the
// values of that header and the URLs the API got.
func signedSite(t *testing.T, cfg console.Config, token string) (*httptest.Server, *requestLog) {
	t.Helper()
	ui, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := &requestLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			ui.ServeHTTP(w, r)
			return
		}
		seen.add(r.Header.Get(cmp.Or(cfg.AuthHeader, "Authorization")), r.URL.String())
		if r.Header.Get(cmp.Or(cfg.AuthHeader, "Authorization")) != token || (cfg.AuthHeader != "" && r.Header.Get("Authorization") != "") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"code":401,"message":"Unauthorized"}`)
			return
		}
		// The API call ends with the page's: a follow of the feed held
		// open when the tab closes does not hold the server's Close.
		r2, _ := http.NewRequestWithContext(r.Context(), r.Method, site.URL+r.URL.String(), r.Body)
		res, err := http.DefaultClient.Do(r2)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.Header().Set("Content-Type", res.Header.Get("Content-Type"))
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body)
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

type requestLog struct {
	mu   sync.Mutex
	auth []string
	urls []string
}

func (l *requestLog) add(auth, u string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.auth, l.urls = append(l.auth, auth), append(l.urls, u)
}

func (l *requestLog) check(t *testing.T, token string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.auth) == 0 || l.auth[len(l.auth)-1] != token {
		t.Errorf("got token headers %q, want the last to be the token", l.auth)
	}
	for _, u := range l.urls {
		if strings.Contains(u, token) {
			t.Errorf("got the token in the URL %s", u)
		}
	}
}

// noTokenOutsideTheTab checks where the page keeps the token: in
// sessionStorage only, never in the address or localStorage.
func noTokenOutsideTheTab(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	var where struct{ URL, Local, Session string }
	do(t, ctx, chromedp.Evaluate(`({URL: location.href, Local: JSON.stringify(localStorage), Session: JSON.stringify(sessionStorage)})`, &where))
	if strings.Contains(where.URL, token) || strings.Contains(where.Local, token) {
		t.Errorf("got the token outside sessionStorage: %+v", where)
	}
	if !strings.Contains(where.Session, token) {
		t.Errorf("got sessionStorage %s, want the token kept for the tab", where.Session)
	}
}

func TestLambdaAuthorizerTokenSignIn(t *testing.T) {
	const token = "Bearer fleet-ops-7f3a"
	srv, seen := signedSite(t, console.Config{Auth: console.AuthToken}, token)
	ctx := tab(t)
	open(t, ctx, srv.URL, "#/fleet", "input[type=password]")
	do(t, ctx, browser.Screenshot(filepath.Join(shots, "signin-token-light-1440.png")))
	do(t, ctx, chromedp.SendKeys("input[type=password]", token), chromedp.Click(`//button[text()="Sign in"]`, chromedp.BySearch))
	eventually(t, ctx, "the fleet", `document.querySelector("table.fleet") !== null`)
	seen.check(t, token)
	noTokenOutsideTheTab(t, ctx, token)

	do(t, ctx, chromedp.Click(`//button[text()="Sign out"]`, chromedp.BySearch))
	eventually(t, ctx, "the sign-in form", `document.querySelector("input[type=password]") !== null`)
}

// Deployed with AuthHeader=X-Fleet-Token (for tools that send their
// headers to S3's links too), the page sends the token there, and no
// Authorization header.
func TestLambdaAuthorizerTokenInAnotherHeader(t *testing.T) {
	const token = "Bearer fleet-ops-other-header"
	srv, seen := signedSite(t, console.Config{Auth: console.AuthToken, AuthHeader: "X-Fleet-Token"}, token)
	ctx := tab(t)
	open(t, ctx, srv.URL, "#/fleet", "input[type=password]")
	eventually(t, ctx, "the hint naming the header", `document.body.innerText.includes("Sent as the X-Fleet-Token header")`)
	do(t, ctx, chromedp.SendKeys("input[type=password]", token), chromedp.Click(`//button[text()="Sign in"]`, chromedp.BySearch))
	eventually(t, ctx, "the fleet", `document.querySelector("table.fleet") !== null`)
	seen.check(t, token)
}

// fakeCognito is the part of a Cognito hosted UI the console uses:
// /oauth2/authorize signs the user in at once and redirects back with a
// code; /oauth2/token gives the ID token for the code and its PKCE verifier.
func fakeCognito(t *testing.T, clientID, idToken string) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	challenges := map[string]string{} // code → code_challenge
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/oauth2/authorize":
			q := r.URL.Query()
			if q.Get("response_type") != "code" || q.Get("client_id") != clientID || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
				http.Error(w, "bad authorize request "+r.URL.RawQuery, 400)
				return
			}
			mu.Lock()
			challenges["code-1"] = q.Get("code_challenge")
			mu.Unlock()
			back, _ := url.Parse(q.Get("redirect_uri"))
			back.RawQuery = url.Values{"code": {"code-1"}, "state": {q.Get("state")}}.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
		case "/oauth2/token":
			w.Header().Set("Access-Control-Allow-Origin", "*")
			r.ParseForm()
			mu.Lock()
			challenge := challenges[r.Form.Get("code")]
			mu.Unlock()
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			if r.Form.Get("grant_type") != "authorization_code" || r.Form.Get("client_id") != clientID || challenge == "" ||
				base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":"invalid_grant"}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id_token": idToken, "access_token": "access", "expires_in": 3600, "token_type": "Bearer"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCognitoSignInWithPKCE(t *testing.T) {
	const idToken = "eyJ.fake-id-token.sig"
	cognito := fakeCognito(t, "console-client", idToken)
	srv, seen := signedSite(t, console.Config{Auth: console.AuthCognito, CognitoDomain: cognito.URL, CognitoClientID: "console-client"}, idToken)
	ctx := tab(t)
	open(t, ctx, srv.URL, "#/expiring", "button.primary")
	do(t, ctx, chromedp.Click(`//button[text()="Sign in"]`, chromedp.BySearch))
	eventually(t, ctx, "the expiring page, signed in", `location.hash === "#/expiring" && document.querySelector("main h1")?.innerText === "Expiring changes"`)
	eventually(t, ctx, "no code left in the address", `location.search === ""`)
	seen.check(t, idToken)
	noTokenOutsideTheTab(t, ctx, idToken)
}

func TestIAMSaysTheConsoleCannotSign(t *testing.T) {
	srv, _ := signedSite(t, console.Config{Auth: console.AuthIAM}, "never")
	ctx := tab(t)
	open(t, ctx, srv.URL, "#/fleet", "main h1")
	eventually(t, ctx, "the explanation", has("main", "AWS_IAM")+" && "+has("main", "COGNITO_USER_POOLS")+" && "+has("main", "command line"))
	do(t, ctx, browser.Screenshot(filepath.Join(shots, "iam-light-1440.png")))
}
