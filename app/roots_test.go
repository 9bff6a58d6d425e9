// Package app_test checks what docs/decisions.md says of the composition
// roots ("One composition root per function").
package app_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	modulePath    = "github.com/fleetops/fleet"
	configPackage = modulePath + "/shared/config"
)

// Only the composition roots read the configuration: no adapter, route
// or main imports shared/config, so a function's handler is built one way
// wherever it runs.
func TestOnlyTheCompositionRootsImportConfig(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../shared/...", "../functions/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	packages := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		packages++
		if fields[0] == configPackage {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == configPackage {
				t.Errorf("%s imports shared/config: take the configuration from its app constructor", fields[0])
			}
		}
	}
	if packages < 10 {
		t.Fatalf("go list named %d packages, want every package of shared/ and functions/", packages)
	}
}

// handBuilt names the calls a command under dev/ may make although a
// composition root makes them too, each with its reason.
var handBuilt = map[string]string{
	// The report figures run the inventory handler over a model of
	// DynamoDB's latencies in its region at 100,000 machines, which is a
	// store, not a client: the emulator cannot answer at that size. The
	// same section runs the real InventoryFunction binary for its memory.
	"dev/bench/reports.go: inventory.New": "a model of DynamoDB",
}

// The benchmarks and the dev tools run the service as the functions build
// it: no command under dev/ or cmd/ calls what a composition root calls to
// build a function (a store, an adapter, a handler), so none runs it with
// a setting the function does not have. Their clients are options of the
// roots. Tests may build the parts: they test them.
func TestOnlyTheCompositionRootsBuildTheService(t *testing.T) {
	built := rootCalls(t)
	if len(built) < 10 {
		t.Fatalf("the composition roots call %d constructors of shared/ (%v), want every one they build a function with", len(built), built)
	}
	excused := map[string]bool{}
	for name, path := range commandFiles(t) {
		for _, call := range packageCalls(t, path, "shared") {
			if !built[call] {
				continue
			}
			if handBuilt[name+": "+call] != "" {
				excused[name+": "+call] = true
			} else {
				t.Errorf("%s calls %s, which a composition root calls: build the function with its app/ constructor, passing clients as options", name, call)
			}
		}
	}
	for call := range handBuilt {
		if !excused[call] {
			t.Errorf("handBuilt excuses %q, which is no longer made: remove it", call)
		}
	}
}

// The whole API is assembled once (dev/localapi) for make run and the
// tests' API alike: no other command mounts the API's functions itself.
// The benchmarks build one function at a time, to measure it.
func TestOneAssemblyOfTheAPI(t *testing.T) {
	api := map[string]bool{"slavesapp.New": true, "logsapp.New": true, "consoleapp.New": true}
	for name, path := range commandFiles(t) {
		if strings.HasPrefix(name, "dev/localapi/") || strings.HasPrefix(name, "dev/bench/") {
			continue
		}
		for _, call := range packageCalls(t, path, "app") {
			if api[call] {
				t.Errorf("%s calls %s: serve the API dev/localapi assembles", name, call)
			}
		}
	}
}

// commandFiles returns the Go files of the commands under dev/ and cmd/,
// but for their tests, by their path in the repository.
func commandFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, dir := range []string{"../dev", "../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files[strings.TrimPrefix(filepath.ToSlash(path), "../")] = path
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 20 {
		t.Fatalf("found %d Go files under dev/ and cmd/, want every command's", len(files))
	}
	return files
}

// rootCalls returns the constructors of shared/ packages (New..., Open...,
// Client), as "pkg.Func", that the composition roots call. Their other
// calls (a conversion, a bound computed from the memory size) are values
// a command may compute the same way.
func rootCalls(t *testing.T) map[string]bool {
	t.Helper()
	paths, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("internal/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]bool{}
	for _, path := range append(paths, more...) {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		for _, call := range packageCalls(t, path, "shared") {
			_, name, _ := strings.Cut(call, ".")
			if strings.HasPrefix(name, "New") || strings.HasPrefix(name, "Open") || name == "Client" {
				calls[call] = true
			}
		}
	}
	return calls
}

// packageCalls returns the calls of functions of the packages under dir
// (shared, app) in the Go file at path, as "pkg.Func" with pkg the
// package's own name.
func packageCalls(t *testing.T, path, dir string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // the name the file calls a package by → its own name
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		own, ok := strings.CutPrefix(p, modulePath+"/"+dir+"/")
		if !ok || strings.Contains(own, "/") {
			continue
		}
		local := own
		if imp.Name != nil {
			local = imp.Name.Name
		}
		names[local] = own
	}
	var calls []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] != "" {
				calls = append(calls, names[x.Name]+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return calls
}
