//go:build integration

package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every section of make bench runs, at its smallest size (env.size), so
// that a change that breaks a benchmark (a record, a setting, a
// constructor it builds the service with) fails in make test, where the
// change is made, rather than in the next make bench. The figures mean
// nothing at these sizes; the section's own checks (every record applied,
// every answer whole) still hold.
func TestEverySectionRunsAtItsSmallestSize(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, false, true, "", 0); err != nil {
		t.Fatalf("make bench at its smallest: %v\n%s", err, out.String())
	}
	for _, s := range sections {
		if !strings.Contains(out.String(), "| "+s.name+" ") {
			t.Errorf("the table has no row of the section %q:\n%s", s.name, out.String())
		}
	}
}
