package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEverySampleEventIsReadable(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no events/*.json")
	}
	for _, f := range files {
		if _, err := readEvent(f); err != nil {
			t.Error(err)
		}
	}
}

func TestPrettyLeavesNonJSONAlone(t *testing.T) {
	if got := string(pretty([]byte("plain text"))); got != "plain text" {
		t.Errorf("got %q", got)
	}
	if got := string(pretty([]byte(`{"a":1}`))); got != "{\n  \"a\": 1\n}" {
		t.Errorf("got %q", got)
	}
}

func TestRunRefusesAnUnknownFunctionListingTheFunctions(t *testing.T) {
	var stderr strings.Builder
	err := run([]string{"-function", "SlaveFunction", "-event", "../../events/slaves-list.json", "-template", "../../template.yaml"}, io.Discard, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `no function "SlaveFunction"`) ||
		!strings.Contains(err.Error(), "ExpiryFunction, IndexerFunction, InventoryFunction, LogsFunction, PublisherFunction, SlavesFunction") {
		t.Errorf("got %v, want a usage error listing the functions", err)
	}
}

// make invoke runs the function as a process of this machine, so it builds
// it for this machine (GOOS and GOARCH of go env: a Mac gets a Mach-O
// binary, not Linux's ELF, which fails there with "exec format error"),
// while the Lambda build, sam build's, stays linux/arm64.
func TestMakeInvokeBuildsForThisMachineAndTheLambdaBuildForLambda(t *testing.T) {
	tests := []struct {
		name string
		args []string
		host string // GOOS/GOARCH of go env, "" for this machine's
		want string
	}{
		{"make invoke on a Mac", []string{"invoke", "FN=SlavesFunction", "EVENT=events/slaves-list.json"}, "darwin/arm64",
			"GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' -o "},
		{"make invoke on Linux", []string{"invoke", "FN=SlavesFunction", "EVENT=events/slaves-list.json"}, "linux/amd64",
			"GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build"},
		{"sam build's build line", []string{"build-SlavesFunction", "ARTIFACTS_DIR=/artifacts"}, "darwin/arm64",
			"GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags='-s -w' -o /artifacts/bootstrap ./functions/slaves"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			goos, goarch, _ := strings.Cut(tt.host, "/")
			cmd := exec.Command("make", append([]string{"-n", "--no-print-directory"}, tt.args...)...)
			cmd.Dir = filepath.Join("..", "..")
			cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
			}), "GOOS="+goos, "GOARCH="+goarch)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("make -n %s printed\n%s\nwant a line with %s", strings.Join(tt.args, " "), out, tt.want)
			}
		})
	}
}
