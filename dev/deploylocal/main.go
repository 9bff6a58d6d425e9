// Command deploylocal (make deploy-local) deploys template.yaml on a
// CloudFormation engine and runs the real handlers against what it created,
// with no AWS account, SAM CLI or Docker:
//
//  1. builds every function for this machine (the Makefile's build line);
//  2. starts moto, translates the template with AWS's SAM translator,
//     uploads the functions' zips and creates the stack on moto's
//     CloudFormation with samconfig.toml's parameters (dev/deploylocal.py,
//     which also makes the two adjustments moto needs: a Name for the REST
//     API, and the API's Deployment and Stage left out);
//  3. checks what the stack made against the template: every function's
//     environment (table variables naming this stack's generated tables),
//     memory, timeout, runtime and handler; the tables' keys and indexes;
//     the roles' grants on the tables and log buckets the functions use;
//     the EventBridge rule that routes machine reports;
//  4. runs the real binaries with the environments the stack gave the
//     functions: a machine report, a freeze, a history read, an expiry and
//     a retention run, a log lookup, and finds the changes in the stack's
//     tables;
//  5. creates a second stack in the same account with AwsEndpointUrl set:
//     no name collides, its functions are given the endpoint (and the first
//     stack's none), and a function runs on its environment alone.
//
// What moto's CloudFormation does not implement stays unchecked, and is
// listed: API Gateway's deployment, stage, routes, authorizers and gateway
// responses; the EventBridge Scheduler schedules; the CloudWatch alarms;
// Lambda's event invoke configuration (retries, the reports' dead-letter
// destination); the tables' TTL; IAM enforcement (the policies are checked
// as documents); and execution itself: Lambda's arm64 provided.al2023
// environment, which here is a process built for this machine.
package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fleetops/fleet/dev/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "deploy-local:", err)
		os.Exit(1)
	}
}

// notChecked is what moto's CloudFormation cannot show, beyond the resource
// types it skips.
var notChecked = []string{
	"API Gateway: the deployment and stage (left out), hence routes, authorizers and gateway responses",
	"EventBridge Scheduler: the expiry schedules (names are checked by dev/stack's tests)",
	"CloudWatch alarms and Lambda's event invoke configuration (retries, dead-letter destination)",
	"DynamoDB TTL: the tables' TimeToLiveSpecification is not applied",
	"IAM enforcement: the roles' policies are checked as documents only",
	"execution: Lambda's arm64 provided.al2023 environment; the handlers run here as processes built for this machine",
}

// run deploys, checks and runs, reporting on w; it fails when a check does.
func run(ctx context.Context, w io.Writer) error {
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	tpl, err := stack.LoadTemplate(root + "/" + stack.TemplateFile)
	if err != nil {
		return err
	}
	report(w, "deploy-local: building %s for this machine (bin/deploy-local)", strings.Join(tpl.Functions(), ", "))
	binaries, err := buildFunctions(ctx, root, tpl.Functions())
	if err != nil {
		return err
	}
	report(w, "deploy-local: starting moto")
	moto, err := stack.StartMoto(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer moto.Stop()

	began := time.Now()
	first, err := deploy(ctx, root, moto.Endpoint, "", binaries, nil)
	if err != nil {
		return err
	}
	report(w, "deploy-local: stack %s %s in %.1f s (translated, code uploaded, created: %.1f s in all)", first.Name, first.Status, first.Seconds, time.Since(began).Seconds())
	report(w, "  parameters: %s", formatMap(first.Parameters))
	report(w, "  adjusted for the emulator: %s", strings.Join(first.Adjusted, "; "))
	for _, id := range slices.Sorted(maps.Keys(first.Tables)) {
		report(w, "  table %s: %s", id, first.Tables[id].Name)
	}
	for _, id := range slices.Sorted(maps.Keys(first.Functions)) {
		report(w, "  function %s: %s", id, first.Functions[id].Name)
	}

	var problems []error
	check := func(what string, errs []error) {
		if len(errs) == 0 {
			report(w, "  ok: %s", what)
			return
		}
		report(w, "  FAILED: %s", what)
		for _, e := range errs {
			report(w, "    %v", e)
		}
		problems = append(problems, errs...)
	}
	report(w, "deploy-local: checking the stack against the template")
	check("environments, memory, timeouts, tables and outputs match the template, with this stack's table names", checkWiring(tpl, first))
	check("each role may use the tables and log buckets its function's environment names", checkPolicies(first))
	check("the EventBridge rule sends machine reports to InventoryFunction", checkRules(root, first))
	report(w, "deploy-local: running the handlers on the stack's tables")
	check("a report, a freeze, a history read, expiry and retention runs and a log lookup, on the stack's tables", runHandlers(ctx, root, moto.Endpoint, first, binaries, func(f string, a ...any) { report(w, f, a...) }))

	report(w, "deploy-local: a second stack in the same account, with AwsEndpointUrl=%s", moto.Endpoint)
	check("a second stack: no collision, the endpoint given to its functions only", secondStack(ctx, root, moto.Endpoint, first, binaries))

	report(w, "deploy-local: not checked (moto's CloudFormation does not implement them):")
	for _, id := range slices.Sorted(maps.Keys(first.Unchecked)) {
		report(w, "  %s (%s)", id, first.Unchecked[id])
	}
	for _, n := range notChecked {
		report(w, "  %s", n)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems with the stack", len(problems))
	}
	report(w, "deploy-local: ok")
	return nil
}

// secondStack deploys the template again beside first, with AwsEndpointUrl
// set: its names must not collide with first's, every function of it must
// get AWS_ENDPOINT_URL (and none of first's), and a function must work on
// the environment the stack gave it.
func secondStack(ctx context.Context, root, endpoint string, first *Stack, binaries map[string]string) []error {
	second, err := deploy(ctx, root, endpoint, first.Name+"-second", binaries, map[string]string{"AwsEndpointUrl": endpoint})
	if err != nil {
		return []error{err}
	}
	var problems []error
	taken := map[string]bool{}
	for _, r := range first.Resources {
		taken[r.Physical] = r.Physical != ""
	}
	for id, r := range second.Resources {
		if taken[r.Physical] {
			problems = append(problems, fmt.Errorf("%s: %s is the first stack's too", id, r.Physical))
		}
	}
	for fn, f := range second.Functions {
		if got := f.Environment["AWS_ENDPOINT_URL"]; got != endpoint {
			problems = append(problems, fmt.Errorf("%s of the second stack: AWS_ENDPOINT_URL=%q, want %q", fn, got, endpoint))
		}
		if got, ok := first.Functions[fn].Environment["AWS_ENDPOINT_URL"]; ok {
			problems = append(problems, fmt.Errorf("%s of the first stack: AWS_ENDPOINT_URL=%q, want none (AwsEndpointUrl is empty)", fn, got))
		}
	}
	if len(problems) > 0 {
		return problems
	}
	// The endpoint is the stack's; the harness adds only credentials.
	res, err := invokeFunction(ctx, root, "", second.Functions["InventoryFunction"], binaries["InventoryFunction"], "inventory-machine-report.json", false)
	if err != nil {
		return []error{fmt.Errorf("InventoryFunction of the second stack: %w", err)}
	}
	if !strings.Contains(string(res.Response), `"machines":3,"invalid":0,"absent":0,"changed":3,"failed":0`) {
		return []error{fmt.Errorf("InventoryFunction of the second stack: got %s, want 3 machines applied", res.Response)}
	}
	return nil
}

func formatMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}
