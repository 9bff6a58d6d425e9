// Package apidoc holds the service's OpenAPI description, openapi.yaml at
// the repository root, for the tests and the local server: it loads the
// document once and checks HTTP answers against it (the operation the
// request names, its status, Content-Type, headers and body schema), and
// keeps count of the operations and statuses it saw, so that a suite can
// tell which described routes it never exercised.
//
// Response validation is kin-openapi's (openapi3filter.ValidateResponse).
// Route matching is this package's own: kin-openapi's routers match on the
// decoded path, so an id holding an encoded slash ("a%2Fb") would not
// reach its route, whereas ServeMux, and so the service, matches segments
// of the escaped path.
package apidoc

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"gopkg.in/yaml.v3"

	"github.com/fleetops/fleet/dev/stack"
)

// File is the document's file name at the repository root.
const File = "openapi.yaml"

// ErrUndescribed reports a request that no operation of the document
// describes.
var ErrUndescribed = errors.New("no operation describes")

// Doc is a parsed, validated OpenAPI document and the count of the answers
// checked against it. It is safe for concurrent use.
type Doc struct {
	spec    *openapi3.T
	yaml    []byte
	json    []byte
	ops     []operation
	errBody *openapi3.Schema
	options *openapi3filter.Options

	mu          sync.Mutex
	seen        map[string]map[int]int // "METHOD /path" → status → answers
	undescribed int
}

// operation is one method of one described path.
type operation struct {
	method, path string
	segments     []string // of path, split on "/"
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

func (o operation) String() string { return o.method + " " + o.path }

var loaded struct {
	once sync.Once
	doc  *Doc
	err  error
}

// Load returns the document at the repository root (found with
// stack.RepoRoot), read and parsed once per process: every caller shares
// one Doc and so one count of the answers checked.
func Load() (*Doc, error) {
	loaded.once.Do(func() {
		root, err := stack.RepoRoot()
		if err != nil {
			loaded.err = err
			return
		}
		data, err := os.ReadFile(filepath.Join(root, File))
		if err != nil {
			loaded.err = err
			return
		}
		loaded.doc, loaded.err = Parse(data)
		if loaded.err != nil {
			loaded.err = fmt.Errorf("%s: %w", File, loaded.err)
		}
	})
	return loaded.doc, loaded.err
}

// Parse reads an OpenAPI 3.0 document in YAML (or JSON) and validates it,
// examples included. The document must describe a schema named Error, the
// body of every error answer.
func Parse(data []byte) (*Doc, error) {
	loader := openapi3.NewLoader()
	spec, err := loader.LoadFromData(data)
	if err != nil {
		return nil, err
	}
	if err := spec.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		return nil, err
	}
	asJSON, err := yamlToJSON(data)
	if err != nil {
		return nil, err
	}
	errBody := spec.Components.Schemas["Error"]
	if errBody == nil {
		return nil, errors.New("no schema named Error")
	}
	d := &Doc{spec: spec, yaml: data, json: asJSON, errBody: errBody.Value, seen: map[string]map[int]int{}}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			d.ops = append(d.ops, operation{method: method, path: path, segments: strings.Split(path, "/"), item: item, op: op})
		}
	}
	slices.SortFunc(d.ops, func(a, b operation) int { return strings.Compare(a.String(), b.String()) })
	d.options = &openapi3filter.Options{
		IncludeResponseStatus: true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.SetSchemaErrorMessageCustomizer(schemaMessage),
		},
	}
	return d, nil
}

// schemaMessage words a schema mismatch as the JSON pointer of the value,
// the reason, and the value itself (cut short), without the schema.
func schemaMessage(err *openapi3.SchemaError) string {
	value, _ := json.Marshal(err.Value)
	if len(value) > 200 {
		value = append(value[:200], "..."...)
	}
	reason := err.Reason
	if reason == "" {
		reason = fmt.Sprintf("does not match %q", err.SchemaField)
	}
	if err.Origin != nil {
		reason = err.Origin.Error()
	}
	return fmt.Sprintf("at /%s: %s (got %s)", strings.Join(err.JSONPointer(), "/"), reason, value)
}

// YAML returns the document as written.
func (d *Doc) YAML() []byte { return d.yaml }

// JSON returns the document converted to JSON.
func (d *Doc) JSON() []byte { return d.json }

// Operations returns the described operations whose path starts with
// prefix, as "METHOD /path", sorted.
func (d *Doc) Operations(prefix string) []string {
	var out []string
	for _, o := range d.ops {
		if strings.HasPrefix(o.path, prefix) {
			out = append(out, o.String())
		}
	}
	return out
}

// find returns the operation that serves method and the escaped path of
// u, with its path parameters decoded, the way ServeMux matches: segment by
// segment of the escaped path, a literal segment before a parameter. HEAD
// is served by GET. A parameter never matches an empty, "." or ".."
// segment: those paths never reach a route (web.Wrap answers them).
func (d *Doc) find(method string, u *url.URL) (*operation, map[string]string) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	segments := strings.Split(u.EscapedPath(), "/")
	var best *operation
	var bestParams map[string]string
	bestLiterals := -1
	for i := range d.ops {
		o := &d.ops[i]
		if o.method != method || len(o.segments) != len(segments) {
			continue
		}
		params, literals, ok := match(o.segments, segments)
		if ok && literals > bestLiterals {
			best, bestParams, bestLiterals = o, params, literals
		}
	}
	return best, bestParams
}

func match(template, segments []string) (map[string]string, int, bool) {
	params := map[string]string{}
	literals := 0
	for i, t := range template {
		raw := segments[i]
		value, err := url.PathUnescape(raw)
		if err != nil {
			return nil, 0, false
		}
		if name, ok := strings.CutPrefix(t, "{"); ok && strings.HasSuffix(name, "}") {
			if raw == "" || raw == "." || raw == ".." {
				return nil, 0, false
			}
			params[strings.TrimSuffix(name, "}")] = value
			continue
		}
		if t != value {
			return nil, 0, false
		}
		literals++
	}
	return params, literals, true
}

// Check validates one answer to req against the operation the request
// names: the status must be described for it; a described body must come
// with its exact Content-Type and match its schema (so a null where a field
// is optional, a missing required field or an unknown field fails); a
// response described without content must have an empty body; described
// headers (Retry-After, Cache-Control) must be present and valid; and an
// error body's code must be the status. A gzip body (Content-Encoding:
// gzip) is decompressed first. The answer of HEAD is checked for its status
// only. A request that no operation describes is an error wrapping
// ErrUndescribed.
func (d *Doc) Check(req *http.Request, status int, header http.Header, body []byte) error {
	o, params := d.find(req.Method, req.URL)
	if o == nil {
		return fmt.Errorf("%w %s %s", ErrUndescribed, req.Method, req.URL.EscapedPath())
	}
	d.count(o.String(), status)
	if err := d.check(o, params, req, status, header, body); err != nil {
		return fmt.Errorf("%s answered %d: %w", o, status, err)
	}
	return nil
}

func (d *Doc) check(o *operation, params map[string]string, req *http.Request, status int, header http.Header, body []byte) error {
	ref := o.op.Responses.Status(status)
	if ref == nil {
		return fmt.Errorf("status %d is not described (body %.200q)", status, body)
	}
	header, body, err := decoded(header, body)
	if err != nil {
		return err
	}
	ct := header.Get("Content-Type")
	if req.Method == http.MethodHead {
		body = nil
	} else if len(ref.Value.Content) == 0 {
		if len(body) != 0 {
			return fmt.Errorf("got body %.200q, want none", body)
		}
		if ct != "" && ct != "application/json" {
			return fmt.Errorf("got Content-Type %q on an empty answer, want application/json or none", ct)
		}
	} else if ref.Value.Content[ct] == nil {
		return fmt.Errorf("got Content-Type %q, want one of %v", ct, slices.Sorted(maps.Keys(ref.Value.Content)))
	}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      &routers.Route{Spec: d.spec, Path: o.path, PathItem: o.item, Method: o.method, Operation: o.op},
		},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: d.options,
	}
	if err := openapi3filter.ValidateResponse(req.Context(), input); err != nil {
		return err
	}
	if status >= 400 && len(body) > 0 {
		return errorCode(status, body)
	}
	return nil
}

// CheckAny is Check for a client that may send anything: a request that no
// operation describes must get the answer the service gives an unknown
// route, a JSON 404 error body (web.NotFound), which is checked against the
// Error schema. A query string that does not parse is refused before any
// route is looked up (web.Wrap), so there the answer must be a JSON 400.
func (d *Doc) CheckAny(req *http.Request, status int, header http.Header, body []byte) error {
	err := d.Check(req, status, header, body)
	if !errors.Is(err, ErrUndescribed) {
		return err
	}
	d.mu.Lock()
	d.undescribed++
	d.mu.Unlock()
	want := http.StatusNotFound
	if _, bad := url.ParseQuery(req.URL.RawQuery); bad != nil {
		want = http.StatusBadRequest
	}
	if status != want {
		return fmt.Errorf("%w, yet it was answered %d %.200q, not a %d", err, status, body, want)
	}
	if bad := d.checkError(status, header, body); bad != nil {
		return fmt.Errorf("%w, and its %d: %w", err, status, bad)
	}
	return nil
}

// checkError checks an error answer against the Error schema.
func (d *Doc) checkError(status int, header http.Header, body []byte) error {
	header, body, err := decoded(header, body)
	if err != nil {
		return err
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("got Content-Type %q, want application/json", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("got body %.200q, want JSON: %w", body, err)
	}
	if err := d.errBody.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.SetSchemaErrorMessageCustomizer(schemaMessage)); err != nil {
		return fmt.Errorf("body %.200q is no Error: %w", body, err)
	}
	return errorCode(status, body)
}

// errorCode checks that an error body's code is the answer's status.
func errorCode(status int, body []byte) error {
	var e struct {
		Code int `json:"code"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code != status {
		return fmt.Errorf("got error body %.200q, want code %d", body, status)
	}
	return nil
}

// decoded returns the body decompressed, and the header without its
// Content-Encoding, when the answer is gzip-encoded.
func decoded(header http.Header, body []byte) (http.Header, []byte, error) {
	switch enc := header.Get("Content-Encoding"); enc {
	case "", "identity":
		return header, body, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, nil, fmt.Errorf("Content-Encoding gzip: %w", err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			return nil, nil, fmt.Errorf("Content-Encoding gzip: %w", err)
		}
		header = header.Clone()
		header.Del("Content-Encoding")
		return header, plain, nil
	default:
		return nil, nil, fmt.Errorf("got Content-Encoding %q, want gzip or none", enc)
	}
}

// count notes one checked answer of op.
func (d *Doc) count(op string, status int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[op] == nil {
		d.seen[op] = map[int]int{}
	}
	d.seen[op][status]++
}

// Checked returns how many answers were checked: of described operations,
// and of requests no operation describes.
func (d *Doc) Checked() (described, undescribed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, statuses := range d.seen {
		for _, n := range statuses {
			described += n
		}
	}
	return described, d.undescribed
}

// Unexercised returns the operations under prefix (see Operations) that no
// checked answer came from.
func (d *Doc) Unexercised(prefix string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, op := range d.Operations(prefix) {
		if len(d.seen[op]) == 0 {
			out = append(out, op)
		}
	}
	return out
}

// Summary returns one line per operation under prefix: the statuses of
// the answers checked, with their counts, and the described statuses none
// came with.
func (d *Doc) Summary(prefix string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, o := range d.ops {
		if !strings.HasPrefix(o.path, prefix) {
			continue
		}
		fmt.Fprintf(&b, "%s:", o)
		seen := d.seen[o.String()]
		for _, status := range slices.Sorted(maps.Keys(o.op.Responses.Map())) {
			if n := seen[statusCode(status)]; n > 0 {
				fmt.Fprintf(&b, " %s×%d", status, n)
			} else {
				fmt.Fprintf(&b, " (%s)", status)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// yamlToJSON converts a YAML document to JSON, keeping every value.
func yamlToJSON(data []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(v, "", "  ")
}

// jsonValue turns YAML mappings with non-string keys (a status code written
// unquoted) into JSON objects.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			var err error
			if v[k], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			var err error
			if out[fmt.Sprint(k)], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		for i, e := range v {
			var err error
			if v[i], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
	return v, nil
}

// statusCode reads a described status ("404"); 0 for a range ("4XX").
func statusCode(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// MustLoad is Load for a test (a testing.TB): it stops t when the document
// cannot be read.
func MustLoad(t interface {
	Helper()
	Fatal(args ...any)
}) *Doc {
	t.Helper()
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// Exercised is for a suite's TestMain, after m.Run: it fails a whole run
// (no -run or -skip) that left an operation under prefix unexercised, and
// with -v prints how many answers were checked, per status. It returns the
// exit code.
func Exercised(prefix string) int {
	doc, err := Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if v := flagValue("test.v"); v != "" && v != "false" {
		described, undescribed := doc.Checked()
		fmt.Printf("%s: %d answers of described operations and %d of undescribed routes checked; per status (in parentheses: never seen):\n%s",
			File, described, undescribed, doc.Summary(prefix))
	}
	if flagValue("test.run") != "" || flagValue("test.skip") != "" {
		return 0
	}
	if missed := doc.Unexercised(prefix); len(missed) > 0 {
		fmt.Fprintf(os.Stderr, "no test exercised these operations of %s: %s\n", File, strings.Join(missed, ", "))
		return 1
	}
	return 0
}

// flagValue is the value of a test binary's flag, "" outside one.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
