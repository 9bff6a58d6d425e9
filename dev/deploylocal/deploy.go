package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/fleetops/fleet/dev/stack"
)

// Stack is what dev/deploylocal.py reports of a stack it created.
type Stack struct {
	Name       string              `json:"stack"`
	Status     string              `json:"status"`
	Reason     string              `json:"reason"`
	Seconds    float64             `json:"seconds"`
	Parameters map[string]string   `json:"parameters"`
	Adjusted   []string            `json:"adjusted"`
	Outputs    map[string]string   `json:"outputs"`
	Resources  map[string]Resource `json:"resources"`
	// Unchecked are the resources of the translated template the emulator
	// did not create, by logical id: their type.
	Unchecked map[string]string   `json:"unchecked"`
	Functions map[string]Function `json:"functions"`
	Tables    map[string]Table    `json:"tables"`
	Rules     map[string]Rule     `json:"rules"`
	// Buses are the names of the account's event buses after the stack
	// was created (moto's CloudFormation names a bus, but leaves its
	// physical id empty).
	Buses []string `json:"buses"`
}

// Resource is one resource the stack created.
type Resource struct {
	Type     string `json:"type"`
	Physical string `json:"physical"`
}

// Function is a Lambda function of the stack as Lambda has it configured.
type Function struct {
	Name            string            `json:"name"`
	ARN             string            `json:"arn"`
	Runtime         string            `json:"runtime"`
	Handler         string            `json:"handler"`
	MemorySize      int               `json:"memorySize"`
	Timeout         int               `json:"timeout"`
	Environment     map[string]string `json:"environment"`
	Role            string            `json:"role"`
	Policies        []Policy          `json:"policies"`
	ManagedPolicies []string          `json:"managedPolicies"`
}

// Policy is an IAM policy document.
type Policy struct {
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a policy; Action and Resource are a string
// or a list of them.
type Statement struct {
	Effect   string `json:"Effect"`
	Action   any    `json:"Action"`
	Resource any    `json:"Resource"`
}

// Table is a DynamoDB table of the stack.
type Table struct {
	Name    string              `json:"name"`
	ARN     string              `json:"arn"`
	Keys    []string            `json:"keys"`
	Indexes map[string][]string `json:"indexes"`
	TTL     string              `json:"ttl"`
}

// Rule is an EventBridge rule of the stack.
type Rule struct {
	Pattern map[string]any `json:"pattern"`
	State   string         `json:"state"`
	Targets []string       `json:"targets"`
}

// buildFunctions builds every function of the template for this machine,
// with the Makefile's build line, into bin/deploy-local/<LogicalId>, and
// returns the bootstraps by logical id. They are what the stack's code zips
// hold and what runs against its tables.
func buildFunctions(ctx context.Context, root string, functions []string) (map[string]string, error) {
	out := map[string]string{}
	for _, fn := range functions {
		dir := filepath.Join(root, "bin", "deploy-local", fn)
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-s", "build-"+fn, "ARTIFACTS_DIR="+dir,
			"LAMBDA_GOOS="+runtime.GOOS, "LAMBDA_GOARCH="+runtime.GOARCH)
		cmd.Dir = root
		cmd.Env = withoutMake(stack.ProcessEnv(nil))
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", fn, err, msg)
		}
		out[fn] = filepath.Join(dir, "bootstrap")
	}
	return out, nil
}

// withoutMake drops the variables of an enclosing make (make test), whose
// jobserver a nested make must not use.
func withoutMake(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
}

// deploy runs dev/deploylocal.py against the emulator at endpoint: the
// template translated, its code uploaded, the stack named name created with
// samconfig.toml's parameters and params.
func deploy(ctx context.Context, root, endpoint, name string, code map[string]string, params map[string]string) (*Stack, error) {
	python := os.Getenv("MOTO_PYTHON")
	if python == "" {
		python = "python3"
	}
	args := []string{filepath.Join(root, "dev", "deploylocal.py"), "--endpoint", endpoint, "--stack", name,
		"--template", filepath.Join(root, stack.TemplateFile), "--samconfig", filepath.Join(root, "samconfig.toml")}
	for _, fn := range slices.Sorted(maps.Keys(code)) {
		args = append(args, "--code", fn+"="+code[fn])
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		args = append(args, "--parameter", k+"="+params[k])
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = root
	// The translator reads its region from boto3's environment, and nothing
	// of the developer's AWS setup may reach it.
	cmd.Env = stack.ProcessEnv(nil)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("deploy %s: %v\n%s", name, err, tail(stderr.String(), 4000))
	}
	var s Stack
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		return nil, fmt.Errorf("deploy %s: reading dev/deploylocal.py's answer: %v\n%s", name, err, tail(stdout.String(), 2000))
	}
	if s.Status != "CREATE_COMPLETE" {
		return &s, fmt.Errorf("stack %s: %s: %s", name, s.Status, s.Reason)
	}
	return &s, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// report writes one line, for make deploy-local and the test's log.
func report(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format+"\n", args...)
}
