package functions_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// sdkClients are the AWS SDK clients each function links, by its directory:
// a client's package initializes its schema and endpoint tables at every
// cold start whether the function calls it or not (docs/decisions.md "Cold
// starts").
var sdkClients = map[string][]string{
	"console":   nil,
	"expiry":    {"dynamodb"},
	"indexer":   {"dynamodb", "s3"},
	"inventory": {"dynamodb", "s3"},
	"logs":      {"dynamodb", "s3"},
	"publisher": {"dynamodb", "eventbridge"},
	"slaves":    {"dynamodb"},
}

// unlinked are packages no function links: a test or debugging aid, or
// what a function does without (the SDK's config package, whose SSO and
// sign-in clients sdkconfig avoids; tracing, compiled in only with
// GOTAGS=otel).
var unlinked = []string{
	"expvar",
	"flag",
	"github.com/aws/aws-sdk-go-v2/config",
	"go.opentelemetry.io/otel",
	"html/template",
	"net/http/httptest",
	"net/http/pprof",
	"runtime/pprof",
	"testing",
	"text/template",
}

// Each function links the SDK clients it calls and nothing a cold start
// would initialize for no use: its packages are listed as the Makefile's
// build line builds them (linux, arm64, lambda.norpc).
func TestEachFunctionLinksOnlyWhatItUses(t *testing.T) {
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		want, ok := sdkClients[d.Name()]
		if !ok {
			t.Errorf("functions/%s: name the SDK clients it links in sdkClients", d.Name())
			continue
		}
		t.Run(d.Name(), func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "./"+d.Name())
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			var clients []string
			for _, pkg := range strings.Fields(string(out)) {
				if service, ok := strings.CutPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/"); ok && !strings.Contains(service, "/") {
					clients = append(clients, service)
				}
				for _, u := range unlinked {
					if pkg == u || strings.HasPrefix(pkg, u+"/") {
						t.Errorf("links %s", pkg)
					}
				}
			}
			slices.Sort(clients)
			if !slices.Equal(clients, want) {
				t.Errorf("links the SDK clients %v, want %v", clients, want)
			}
		})
	}
}
