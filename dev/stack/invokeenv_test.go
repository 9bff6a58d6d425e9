package stack

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
	env := map[string]string{"AUTH_MODE": "authorizer", "SLAVES_TABLE": "", "HISTORY_TABLE": "", "EXPIRING_TABLE": "", "REQUESTS_TABLE": "", "CHANGES_TABLE": ""}
	if err := overlayEnvVars(env, filepath.Join("..", "env.local.json"), "SlavesFunction"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"AUTH_MODE": "none", "SLAVES_TABLE": "SlavesTable", "HISTORY_TABLE": "HistoryTable", "EXPIRING_TABLE": "ExpiringTable", "REQUESTS_TABLE": "RequestsTable", "CHANGES_TABLE": "ChangesTable"}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("got %v, want %v", env, want)
	}
}

// As sam local invoke: the template's value, then the caller's shell for a
// variable the function declares, then the env-vars file.
func TestFunctionEnvTakesTheShellThenTheEnvVarsFile(t *testing.T) {
	tpl, err := ParseTemplate([]byte(`
Parameters:
  LogUrlTtl: {Type: String, Default: 1h}
Resources:
  LogsFunction:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          LOG_URL_TTL: !Ref LogUrlTtl
          LOG_LOOKBACK: 720h
          AUTH_MODE: authorizer
`))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "env.json")
	if err := os.WriteFile(path, []byte(`{"Parameters": {"AUTH_MODE": "none"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	shell := map[string]string{"LOG_URL_TTL": "2h", "AUTH_MODE": "authorizer", "UNDECLARED": "x"}
	lookup := func(k string) (string, bool) { v, ok := shell[k]; return v, ok }

	got, err := tpl.InvokeEnv("LogsFunction", lookup, path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"LOG_URL_TTL": "2h", "LOG_LOOKBACK": "720h", "AUTH_MODE": "none"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	overridden, err := tpl.WithParameters(map[string]string{"LogUrlTtl": "3h"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = overridden.InvokeEnv("LogsFunction", func(string) (string, bool) { return "", false }, "")
	if err != nil {
		t.Fatal(err)
	}
	if got["LOG_URL_TTL"] != "3h" {
		t.Errorf("a parameter override: got LOG_URL_TTL=%q, want 3h", got["LOG_URL_TTL"])
	}
}
