package apidoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ServedRoutes returns the routes a Go source file registers on a
// ServeMux or a web.Routes table: every Handle, HandleFunc or HandleNamed
// call whose pattern is a string
// literal naming a method, as "METHOD /path", with a trailing "{$}" written
// as the trailing slash it matches. Patterns without a method (the
// catch-all "/" of unknown routes) are left out.
func ServedRoutes(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var routes []string
	var bad error
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !slices.Contains([]string{"Handle", "HandleFunc", "HandleNamed"}, sel.Sel.Name) {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		pattern, err := strconv.Unquote(lit.Value)
		if err != nil {
			bad = errors.Join(bad, err)
			return true
		}
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			return true
		}
		if strings.Contains(path, "...}") {
			bad = errors.Join(bad, fmt.Errorf("%s: pattern %q: a {name...} wildcard has no OpenAPI path", file, pattern))
		}
		routes = append(routes, method+" "+strings.TrimSuffix(path, "{$}"))
		return true
	})
	slices.Sort(routes)
	return routes, bad
}

// CompareRoutes checks that the operations described under prefix are
// exactly the served routes, both as "METHOD /path".
func (d *Doc) CompareRoutes(prefix string, served []string) error {
	described := d.Operations(prefix)
	var missing, extra []string
	for _, r := range served {
		if !slices.Contains(described, r) {
			missing = append(missing, r)
		}
	}
	for _, op := range described {
		if !slices.Contains(served, op) {
			extra = append(extra, op)
		}
	}
	var err error
	if len(missing) > 0 {
		err = fmt.Errorf("served but not described in %s: %s", File, strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		err = errors.Join(err, fmt.Errorf("described in %s but not served: %s", File, strings.Join(extra, ", ")))
	}
	return err
}

// probed are the methods Probe tries on every described path.
var probed = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// Probe sends every operation described under prefix through h, its path
// filled from params, and reports each answer that does not match the
// document, which includes the JSON 404 of an unknown route: h does not
// serve that operation. Every other method on a described path must get
// exactly that 404, or h serves a route the document does not describe.
func (d *Doc) Probe(t Reporter, h http.Handler, prefix string, params map[string]string) {
	paths := map[string]bool{}
	for _, o := range d.ops {
		if strings.HasPrefix(o.path, prefix) {
			paths[o.path] = true
		}
	}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		target, err := fill(path, params)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, method := range probed {
			req := httptest.NewRequest(method, target, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			unknown := unknownRoute(rec)
			if o, _ := d.find(method, req.URL); o != nil {
				if unknown {
					t.Errorf("%s is described in %s but not served: got %d %s", o, File, rec.Code, rec.Body)
				} else if err := d.Check(req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
					t.Errorf("%s %s: %v", method, target, err)
				}
				continue
			}
			if !unknown {
				t.Errorf("%s %s is served but not described in %s: got %d %s", method, path, File, rec.Code, rec.Body)
			}
		}
	}
}

// unknownRoute reports whether an answer is web.NotFound's, the answer of
// a request that no route serves.
func unknownRoute(rec *httptest.ResponseRecorder) bool {
	var e struct{ Message string }
	return rec.Code == http.StatusNotFound && json.Unmarshal(rec.Body.Bytes(), &e) == nil && strings.HasPrefix(e.Message, "no route for ")
}

// fill replaces each {name} of a path template with params[name], escaped
// as one path segment.
func fill(path string, params map[string]string) (string, error) {
	segments := strings.Split(path, "/")
	for i, s := range segments {
		name, ok := strings.CutPrefix(s, "{")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		v, ok := params[name]
		if !ok {
			return "", fmt.Errorf("%s: no value for {%s} to probe with", path, name)
		}
		segments[i] = url.PathEscape(v)
	}
	return strings.Join(segments, "/"), nil
}
