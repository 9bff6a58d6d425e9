package main

import (
	"errors"
	"io"
	"path/filepath"
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
		!strings.Contains(err.Error(), "ExpiryFunction, InventoryFunction, LogsFunction, SlavesFunction") {
		t.Errorf("got %v, want a usage error listing the functions", err)
	}
}
