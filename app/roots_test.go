// Package app_test checks what docs/decisions.md says of the composition
// roots ("One composition root per function").
package app_test

import (
	"os/exec"
	"strings"
	"testing"
)

const configPackage = "github.com/fleetops/fleet/shared/config"

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
