package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetops/fleet/dev/stack"
)

func readmeAndRoot(t *testing.T) (string, string) {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(readme), root
}

// The prerequisites name the Go release go.mod asks for.
func TestTheReadmeNamesTheGoVersionOfGoMod(t *testing.T) {
	readme, root := readmeAndRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if want := "Go " + string(m[1]) + " or later"; !strings.Contains(readme, want) {
		t.Errorf("the README does not say %q", want)
	}
}

// The module is not published: a go install line of the README installs a
// package of this clone, never module@version.
func TestTheReadmeInstallsFromTheClone(t *testing.T) {
	readme, root := readmeAndRoot(t)
	lines := regexp.MustCompile(`(?m)^go install (\S+)`).FindAllStringSubmatch(readme, -1)
	if len(lines) == 0 {
		t.Fatal("the README installs nothing with go install, want fleetctl's line")
	}
	for _, l := range lines {
		pkg := l[1]
		if info, err := os.Stat(filepath.Join(root, pkg)); !strings.HasPrefix(pkg, "./") || err != nil || !info.IsDir() {
			t.Errorf("the README says go install %s, want a package directory of this clone (./cmd/...)", pkg)
		}
	}
}
