//go:build integration

package functions_test

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
)

// A function whose SDK environment is incomplete fails its init, as Lambda
// reports it, with a log line naming what is missing, although it builds
// its SDK clients on their first call (docs/decisions.md "Cold starts"):
// the environment is checked before, at init. With the environment whole,
// the same binary asks for its first event.
func TestAFunctionWithoutItsRegionOrCredentialsFailsItsInit(t *testing.T) {
	root := filepath.Join("..")
	tmpl, dirs := templateAndFunctions(t, root)
	ctx := context.Background()
	for fn, dir := range dirs {
		if fn == "ConsoleFunction" { // it calls no AWS service
			continue
		}
		t.Run(fn, func(t *testing.T) {
			binary := build(t, root, dir)
			env, err := tmpl.FunctionEnv(fn, stack.LocalName)
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(env, map[string]string{
				"AUTH_MODE":             "none",
				"AWS_REGION":            "us-east-1",
				"AWS_ACCESS_KEY_ID":     "key",
				"AWS_SECRET_ACCESS_KEY": "secret",
				"AWS_ENDPOINT_URL":      "http://127.0.0.1:1", // never reached by an init
			})
			run := func(env map[string]string) error {
				_, err := lambdarun.Function{Binary: binary, Name: fn, Env: env, Timeout: 20 * time.Second}.Invoke(ctx, []byte("{}"))
				return err
			}
			var ferr *lambdarun.FunctionError
			if err := run(env); errors.As(err, &ferr) && ferr.Init {
				t.Fatalf("with its environment whole: got %v, want the function to ask for an event", err)
			}
			for _, missing := range []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
				without := maps.Clone(env)
				without[missing] = ""
				without["AWS_DEFAULT_REGION"] = ""
				err := run(without)
				if !errors.As(err, &ferr) || !ferr.Init || !strings.Contains(ferr.Message, missing) {
					t.Errorf("without %s: got %v, want a failed init whose log names %s", missing, err, missing)
				}
			}
		})
	}
}
