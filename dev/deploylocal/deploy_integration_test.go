//go:build integration

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The template deployed on moto's CloudFormation, checked, and the real
// handlers run on the tables the stack created (see the package comment):
// a template whose wiring breaks (a variable naming the wrong table, a
// policy on another table, a rule that no longer matches the reports, a
// parameter the translator refuses) fails here. It runs from a shell set up
// for an account this machine does not have: a profile missing here, files
// that hold other profiles or none, no region; none of it may reach the
// emulator, the translator or the builds.
func TestTheTemplateDeploysAndItsHandlersRunOnTheStack(t *testing.T) {
	config := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(config, []byte("[profile someone-else]\nregion = eu-west-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_PROFILE", "prod")
	t.Setenv("AWS_CONFIG_FILE", config)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "no-such-credentials"))
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
	// A whole deployment on the emulator: minutes on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out strings.Builder
	began := time.Now()
	err := run(ctx, &out)
	t.Logf("%s(%.1f s)", out.String(), time.Since(began).Seconds())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stack fleet CREATE_COMPLETE", "ok: a second stack", "deploy-local: ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("got no %q in the report", want)
		}
	}
}
