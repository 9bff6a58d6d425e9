// Package console serves the operator console: a handful of plain ES
// modules, a stylesheet and one page, embedded in the binary and served as
// they are (no build step). The console is a client of the public API like
// any other: it calls /api/slaves and /api/logs from the browser, with the
// caller's own credentials, so this package reads no table and no bucket.
//
// Every asset is served under assets/<version>/, where the version is a hash
// of all of them, computed at startup: the page names the current version,
// so assets can be cached forever (immutable) while the page itself is
// revalidated on every load (no-cache with an ETag). Relative imports between
// the modules stay inside one version's directory.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/web"
)

//go:embed assets
var embedded embed.FS

// Auth modes of the console's sign-in, as console-config.json names them.
const (
	AuthNone    = "none"    // AUTH_MODE none: every call is allowed
	AuthToken   = "token"   // a Lambda authorizer: the user pastes a token
	AuthCognito = "cognito" // Cognito hosted UI, authorization code with PKCE
	AuthIAM     = "iam"     // SigV4: a browser cannot sign, the page says so
)

// Config is what the page learns from console-config.json.
type Config struct {
	Auth            string `json:"auth"`
	CognitoDomain   string `json:"cognitoDomain,omitempty"`
	CognitoClientID string `json:"cognitoClientId,omitempty"`
	// AuthHeader is the header the token goes in (token and cognito);
	// empty means Authorization.
	AuthHeader string `json:"authHeader,omitempty"`
}

// file is one asset as served: its body, its gzip form and its type.
type file struct {
	body        []byte
	gzipped     func() []byte // compressed on the first request that accepts it
	contentType string
	etag        string
	csp         string // the page's Content-Security-Policy
}

// Handler serves the console. Build it with New.
type Handler struct {
	version string           // the assets' directory, a hash of their contents
	assets  map[string]*file // by name, without the version
	page    *file
	config  *file
	routes  *web.Routes
}

// redirect is the page's only inline script: the assets are named
// relative to the page, so a page opened without its trailing slash
// (https://host/prod instead of https://host/prod/) reloads with it.
const redirect = `if(!location.pathname.endsWith("/"))location.replace(location.pathname+"/"+location.search+location.hash)`

// API is how the API the page calls is signed in to; the console
// function's configuration (AUTH_MODE, API_AUTHORIZER, COGNITO_DOMAIN,
// COGNITO_CLIENT_ID, API_AUTH_HEADER, see config.Console) converts to it.
type API struct {
	Policy          access.Policy // none: the page needs no sign-in
	Authorizer      string        // AWS_IAM, COGNITO_USER_POOLS, LAMBDA_TOKEN or LAMBDA_REQUEST
	CognitoDomain   string        // the user pool's hosted UI domain
	CognitoClientID string        // the app client the console signs in with
	AuthHeader      string        // the header the authorizer reads the token from
}

// SignIn is the sign-in the page offers for the API that c describes.
func SignIn(c API) Config {
	if c.Policy.Open() {
		return Config{Auth: AuthNone}
	}
	switch c.Authorizer {
	case "COGNITO_USER_POOLS":
		return Config{Auth: AuthCognito, CognitoDomain: c.CognitoDomain, CognitoClientID: c.CognitoClientID, AuthHeader: tokenHeader(c)}
	case "LAMBDA_TOKEN", "LAMBDA_REQUEST":
		return Config{Auth: AuthToken, AuthHeader: tokenHeader(c)}
	}
	return Config{Auth: AuthIAM}
}

// tokenHeader is the header the page sends its token in, when it is not
// the default Authorization.
func tokenHeader(c API) string {
	if strings.EqualFold(c.AuthHeader, "Authorization") {
		return ""
	}
	return c.AuthHeader
}

// New returns the console's handler for the given sign-in configuration.
// The error says which embedded asset could not be read, which only a
// broken build gives.
func New(cfg Config) (*Handler, error) {
	// The console's routes are public: a browser loads them before anyone
	// signs in, so no policy is ever asked.
	h := &Handler{assets: map[string]*file{}, routes: web.NewRoutes(access.Policy{})}
	h.routes.Handle("GET /", access.Anyone, web.Plain(h.serveFile))
	sum := sha256.New()
	var index []byte
	err := fs.WalkDir(embedded, "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := embedded.ReadFile(name)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(name, "assets/")
		if rel == "index.html" {
			index = body
			return nil
		}
		fmt.Fprintf(sum, "%s\x00%d\x00", rel, len(body))
		sum.Write(body)
		h.assets[rel] = newFile(body, contentType(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	if index == nil {
		return nil, fmt.Errorf("console assets: no index.html")
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:12]
	scriptHash := sha256.Sum256([]byte(redirect))
	page := bytes.ReplaceAll(index, []byte("{{preload}}"), preloads(h.assets))
	page = bytes.ReplaceAll(page, []byte("{{assets}}"), []byte("assets/"+h.version+"/"))
	page = bytes.ReplaceAll(page, []byte("{{redirect}}"), []byte(redirect))
	h.page = newFile(page, "text/html; charset=utf-8")
	h.page.csp = "default-src 'self'; script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(scriptHash[:]) + "'; " +
		"style-src 'self'; img-src 'self' data:; connect-src 'self'" + cognitoOrigin(cfg) + "; " +
		"form-action 'self'" + cognitoOrigin(cfg) + "; frame-ancestors 'none'; base-uri 'self'"
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	h.config = newFile(raw, "application/json")
	return h, nil
}

// preloads names every module but app.js (which the page loads itself) as
// a modulepreload link: the browser then fetches them all at once instead
// of one level of imports after another, each a round trip, before the
// first request for the fleet can start.
func preloads(assets map[string]*file) []byte {
	var names []string
	for name := range assets {
		if path.Ext(name) == ".js" && name != "app.js" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var b bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&b, "<link rel=\"modulepreload\" href=\"{{assets}}%s\">\n", name)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// cognitoOrigin is the hosted UI's origin, which the page talks to for its
// tokens, with a leading space; empty without Cognito.
func cognitoOrigin(cfg Config) string {
	if cfg.Auth != AuthCognito || cfg.CognitoDomain == "" {
		return ""
	}
	return " " + CognitoURL(cfg.CognitoDomain)
}

// CognitoURL is the hosted UI's base URL for a domain given either as a
// host name (fleet.auth.us-east-1.amazoncognito.com, auth.example.com) or as
// a URL.
func CognitoURL(domain string) string {
	domain = strings.TrimRight(strings.TrimSpace(domain), "/")
	if strings.HasPrefix(domain, "https://") || strings.HasPrefix(domain, "http://") {
		return domain
	}
	return "https://" + domain
}

// Version is the assets' current directory name under assets/.
func (h *Handler) Version() string { return h.version }

func newFile(body []byte, contentType string) *file {
	sum := sha256.Sum256(body)
	return &file{body: body, gzipped: sync.OnceValue(func() []byte { return compress(body) }),
		contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// compressors hold gzip's state, about a megabyte each, between assets.
var compressors = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return zw
}}

// compress returns body's gzip form. The assets are compressed as they are
// first asked for, not when the function starts: compressing all of them
// was most of ConsoleFunction's cold start, before the page's first
// request (docs/decisions.md "Cold starts").
func compress(body []byte) []byte {
	zw := compressors.Get().(*gzip.Writer)
	defer compressors.Put(zw)
	var z bytes.Buffer
	zw.Reset(&z)
	zw.Write(body)
	zw.Close()
	return z.Bytes()
}

// contentType is the type of an asset, by its extension: the console's own
// list rather than the mime package's, whose first lookup reads and parses
// the machine's /etc/mime.types (16,000 allocations, more than a
// millisecond of ConsoleFunction's cold start where there is one) and
// whose answers depend on it.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".ico":
		return "image/x-icon"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".json":
		return "application/json"
	case ".png":
		return "image/png"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// ServeHTTP answers GET and HEAD for the page, console-config.json and the
// current version's assets; anything else is the API's JSON 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.routes.ServeHTTP(w, r) }

// Routes returns the route table, which declares each route's permission.
func (h *Handler) Routes() *web.Routes { return h.routes }

func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/" || p == "/index.html":
		h.serve(w, r, h.page, "no-cache")
	case p == "/console-config.json":
		h.serve(w, r, h.config, "no-cache")
	case strings.HasPrefix(p, "/assets/"+h.version+"/"):
		f, ok := h.assets[strings.TrimPrefix(p, "/assets/"+h.version+"/")]
		if !ok {
			web.NotFound(w, r)
			return
		}
		h.serve(w, r, f, "public, max-age=31536000, immutable")
	default:
		web.NotFound(w, r)
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f *file, cacheControl string) {
	hd := w.Header()
	hd.Set("Content-Type", f.contentType)
	hd.Set("Cache-Control", cacheControl)
	hd.Set("ETag", f.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	if f.csp != "" {
		hd.Set("Content-Security-Policy", f.csp)
		hd.Set("Referrer-Policy", "no-referrer")
	}
	if hd.Get("Vary") == "" { // web.Wrap sets it already
		hd.Set("Vary", "Accept-Encoding")
	}
	body := f.body
	if web.AcceptsGzip(r.Header.Get("Accept-Encoding")) {
		hd.Set("Content-Encoding", "gzip")
		body = f.gzipped()
	}
	// If-None-Match against the ETag, HEAD, ranges and Content-Length, as
	// the standard library serves any file.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}
