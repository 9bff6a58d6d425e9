// Package docs_test checks that the repository's descriptions of its own
// layout name every package there is.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// sharedPackages returns every directory under shared/ that holds a Go
// package (a .go file other than a test), as "shared/name".
func sharedPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("../shared", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel("..", filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); !slices.Contains(out, rel) {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("found no package under shared/")
	}
	return out
}

// tableNames returns the packages named in backquotes in the first column
// of the table that follows heading in the Markdown file.
func tableNames(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", file, heading)
	}
	var names []string
	inTable := false
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			names = append(names, strings.TrimSuffix(m[1], "/"))
		}
	}
	return names
}

// A reader looks a package up in the layout tables: each package under
// shared/ has a row in architecture.md's and in the README's.
func TestTheLayoutTablesNameEverySharedPackage(t *testing.T) {
	packages := sharedPackages(t)
	for _, doc := range []struct{ file, heading string }{
		{"architecture.md", "## Packages"},
		{"../README.md", "## Layout"},
	} {
		named := tableNames(t, doc.file, doc.heading)
		for _, p := range packages {
			if !slices.Contains(named, p) {
				t.Errorf("%s: the table under %q has no row for %s", doc.file, doc.heading, p)
			}
		}
		for _, n := range named {
			if strings.HasPrefix(n, "shared/") && !slices.Contains(packages, n) {
				t.Errorf("%s: the table under %q names %s, which is no package", doc.file, doc.heading, n)
			}
		}
	}
}
