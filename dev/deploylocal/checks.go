package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
)

// tableRef marks, in the environment the template gives a function, a
// variable whose value is a !Ref of a table: the stack must give it that
// table's generated name.
const tableRef = "\x00table:"

// bucketRef returns the logical id of the template's bucket whose local
// name is v, "" when v names none.
func bucketRef(tpl *stack.Template, v string) string {
	for _, id := range tpl.Buckets() {
		if stack.LocalBucketName(id) == v {
			return id
		}
	}
	return ""
}

// checkWiring compares what CloudFormation made of the template with the
// template: each function's environment (a table reference is the name of
// this stack's table, a bus's name one of this stack's buses, every other value the template's with the stack's
// parameters), memory, timeout, runtime and handler; each table's keys and
// indexes; the outputs naming tables.
func checkWiring(tpl *stack.Template, s *Stack) []error {
	var problems []error
	tpl, err := tpl.WithParameters(s.Parameters)
	if err != nil {
		return []error{err}
	}
	for _, fn := range tpl.Functions() {
		got, ok := s.Functions[fn]
		if !ok {
			problems = append(problems, fmt.Errorf("%s: the stack has no such function", fn))
			continue
		}
		want, err := tpl.FunctionEnv(fn, func(id string) string { return tableRef + id })
		if err != nil {
			return append(problems, err)
		}
		for k, v := range want {
			if id, ok := strings.CutPrefix(v, tableRef); ok {
				table, ok := s.Tables[id]
				if bus := s.Resources[id]; !ok && bus.Type == "AWS::Events::EventBus" {
					// A bus of the account named for this stack, not the
					// default bus another stack shares.
					name := got.Environment[k]
					if !slices.Contains(s.Buses, name) || !strings.HasPrefix(name, s.Name+"-") {
						problems = append(problems, fmt.Errorf("%s: %s is %q, want the stack's %s, one of the buses %v named for stack %s", fn, k, name, id, s.Buses, s.Name))
					}
					continue
				}
				if !ok {
					problems = append(problems, fmt.Errorf("%s: %s refers to %s, which the stack did not create", fn, k, id))
				} else if got.Environment[k] != table.Name {
					problems = append(problems, fmt.Errorf("%s: %s is %q, want %q, the stack's %s", fn, k, got.Environment[k], table.Name, id))
				}
				continue
			}
			if id := bucketRef(tpl, v); id != "" {
				// A !Ref of a bucket of the template: this stack's bucket.
				v = s.Resources[id].Physical
			}
			if got.Environment[k] != v {
				problems = append(problems, fmt.Errorf("%s: %s is %q, want %q", fn, k, got.Environment[k], v))
			}
		}
		for k := range got.Environment {
			if _, ok := want[k]; !ok {
				problems = append(problems, fmt.Errorf("%s: %s=%q is not in the template", fn, k, got.Environment[k]))
			}
		}
		cfg, err := tpl.FunctionConfig(fn)
		if err != nil {
			return append(problems, err)
		}
		if got.MemorySize != cfg.MemorySize || time.Duration(got.Timeout)*time.Second != cfg.Timeout {
			problems = append(problems, fmt.Errorf("%s: %d MB and %d s, want %d MB and %v", fn, got.MemorySize, got.Timeout, cfg.MemorySize, cfg.Timeout))
		}
		if got.Runtime != "provided.al2023" || got.Handler != "bootstrap" {
			problems = append(problems, fmt.Errorf("%s: runtime %s, handler %s, want provided.al2023 and bootstrap", fn, got.Runtime, got.Handler))
		}
	}
	for _, id := range tpl.Tables() {
		got, ok := s.Tables[id]
		if !ok {
			problems = append(problems, fmt.Errorf("%s: the stack has no such table", id))
			continue
		}
		keys, indexes, _, err := tpl.TableShape(id)
		if err != nil {
			return append(problems, err)
		}
		if !slices.Equal(got.Keys, keys) {
			problems = append(problems, fmt.Errorf("%s: keys %v, want %v", id, got.Keys, keys))
		}
		for name, want := range indexes {
			if !slices.Equal(got.Indexes[name], want) {
				problems = append(problems, fmt.Errorf("%s: index %s keys %v, want %v", id, name, got.Indexes[name], want))
			}
		}
		if out, ok := s.Outputs[id+"Name"]; ok && out != got.Name {
			problems = append(problems, fmt.Errorf("output %sName is %q, want %q", id, out, got.Name))
		}
	}
	return problems
}

// tablesUsed are the table variables each function's code reads and writes
// through (every function is given all of them by the template's Globals).
var tablesUsed = map[string][]string{
	"SlavesFunction":    {"SLAVES_TABLE", "HISTORY_TABLE", "EXPIRING_TABLE", "REQUESTS_TABLE", "CHANGES_TABLE"},
	"InventoryFunction": {"SLAVES_TABLE", "HISTORY_TABLE", "EXPIRING_TABLE", "CHANGES_TABLE"},
	"ExpiryFunction":    {"SLAVES_TABLE", "HISTORY_TABLE", "EXPIRING_TABLE", "CHANGES_TABLE"},
	"LogsFunction":      nil,
	"ConsoleFunction":   nil,
	"IndexerFunction":   {"LOG_INDEX_TABLE"},
}

// listsLogBuckets are the functions that list the log buckets; the others
// of LOG_BUCKETS only read the objects S3's events name.
var listsLogBuckets = map[string]bool{"LogsFunction": true}

// checkPolicies checks, on each function's role, what the emulator does not
// enforce: the role may use the tables of the variables its code uses, every
// table it is granted is one its environment names, and the log function
// may list and read its log buckets.
func checkPolicies(s *Stack) []error {
	var problems []error
	byARN := map[string]Table{}
	for _, t := range s.Tables {
		byARN[t.ARN] = t
	}
	for fn, f := range s.Functions {
		for _, k := range tablesUsed[fn] {
			arn := "arn:aws:dynamodb:" + stack.LocalRegion + ":123456789012:table/" + f.Environment[k]
			if !allows(f.Policies, "dynamodb:", arn) {
				problems = append(problems, fmt.Errorf("%s: its role grants no DynamoDB action on %s, the table of its %s", fn, arn, k))
			}
		}
		named := map[string]bool{}
		for _, v := range f.Environment {
			named[v] = true
		}
		for _, p := range f.Policies {
			for _, st := range p.Statement {
				for _, r := range list(st.Resource) {
					arn, _, _ := strings.Cut(r, "/index/")
					if t, ok := byARN[arn]; ok && !named[t.Name] {
						problems = append(problems, fmt.Errorf("%s: its role is granted %s, a table its environment does not name", fn, r))
					}
				}
			}
		}
		for _, b := range strings.Split(f.Environment["LOG_BUCKETS"], ",") {
			if b = strings.TrimSpace(b); b == "" {
				continue
			}
			if listsLogBuckets[fn] && !allows(f.Policies, "s3:ListBucket", "arn:aws:s3:::"+b) || !allows(f.Policies, "s3:GetObject", "arn:aws:s3:::"+b+"/*") {
				problems = append(problems, fmt.Errorf("%s: its role may not list and read the log bucket %s", fn, b))
			}
		}
	}
	return problems
}

// allows reports whether an Allow statement of policies grants an action
// starting with action on resource.
func allows(policies []Policy, action, resource string) bool {
	for _, p := range policies {
		for _, st := range p.Statement {
			if st.Effect != "Allow" {
				continue
			}
			if slices.ContainsFunc(list(st.Action), func(a string) bool { return strings.HasPrefix(a, action) }) &&
				slices.Contains(list(st.Resource), resource) {
				return true
			}
		}
	}
	return false
}

func list(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// checkRules checks that a rule of the stack sends the sample machine report
// to the inventory function, and that no rule sends it the schedule's event.
func checkRules(root string, s *Stack) []error {
	target := s.Functions["InventoryFunction"].ARN
	var report, scheduled map[string]any
	for file, into := range map[string]*map[string]any{"inventory-machine-report.json": &report, "expiry-scheduled-event.json": &scheduled} {
		data, err := os.ReadFile(filepath.Join(root, "events", file))
		if err != nil {
			return []error{err}
		}
		if err := json.Unmarshal(data, into); err != nil {
			return []error{fmt.Errorf("events/%s: %w", file, err)}
		}
	}
	routed := false
	for id, r := range s.Rules {
		if !slices.Contains(r.Targets, target) {
			continue
		}
		if r.State != "ENABLED" {
			return []error{fmt.Errorf("rule %s is %s", id, r.State)}
		}
		if matches(r.Pattern, scheduled) {
			return []error{fmt.Errorf("rule %s sends the inventory function a Scheduled Event", id)}
		}
		routed = routed || matches(r.Pattern, report)
	}
	if !routed {
		return []error{errors.New("no enabled rule of the stack sends events/inventory-machine-report.json to InventoryFunction")}
	}
	return nil
}

// matches is EventBridge's matching of the patterns the template writes: a
// field's list of allowed values, and objects for nested fields.
func matches(pattern, event map[string]any) bool {
	for k, want := range pattern {
		switch w := want.(type) {
		case map[string]any:
			sub, ok := event[k].(map[string]any)
			if !ok || !matches(w, sub) {
				return false
			}
		case []any:
			if !slices.ContainsFunc(w, func(v any) bool { return fmt.Sprint(v) == fmt.Sprint(event[k]) && event[k] != nil }) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// caller is the identity API Gateway's IAM authorization hands the
// functions (AUTH_MODE=authorizer, ApiAuthorizer=AWS_IAM).
var caller = map[string]any{"userArn": "arn:aws:iam::123456789012:user/deploy-local", "caller": "AIDADEPLOYLOCAL", "accountId": "123456789012"}

// runHandlers runs the real binaries, each with the environment the stack
// gave its function (the emulator's endpoint and credentials added), on
// sample events: a machine report, a freeze and a history read through the
// slave routes, an expiry and a retention run, a log lookup; then reads the
// stack's tables to see the changes there.
func runHandlers(ctx context.Context, root, endpoint string, s *Stack, binaries map[string]string, log func(string, ...any)) []error {
	var problems []error
	invoke := func(fn, file string, asCaller bool) ([]byte, error) {
		res, err := invokeFunction(ctx, root, endpoint, s.Functions[fn], binaries[fn], file, asCaller)
		if err != nil {
			return nil, fmt.Errorf("%s on events/%s: %w", fn, file, err)
		}
		log("  %s on events/%s: %s", fn, file, res.Report(s.Functions[fn].MemorySize))
		return res.Response, nil
	}
	answer := func(fn, file string, wantStatus int, wantBody string) {
		out, err := invoke(fn, file, true)
		if err != nil {
			problems = append(problems, err)
			return
		}
		var resp struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != wantStatus || !strings.Contains(resp.Body, wantBody) {
			problems = append(problems, fmt.Errorf("%s on events/%s: got %.300s, want %d with %s", fn, file, out, wantStatus, wantBody))
		}
	}
	result := func(fn, file, want string) {
		out, err := invoke(fn, file, false)
		if err != nil {
			problems = append(problems, err)
		} else if !strings.Contains(string(out), want) {
			problems = append(problems, fmt.Errorf("%s on events/%s: got %s, want %s", fn, file, out, want))
		}
	}

	result("InventoryFunction", "inventory-machine-report.json", `"machines":3,"invalid":0,"absent":0,"changed":3,"failed":0`)
	answer("SlavesFunction", "slaves-freeze.json", 200, "")
	answer("SlavesFunction", "slaves-history.json", 200, `"state":"FROZEN","timestamp"`)
	result("ExpiryFunction", "expiry-run.json", `"job":"expiry"`)
	result("ExpiryFunction", "expiry-retention.json", `"job":"retention"`)

	// The log bucket belongs to the task uploader, not to the stack: put
	// the sample events' log where it writes.
	bucket := strings.Split(s.Functions["LogsFunction"].Environment["LOG_BUCKETS"], ",")[0]
	s3c := stack.LocalS3Client(endpoint)
	const key = "web-api/2026/11/web-api-v42-1793491200000-0-node17-us_east_1a_0-1793494800000-stdout"
	err := stack.CreateBuckets(ctx, s3c, bucket)
	if err == nil {
		_, err = s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: strings.NewReader("started\n"), Metadata: map[string]string{"starttime": "1793491200000"}})
	}
	if err != nil {
		problems = append(problems, fmt.Errorf("the log bucket %s: %w", bucket, err))
	} else {
		// The lookups read the index (LogIndex): S3's event of the log
		// reaches IndexerFunction first, as EventBridge delivers it.
		result("IndexerFunction", "indexer-object-created.json", `"outcome":"indexed"`)
		answer("LogsFunction", "logs-task.json", 200, key)
	}

	// The changes are in the stack's own tables.
	db := stack.DynamoDBClient(endpoint)
	for _, id := range []string{"SlavesTable", "HistoryTable"} {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(s.Tables[id].Name), Select: "COUNT"})
		if err != nil || out.Count == 0 {
			problems = append(problems, fmt.Errorf("the stack's %s (%s) holds nothing after the report and the freeze (%v)", id, s.Tables[id].Name, err))
		}
	}
	return problems
}

// invokeFunction runs binary on events/file with the environment the stack
// gave f, and the emulator's endpoint (when the stack gave none),
// credentials and region added; asCaller puts an IAM caller in an API
// Gateway event.
func invokeFunction(ctx context.Context, root, endpoint string, f Function, binary, file string, asCaller bool) (lambdarun.Result, error) {
	event, err := os.ReadFile(filepath.Join(root, "events", file))
	if err != nil {
		return lambdarun.Result{}, err
	}
	if asCaller {
		if event, err = withCaller(event); err != nil {
			return lambdarun.Result{}, err
		}
	}
	env := map[string]string{}
	for k, v := range f.Environment {
		env[k] = v
	}
	if _, ok := env["AWS_ENDPOINT_URL"]; !ok {
		env["AWS_ENDPOINT_URL"] = endpoint
	}
	env["AWS_REGION"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = stack.LocalRegion, "test", "test"
	return lambdarun.Function{
		Binary: binary, Name: f.Name, Env: env,
		MemorySize: f.MemorySize, Timeout: time.Duration(f.Timeout) * time.Second,
	}.Invoke(ctx, event)
}

// withCaller returns an API Gateway event with an IAM caller in its request
// context.
func withCaller(event []byte) ([]byte, error) {
	var e map[string]any
	if err := json.Unmarshal(event, &e); err != nil {
		return nil, err
	}
	rc, _ := e["requestContext"].(map[string]any)
	if rc == nil {
		return nil, errors.New("the event has no requestContext")
	}
	id, _ := rc["identity"].(map[string]any)
	if id == nil {
		id = map[string]any{}
	}
	for k, v := range caller {
		id[k] = v
	}
	rc["identity"] = id
	return json.Marshal(e)
}
