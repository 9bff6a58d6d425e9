// Package docs_test checks that the repository's descriptions of its own
// layout name every package there is.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// A reader looks a package up in the layout table: each package under
// shared/ has a row in architecture.md's.
func TestTheLayoutTablesNameEverySharedPackage(t *testing.T) {
	packages := sharedPackages(t)
	for _, doc := range []struct{ file, heading string }{
		{"architecture.md", "## Packages"},
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

// templateResources returns the logical ids of template.yaml's resources
// whose Type is one of types, in the template's order.
func templateResources(t *testing.T, types ...string) []string {
	t.Helper()
	b, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, resources, ok := strings.Cut(string(b), "\nResources:\n")
	if !ok {
		t.Fatal("template.yaml has no Resources section")
	}
	var ids []string
	for _, m := range regexp.MustCompile(`(?m)^  ([A-Za-z0-9]+):\n    Type: (\S+)$`).FindAllStringSubmatch(resources, -1) {
		if slices.Contains(types, m[2]) {
			ids = append(ids, m[1])
		}
	}
	return ids
}

var numberWords = []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
	"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
	"nineteen", "twenty"}

// countSaid returns the number the first match of pattern's group 1 spells
// in file ("Six" or "6"), or -1 when file says no such thing.
func countSaid(t *testing.T, file, pattern string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(pattern).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("%s says nothing that matches %q", file, pattern)
	}
	word := strings.ToLower(m[1])
	if i := slices.Index(numberWords, word); i >= 0 {
		return i
	}
	n, err := strconv.Atoi(word)
	if err != nil {
		t.Fatalf("%s: %q in %q is no number", file, m[1], m[0])
	}
	return n
}

// The counts the docs give of the template's functions, tables and state
// machines are the template's, and the architecture's table of functions
// has a row for each function: a function or table added to the template
// fails this test until the docs say so.
func TestTheDocsCountWhatTheTemplateDeclares(t *testing.T) {
	functions := templateResources(t, "AWS::Serverless::Function", "AWS::Lambda::Function")
	tables := templateResources(t, "AWS::DynamoDB::Table", "AWS::Serverless::SimpleTable")
	machines := templateResources(t, "AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine")
	if len(functions) == 0 || len(tables) == 0 {
		t.Fatalf("found %d functions and %d tables in template.yaml, want some of each", len(functions), len(tables))
	}
	for _, c := range []struct {
		file, pattern, what string
		want                int
	}{
		{"architecture.md", `(?i)\b(\w+) Lambda functions\b`, "Lambda functions", len(functions)},
		{"architecture.md", `(?i)\b(\w+) DynamoDB tables\b`, "DynamoDB tables", len(tables)},
		{"architecture.md", `(?i)\b(\w+) Step Functions state machines\b`, "state machines", len(machines)},
		{"tables.md", `(?m)^(\w+) tables\b`, "tables", len(tables)},
	} {
		if got := countSaid(t, c.file, c.pattern); got != c.want {
			t.Errorf("%s counts %d %s, template.yaml declares %d", c.file, got, c.what, c.want)
		}
	}

	rows := tableNames(t, "architecture.md", "## Shape")
	for _, f := range functions {
		if !slices.Contains(rows, f) {
			t.Errorf("architecture.md: the table under \"## Shape\" has no row for %s", f)
		}
	}
	for _, r := range rows {
		if !slices.Contains(functions, r) {
			t.Errorf("architecture.md: the table under \"## Shape\" names %s, which template.yaml does not declare", r)
		}
	}
	arch, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines {
		if !strings.Contains(string(arch), "`"+m+"`") {
			t.Errorf("architecture.md does not name the state machine %s", m)
		}
	}
}

// Each function's composition root is named in architecture.md's row for
// app/<name>app.
func TestTheArchitectureNamesEveryCompositionRoot(t *testing.T) {
	entries, err := os.ReadDir("../app")
	if err != nil {
		t.Fatal(err)
	}
	arch, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, row, ok := strings.Cut(string(arch), "\n| `app/<name>app` |")
	if !ok {
		t.Fatal("architecture.md has no row for app/<name>app")
	}
	row, _, _ = strings.Cut(row, "\n")
	var roots int
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), "app") {
			continue
		}
		roots++
		if !strings.Contains(row, "`"+e.Name()+"`") {
			t.Errorf("architecture.md: the row of app/<name>app under \"## Packages\" does not name %s", e.Name())
		}
	}
	if roots == 0 {
		t.Fatal("found no composition root under app/")
	}
}
