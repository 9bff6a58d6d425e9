package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// The package comment and fleetctl --help list the same exit codes, each
// with the same HTTP statuses.
func TestTheHelpAndThePackageCommentAgreeOnExitCodes(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, strings.NewReader(""), &out, &out); code != exitOK {
		t.Fatalf("fleetctl --help: exit code %d", code)
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	_, codes, ok := strings.Cut(help, "Exit codes: ")
	if !ok {
		t.Fatalf("fleetctl --help lists no exit codes:\n%s", out.String())
	}
	codes, _, _ = strings.Cut(codes, ".")

	line := regexp.MustCompile(`^(\d+) +(.*)$`)
	status := regexp.MustCompile(`\b[1-5]\d\d\b`)
	listed := 0
	var code string
	statuses := map[string][]string{}
	for _, l := range strings.Split(f.Doc.Text(), "\n") {
		if m := line.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			code, l = m[1], m[2]
			listed++
		}
		if code != "" {
			statuses[code] = append(statuses[code], status.FindAllString(l, -1)...)
		}
	}
	if listed == 0 {
		t.Fatal("the package comment lists no exit codes")
	}
	entries := regexp.MustCompile(`(?:^|, )(\d+) `).FindAllStringSubmatchIndex(codes, -1)
	inHelp := map[string]string{}
	for i, e := range entries {
		end := len(codes)
		if i+1 < len(entries) {
			end = entries[i+1][0]
		}
		inHelp[codes[e[2]:e[3]]] = codes[e[3]:end]
	}
	if len(inHelp) != len(statuses) {
		t.Errorf("--help lists %d exit codes, the package comment %d", len(inHelp), len(statuses))
	}
	for c, want := range statuses {
		got, ok := inHelp[c]
		if !ok {
			t.Errorf("--help does not list exit code %s", c)
			continue
		}
		for _, s := range want {
			if !strings.Contains(got, s) {
				t.Errorf("exit code %s: the package comment names status %s, --help does not (%q)", c, s, got)
			}
		}
	}
}
