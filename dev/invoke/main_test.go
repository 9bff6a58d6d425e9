package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEnvVarsFileOverridesOnlyDeclaredVariables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env.json")
	err := os.WriteFile(path, []byte(`{
		"Parameters": {"AUTH_MODE": "none", "SLAVES_TABLE": "shared", "UNDECLARED": "x"},
		"SlavesFunction": {"SLAVES_TABLE": "mine", "MAX_DECOMMISSIONING_SLAVES": 5},
		"InventoryFunction": {"SLAVES_TABLE": "theirs"}
	}`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AUTH_MODE": "authorizer", "SLAVES_TABLE": "SlavesTable", "MAX_DECOMMISSIONING_SLAVES": "2", "READ_GROUPS": ""}
	if err := overlayEnvVars(env, path, "SlavesFunction"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"AUTH_MODE": "none", "SLAVES_TABLE": "mine", "MAX_DECOMMISSIONING_SLAVES": "5", "READ_GROUPS": ""}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("got %v, want %v", env, want)
	}
}

func TestEnvVarsFileRejectsNonScalars(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env.json")
	if err := os.WriteFile(path, []byte(`{"Parameters": {"A": ["x"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := overlayEnvVars(map[string]string{"A": ""}, path, "F"); err == nil || !strings.Contains(err.Error(), "Parameters.A") {
		t.Errorf("got %v, want an error naming Parameters.A", err)
	}
}

// The repository's env file must keep working for sam local invoke too: only
// string values, and only variables the template declares.
func TestRepoEnvVarsFileAppliesToEveryFunction(t *testing.T) {
	env := map[string]string{"AUTH_MODE": "authorizer", "SLAVES_TABLE": "", "HISTORY_TABLE": "", "EXPIRING_TABLE": "", "REQUESTS_TABLE": ""}
	if err := overlayEnvVars(env, filepath.Join("..", "env.local.json"), "SlavesFunction"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"AUTH_MODE": "none", "SLAVES_TABLE": "SlavesTable", "HISTORY_TABLE": "HistoryTable", "EXPIRING_TABLE": "ExpiringTable", "REQUESTS_TABLE": "RequestsTable"}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("got %v, want %v", env, want)
	}
}

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
