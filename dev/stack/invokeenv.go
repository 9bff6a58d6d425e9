package stack

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/fleetops/fleet/dev/lambdarun"
)

// InvokeEnv is the environment of function as sam local invoke computes
// it: the template's variables, then, for the variables the function
// declares, the value lookup (the caller's shell) has, then the env-vars
// file envVars (none when ""): its "Parameters" section, then its section
// named after the function. make invoke and the functions' tests both run
// a function with it.
func (t *Template) InvokeEnv(function string, lookup func(string) (string, bool), envVars string) (map[string]string, error) {
	env, err := t.FunctionEnv(function, LocalName)
	if err != nil {
		return nil, err
	}
	for k := range env {
		if v, ok := lookup(k); ok {
			env[k] = v
		}
	}
	if envVars != "" {
		if err := overlayEnvVars(env, envVars, function); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// overlayEnvVars applies a sam local --env-vars file to env: the "Parameters"
// object applies to every function, the object named after the function wins
// over it. As with sam local, only variables the template declares for the
// function are overridden.
func overlayEnvVars(env map[string]string, path, function string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("env vars: %w", err)
	}
	var file map[string]map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("env vars %s: %w", path, err)
	}
	for _, section := range []string{"Parameters", function} {
		for k, v := range file[section] {
			if _, declared := env[k]; !declared {
				continue
			}
			switch v := v.(type) {
			case string:
				env[k] = v
			case float64, bool:
				env[k] = fmt.Sprint(v)
			default:
				return fmt.Errorf("env vars %s: %s.%s is not a string", path, section, k)
			}
		}
	}
	return nil
}

// AttemptTimeoutEnv is the variable of the deadline of one DynamoDB attempt,
// which the template never sets (deployed, the default second holds).
const AttemptTimeoutEnv = "DYNAMODB_ATTEMPT_TIMEOUT"

// LocalDeadlines gives a function run on the emulator the DynamoDB attempt
// deadline make run gives its handlers, DynamoDBAttemptTimeout, unless
// lookup (the caller's shell) sets another: with the production second, a
// report's Scan of a few thousand slaves, or any call queued behind it on
// the emulator, which answers one request at a time, runs out of attempts
// (docs/decisions.md, "Deadlines of the local stack"). make invoke and make
// report run every function with it.
func LocalDeadlines(env map[string]string, lookup func(string) (string, bool)) {
	env[AttemptTimeoutEnv] = DynamoDBAttemptTimeout.String()
	if v, ok := lookup(AttemptTimeoutEnv); ok {
		env[AttemptTimeoutEnv] = v
	}
}

// Function is function of the template run from binary as make invoke runs
// it on this emulator: its sam local invoke environment (envVars, as
// InvokeEnv), the emulator's endpoints, the local deadlines, and its
// MemorySize and Timeout.
func (l *Local) Function(function, binary, envVars string) (lambdarun.Function, error) {
	env, err := l.Template.InvokeEnv(function, os.LookupEnv, envVars)
	if err != nil {
		return lambdarun.Function{}, err
	}
	for k, v := range l.Env {
		env[k] = v
	}
	LocalDeadlines(env, os.LookupEnv)
	cfg, err := l.Template.FunctionConfig(function)
	if err != nil {
		return lambdarun.Function{}, err
	}
	return lambdarun.Function{Binary: binary, Name: function, Env: env, MemorySize: cfg.MemorySize, Timeout: cfg.Timeout}, nil
}
