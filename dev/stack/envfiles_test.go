package stack

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The env files are for sam local invoke --env-vars (docs/deploying.md, "sam local
// invoke"): SAM reads them with the template and overrides only variables the
// template declares, so a misspelt function or variable is silently ignored
// there. Each must name real functions and variables, name the tables make
// run creates, and point at the emulator's port.
func TestEnvFilesNameRealFunctionsVariablesAndEndpoints(t *testing.T) {
	tpl := loadRepoTemplate(t)
	// With an endpoint given, every function declares AWS_ENDPOINT_URL too,
	// which is when SAM lets a file set it.
	withEndpoint, err := tpl.WithParameters(map[string]string{"AwsEndpointUrl": "http://127.0.0.1:4566"})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(DefaultAddr)
	tables := map[string]string{"SLAVES_TABLE": "SlavesTable", "HISTORY_TABLE": "HistoryTable", "EXPIRING_TABLE": "ExpiringTable", "REQUESTS_TABLE": "RequestsTable", "CHANGES_TABLE": "ChangesTable"}

	for file, wantHost := range map[string]string{
		"env.local.json":      "127.0.0.1",                  // make run's emulator, reached over the host's network
		"env.localstack.json": "localhost.localstack.cloud", // LocalStack's own name for itself
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", file))
			if err != nil {
				t.Fatal(err)
			}
			var sections map[string]map[string]string
			if err := json.Unmarshal(data, &sections); err != nil {
				t.Fatalf("got %v, want an object of objects of strings (SAM's format)", err)
			}
			if len(sections) == 0 {
				t.Fatal("got no section")
			}
			for section, vars := range sections {
				functions := []string{section}
				if section == "Parameters" {
					functions = tpl.Functions()
				} else if !slices.Contains(tpl.Functions(), section) {
					t.Errorf("section %s: not a function of the template (%v)", section, tpl.Functions())
					continue
				}
				for name, value := range vars {
					declared := false
					for _, fn := range functions {
						env, err := withEndpoint.FunctionEnv(fn, LocalName)
						if err != nil {
							t.Fatal(err)
						}
						_, ok := env[name]
						declared = declared || ok
					}
					if !declared {
						t.Errorf("%s.%s: no function of the section declares it, so SAM ignores it", section, name)
					}
					if want, ok := tables[name]; ok && value != want {
						t.Errorf("%s.%s: got %q, want %q, the table make run creates", section, name, value, want)
					}
				}
				if name := vars["AUTH_MODE"]; name != "none" {
					t.Errorf("%s: got AUTH_MODE %q, want none (local requests carry no identity)", section, name)
				}
				endpoint := vars["AWS_ENDPOINT_URL"]
				u, err := url.Parse(endpoint)
				if err != nil || u.Scheme != "http" || u.Hostname() != wantHost || u.Port() != port {
					t.Errorf("%s: got AWS_ENDPOINT_URL %q, want http://%s:%s", section, endpoint, wantHost, port)
				}
				if vars["S3_FORCE_PATH_STYLE"] != "true" {
					t.Errorf("%s: got S3_FORCE_PATH_STYLE %q, want true (the emulator has no bucket host names)", section, vars["S3_FORCE_PATH_STYLE"])
				}
			}
		})
	}
}

// The functions get AWS_ENDPOINT_URL only when AwsEndpointUrl is set: an
// empty one would hide the endpoint LocalStack gives its functions.
func TestRepoTemplatePassesAnEndpointOnlyWhenOneIsGiven(t *testing.T) {
	tpl := loadRepoTemplate(t)
	with, err := tpl.WithParameters(map[string]string{"AwsEndpointUrl": "http://localhost.localstack.cloud:4566"})
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range tpl.Functions() {
		env, err := tpl.FunctionEnv(fn, LocalName)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := env["AWS_ENDPOINT_URL"]; ok {
			t.Errorf("%s: got AWS_ENDPOINT_URL=%q by default, want none", fn, v)
		}
		env, err = with.FunctionEnv(fn, LocalName)
		if err != nil {
			t.Fatal(err)
		}
		if got := env["AWS_ENDPOINT_URL"]; got != "http://localhost.localstack.cloud:4566" {
			t.Errorf("%s: got AWS_ENDPOINT_URL=%q, want the parameter's value", fn, got)
		}
	}
}
