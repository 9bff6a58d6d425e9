package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// The module is not published: a go install line of the walkthrough
// installs a package of this clone, never module@version.
func TestTheReadmeInstallsFromTheClone(t *testing.T) {
	_, root := readmeAndRoot(t)
	var lines [][]string
	for _, file := range walkthrough {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, regexp.MustCompile(`(?m)^go install (\S+)`).FindAllStringSubmatch(string(text), -1)...)
	}
	if len(lines) == 0 {
		t.Fatal("the walkthrough installs nothing with go install, want fleetctl's line")
	}
	for _, l := range lines {
		pkg := l[1]
		if info, err := os.Stat(filepath.Join(root, pkg)); !strings.HasPrefix(pkg, "./") || err != nil || !info.IsDir() {
			t.Errorf("the README says go install %s, want a package directory of this clone (./cmd/...)", pkg)
		}
	}
}

// walkthrough is the order a reader follows: the README's tour, then the
// guides that hold commands. Every Markdown file with a ```sh block is here
// (TestEveryGuideWithCommandsIsWalkedThrough).
var walkthrough = []string{"README.md", "docs/operating.md", "docs/reports.md", "docs/task-logs.md",
	"docs/fleetctl.md", "docs/moving.md", "docs/local-stack.md", "docs/deploying.md"}

// A guide whose commands the walkthrough does not run rots unseen: every
// Markdown file of the clone with a ```sh block is in walkthrough.
func TestEveryGuideWithCommandsIsWalkedThrough(t *testing.T) {
	_, root := readmeAndRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	top, _ := filepath.Glob(filepath.Join(root, "*.md"))
	for _, f := range append(top, files...) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel)
		if regexp.MustCompile("(?m)^```sh\\s*$").Match(text) && !slices.Contains(walkthrough, rel) {
			t.Errorf("%s has shell blocks, but the walkthrough (dev/run's walkthrough) does not run it", rel)
		}
	}
}
