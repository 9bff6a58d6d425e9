//go:build integration

package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The template deployed on moto's CloudFormation, checked, and the real
// handlers run on the tables the stack created (see the package comment):
// a template whose wiring breaks (a variable naming the wrong table, a
// policy on another table, a rule that no longer matches the reports, a
// parameter the translator refuses) fails here.
func TestTheTemplateDeploysAndItsHandlersRunOnTheStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
