package functions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetops/fleet/dev/stack"
)

// templateAndFunctions is the repository's template.yaml at root and the
// directory of each of its functions under functions/, by logical id.
func templateAndFunctions(t *testing.T, root string) (*stack.Template, map[string]string) {
	t.Helper()
	tmpl, err := stack.LoadTemplate(filepath.Join(root, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := stack.FunctionDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl, dirs
}

// TestEveryRouteStreams holds template.yaml to the functions' mains: every
// function FleetApi reaches answers in the response streaming format
// (startup.API), so every route must invoke it with response streaming,
// since a streamed answer to a buffered invocation is a gateway error
// (docs/behaviour.md "Answers of any size").
func TestEveryRouteStreams(t *testing.T) {
	root := filepath.Join("..")
	tmpl, dirs := templateAndFunctions(t, root)
	api := tmpl.Resources["FleetApi"].Properties
	paths, _ := api["DefinitionBody"].(map[string]any)["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("FleetApi has no paths in its DefinitionBody")
	}
	routes := map[string]int{}
	for path, methods := range paths {
		for method, op := range methods.(map[string]any) {
			integration, _ := op.(map[string]any)["x-amazon-apigateway-integration"].(map[string]any)
			uri := fmt.Sprint(integration["uri"])
			fn := regexp.MustCompile(`\$\{(\w+)\.Arn\}`).FindStringSubmatch(uri)
			if fn == nil {
				t.Fatalf("%s %s: got integration uri %s, want one naming a function's Arn", method, path, uri)
			}
			dir, ok := dirs[fn[1]]
			if !ok {
				t.Fatalf("%s %s: no build-%s target in the Makefile", method, path, fn[1])
			}
			main, err := os.ReadFile(filepath.Join(root, "functions", dir, "main.go"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(main), "startup.API(") {
				t.Errorf("%s %s: functions/%s/main.go does not start with startup.API", method, path, dir)
			}
			streams := integration["responseTransferMode"] == "STREAM" && strings.Contains(uri, "/2021-11-15/functions/") && strings.Contains(uri, "/response-streaming-invocations")
			if !streams {
				t.Errorf("%s %s: %s answers streamed, but its integration is %v %s: want responseTransferMode STREAM and the response-streaming-invocations uri",
					method, path, fn[1], integration["responseTransferMode"], uri)
			}
			routes[fn[1]]++
		}
	}
	for _, fn := range []string{"SlavesFunction", "LogsFunction", "ConsoleFunction"} {
		if routes[fn] == 0 {
			t.Errorf("no route reaches %s", fn)
		}
	}
}
