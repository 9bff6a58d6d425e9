package stack

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/slaves"
)

func loadRepoTemplate(t *testing.T) *Template {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := LoadTemplate(filepath.Join(root, TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func parse(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := ParseTemplate([]byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return tpl
}

func TestShortTagsBecomeIntrinsicFunctions(t *testing.T) {
	tpl := parse(t, `
Resources:
  R:
    Type: Test::Thing
    Properties:
      Ref: !Ref Param
      RefOfNumber: !Ref 2
      GetAtt: !GetAtt Table.StreamArn
      GetAttNested: !GetAtt Stack.Outputs.Name
      GetAttList: !GetAtt [Table, Arn]
      Sub: !Sub "${Table.Arn}/index/*"
      SubList: !Sub ["${A}-x", {A: !Ref Param}]
      If: !If [IsProd, !Ref Param, !Ref AWS::NoValue]
      Cond: !Condition IsProd
      Join: !Join ["", [a, !Ref Param]]
      Long:
        Fn::GetAtt: [Table, Arn]
      Plain: [1, true, text, 1.5]
`)
	got := tpl.Resources["R"].Properties
	want := map[string]any{
		"Ref":          map[string]any{"Ref": "Param"},
		"RefOfNumber":  map[string]any{"Ref": "2"},
		"GetAtt":       map[string]any{"Fn::GetAtt": []any{"Table", "StreamArn"}},
		"GetAttNested": map[string]any{"Fn::GetAtt": []any{"Stack", "Outputs.Name"}},
		"GetAttList":   map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}},
		"Sub":          map[string]any{"Fn::Sub": "${Table.Arn}/index/*"},
		"SubList":      map[string]any{"Fn::Sub": []any{"${A}-x", map[string]any{"A": map[string]any{"Ref": "Param"}}}},
		"If":           map[string]any{"Fn::If": []any{"IsProd", map[string]any{"Ref": "Param"}, map[string]any{"Ref": "AWS::NoValue"}}},
		"Cond":         map[string]any{"Condition": "IsProd"},
		"Join":         map[string]any{"Fn::Join": []any{"", []any{"a", map[string]any{"Ref": "Param"}}}},
		"Long":         map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}},
		"Plain":        []any{1, true, "text", 1.5},
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], w)
		}
	}
}

func TestParseTemplateRejectsMalformedInput(t *testing.T) {
	for name, src := range map[string]string{
		"empty":                "",
		"not a mapping":        "- a\n- b\n",
		"resource has no type": "Resources:\n  R:\n    Properties: {}\n",
		"bad GetAtt":           "Resources:\n  R:\n    Type: T\n    Properties:\n      A: !GetAtt NoDot\n",
		"bad yaml":             "Resources: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseTemplate([]byte(src)); err == nil {
				t.Errorf("got no error")
			}
		})
	}
}

func TestParametersKeepTheirDefaultAsAString(t *testing.T) {
	tpl := parse(t, `
Parameters:
  Number: {Type: Number, Default: 2}
  Float: {Type: Number, Default: 1.5}
  Bool: {Type: String, Default: true}
  Empty: {Type: String, Default: ""}
  NoDefault: {Type: String}
Resources: {}
`)
	for name, want := range map[string]Parameter{
		"Number":    {Type: "Number", Default: "2", HasDefault: true},
		"Float":     {Type: "Number", Default: "1.5", HasDefault: true},
		"Bool":      {Type: "String", Default: "true", HasDefault: true},
		"Empty":     {Type: "String", Default: "", HasDefault: true},
		"NoDefault": {Type: "String"},
	} {
		if got := tpl.Parameters[name]; got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

const envTemplate = `
Parameters:
  Mode: {Type: String, Default: none}
  Limit: {Type: Number, Default: 2}
  Required: {Type: String}
Globals:
  Function:
    Timeout: 10
    Environment:
      Variables:
        TABLE: !Ref Table
        MODE: !Ref Mode
        SHARED: global
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  Bucket:
    Type: AWS::S3::Bucket
  Queue:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      MemorySize: 512
      Environment:
        Variables:
          SHARED: own
          LIMIT: !Ref Limit
          PLAIN: 42
  Bare:
    Type: AWS::Serverless::Function
  Raw:
    Type: AWS::Lambda::Function
    Properties:
      Timeout: 7
      Environment:
        Variables:
          ONLY: raw
`

func TestFunctionEnvMergesGlobalsAndResolvesReferences(t *testing.T) {
	tpl := parse(t, envTemplate)
	name := func(id string) string { return "local-" + id }
	for _, tc := range []struct {
		function string
		want     map[string]string
	}{
		{"Fn", map[string]string{"TABLE": "local-Table", "MODE": "none", "SHARED": "own", "LIMIT": "2", "PLAIN": "42"}},
		{"Bare", map[string]string{"TABLE": "local-Table", "MODE": "none", "SHARED": "global"}},
		{"Raw", map[string]string{"ONLY": "raw"}},
	} {
		t.Run(tc.function, func(t *testing.T) {
			got, err := tpl.FunctionEnv(tc.function, name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFunctionEnvNamesTheVariableItCannotResolve(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{"!Sub '${Table}-x'", "Fn::Sub"},
		{"!GetAtt Table.Arn", "Fn::GetAtt"},
		{"!Ref Queue", "Queue"},
		{"!Ref Required", "no Default"},
		{"!Ref Missing", "Missing"},
		{"[a, b]", "not a scalar"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			src := strings.Replace(envTemplate, "PLAIN: 42", "BROKEN: "+tc.value, 1)
			_, err := parse(t, src).FunctionEnv("Fn", LocalName)
			if err == nil {
				t.Fatal("got no error")
			}
			if !strings.Contains(err.Error(), "BROKEN") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to name BROKEN and %q", err, tc.want)
			}
		})
	}
}

func TestFunctionLookupErrors(t *testing.T) {
	tpl := parse(t, envTemplate)
	if _, err := tpl.FunctionEnv("Nope", LocalName); err == nil || !strings.Contains(err.Error(), "Fn") {
		t.Errorf("unknown function: got %v, want an error listing the functions", err)
	}
	if _, err := tpl.FunctionConfig("Table"); err == nil || !strings.Contains(err.Error(), "not a function") {
		t.Errorf("table as function: got %v, want 'not a function'", err)
	}
}

func TestFunctionConfig(t *testing.T) {
	tpl := parse(t, envTemplate)
	for fn, want := range map[string]FunctionConfig{
		"Fn":   {MemorySize: 512, Timeout: 10 * time.Second},
		"Bare": {MemorySize: 128, Timeout: 10 * time.Second},
		"Raw":  {MemorySize: 128, Timeout: 7 * time.Second},
	} {
		got, err := tpl.FunctionConfig(fn)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", fn, got, want)
		}
	}
}

func TestTableSpecReadsKeysIndexesAndTTL(t *testing.T) {
	tpl := parse(t, `
Parameters:
  Billing: {Type: String, Default: PROVISIONED}
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: !Ref Billing
      AttributeDefinitions:
        - {AttributeName: pk, AttributeType: S}
        - {AttributeName: sk, AttributeType: N}
      KeySchema:
        - {AttributeName: pk, KeyType: HASH}
        - {AttributeName: sk, KeyType: RANGE}
      ProvisionedThroughput: {ReadCapacityUnits: "5", WriteCapacityUnits: 3}
      LocalSecondaryIndexes:
        - IndexName: BySk
          KeySchema: [{AttributeName: pk, KeyType: HASH}, {AttributeName: sk, KeyType: RANGE}]
          Projection: {ProjectionType: INCLUDE, NonKeyAttributes: [a]}
      TimeToLiveSpecification: {AttributeName: ttl, Enabled: "true"}
      SSESpecification:
        KMSMasterKeyId: !GetAtt Key.Arn
`)
	spec, err := tpl.tableSpec("T")
	if err != nil {
		t.Fatal(err)
	}
	if spec.BillingMode != "PROVISIONED" {
		t.Errorf("BillingMode: got %q, want PROVISIONED", spec.BillingMode)
	}
	if p := spec.ProvisionedThroughput; p == nil || p.ReadCapacityUnits != 5 || p.WriteCapacityUnits != 3 {
		t.Errorf("ProvisionedThroughput: got %+v, want 5/3", p)
	}
	if got := specKeyStrings(spec.KeySchema); !slices.Equal(got, []string{"pk HASH", "sk RANGE"}) {
		t.Errorf("KeySchema: got %v", got)
	}
	if len(spec.LocalSecondaryIndexes) != 1 || spec.LocalSecondaryIndexes[0].Projection.NonKeyAttributes[0] != "a" {
		t.Errorf("LocalSecondaryIndexes: got %+v", spec.LocalSecondaryIndexes)
	}
	if ttl := spec.TimeToLiveSpecification; ttl == nil || ttl.AttributeName != "ttl" || !bool(ttl.Enabled) {
		t.Errorf("TimeToLiveSpecification: got %+v", ttl)
	}
}

// The repository's template: what dev/run, dev/invoke and the tests rely on.

func TestRepoTemplateDeclaresTheFunctionsAndTables(t *testing.T) {
	tpl := loadRepoTemplate(t)
	if got, want := tpl.Functions(), []string{"ConsoleFunction", "ExpiryFunction", "IndexerFunction", "InventoryFunction", "LogsFunction", "PublisherFunction", "SlavesFunction"}; !slices.Equal(got, want) {
		t.Errorf("Functions: got %v, want %v", got, want)
	}
	if got, want := tpl.Tables(), []string{"ChangesTable", "ExpiringTable", "HistoryTable", "LogIndexTable", "RequestsTable", "SlavesTable"}; !slices.Equal(got, want) {
		t.Errorf("Tables: got %v, want %v", got, want)
	}
	spec, err := tpl.tableSpec("SlavesTable")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.GlobalSecondaryIndexes) != 1 || spec.GlobalSecondaryIndexes[0].IndexName != "ByState" {
		t.Errorf("SlavesTable indexes: got %+v, want ByState", spec.GlobalSecondaryIndexes)
	}
}

// Every token authorizer reads the header AuthHeader names (clients that
// send their headers to S3's links too need one other than Authorization),
// and only IAM's signature stays in Authorization.
func TestRepoTemplateAuthorizersReadTheAuthHeader(t *testing.T) {
	tpl := loadRepoTemplate(t)
	if p := tpl.Parameters["AuthHeader"]; p.Default != "Authorization" {
		t.Errorf("AuthHeader: got default %q, want Authorization", p.Default)
	}
	body := mapOf(tpl.Resources["FleetApi"].Properties["DefinitionBody"])
	schemes := map[string]map[string]any{}
	var walk func(v any, condition string)
	walk = func(v any, condition string) {
		m := mapOf(v)
		if branches, ok := m["Fn::If"].([]any); ok && len(branches) == 3 {
			walk(branches[1], branches[0].(string))
			walk(branches[2], "not "+branches[0].(string))
			return
		}
		schemes[condition] = mapOf(m["fleetAuth"])
	}
	walk(body["securityDefinitions"], "")
	if len(schemes) != 4 {
		t.Fatalf("got the schemes %v, want one per ApiAuthorizer", schemes)
	}
	for condition, scheme := range schemes {
		iam := scheme["x-amazon-apigateway-authtype"] == "awsSigv4"
		header, _ := mapOf(scheme["name"])["Ref"].(string)
		switch {
		case iam && scheme["name"] != "Authorization":
			t.Errorf("%s (IAM): got the header %v, want Authorization, where SigV4 signs", condition, scheme["name"])
		case !iam && header != "AuthHeader":
			t.Errorf("%s: got the header %v, want !Ref AuthHeader", condition, scheme["name"])
		}
		authorizer := mapOf(scheme["x-amazon-apigateway-authorizer"])
		if authorizer["type"] == "request" {
			if got := mapOf(authorizer["identitySource"])["Fn::Sub"]; got != "method.request.header.${AuthHeader}" {
				t.Errorf("%s: got the identity source %v, want the AuthHeader header", condition, authorizer["identitySource"])
			}
		}
	}
}

func TestRepoTemplateGivesEveryFunctionTheSpecEnvironment(t *testing.T) {
	tpl := loadRepoTemplate(t)
	want := map[string]string{
		"SLAVES_TABLE":               "SlavesTable",
		"HISTORY_TABLE":              "HistoryTable",
		"EXPIRING_TABLE":             "ExpiringTable",
		"REQUESTS_TABLE":             "RequestsTable",
		"CHANGES_TABLE":              "ChangesTable",
		"MAX_DECOMMISSIONING_SLAVES": "2",
		"MAX_EXPIRING_DURATION":      "720h",
		"DEAD_SLAVE_RETENTION":       "168h",
		"HISTORY_RETENTION":          "2160h",
		"AUTH_MODE":                  "authorizer",
		"ADMIN_GROUPS":               "",
		"READ_GROUPS":                "",
	}
	logs := maps.Clone(want)
	maps.Copy(logs, map[string]string{
		"LOG_BUCKETS":         "task-logs",
		"LOG_KEY_FORMAT":      "%requestId/%Y/%m/%taskId_%index-%s-%filename",
		"LOG_URL_TTL":         "1h",
		"LOG_LOOKBACK":        "720h",
		"LOG_LIST_TIMEOUT":    "5s",
		"LOG_LINK_TIMEOUT":    "2s",
		"LOG_INDEX":           "true",
		"LOG_INDEX_TABLE":     "LogIndexTable",
		"S3_FORCE_PATH_STYLE": "false",
	})
	for _, fn := range tpl.Functions() {
		got, err := tpl.FunctionEnv(fn, LocalName)
		if err != nil {
			t.Fatal(err)
		}
		want := want
		switch fn {
		case "LogsFunction":
			want = logs
		case "SlavesFunction":
			want = maps.Clone(want)
			want["GOMEMLIMIT"] = "800MiB"
		case "InventoryFunction":
			want = maps.Clone(want)
			want["MAX_LOST_FRACTION"], want["LOST_WINDOW"] = "0.2", "60s"
			want["REPORTS_BUCKET"], want["S3_FORCE_PATH_STYLE"], want["GOMEMLIMIT"], want["REPORT_PART_SIZE"] = "reportsbucket", "false", "400MiB", "2000"
		case "IndexerFunction":
			want = maps.Clone(want)
			want["LOG_BUCKETS"], want["LOG_KEY_FORMAT"] = logs["LOG_BUCKETS"], logs["LOG_KEY_FORMAT"]
			want["LOG_INDEX_TABLE"], want["S3_FORCE_PATH_STYLE"] = "LogIndexTable", "false"
		case "PublisherFunction":
			want = maps.Clone(want)
			want["EVENT_BUS_NAME"] = "SlaveEventsBus"
		case "ConsoleFunction":
			want = maps.Clone(want)
			want["API_AUTHORIZER"], want["COGNITO_DOMAIN"], want["COGNITO_CLIENT_ID"], want["API_AUTH_HEADER"] = "AWS_IAM", "", "", "Authorization"
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", fn, got, want)
		}
		cfg, err := tpl.FunctionConfig(fn)
		if err != nil {
			t.Fatal(err)
		}
		if fn == "SlavesFunction" && (cfg.Timeout < slaves.StreamHold+time.Second || slaves.RouteDeadline >= 29*time.Second) {
			t.Errorf("%s: Timeout %v and route deadline %v, want a stream's hold (%v) and a second, and every other request within API Gateway's 29 s",
				fn, cfg.Timeout, slaves.RouteDeadline, slaves.StreamHold)
		}
	}
}

func TestRepoTemplatePoliciesGrantNoWildcard(t *testing.T) {
	tpl := loadRepoTemplate(t)
	for _, params := range []map[string]string{nil, {"LogBuckets": "task-logs,task-logs.eu-west-1,archive-logs"}} {
		for _, p := range policyProblems(tpl, params) {
			t.Errorf("LogBuckets %q: %s", params["LogBuckets"], p)
		}
	}
}

// The check must see what the template grants, or it passes by seeing
// nothing: LogsFunction's ARNs are built with !Split, !Sub and !Join over
// LogBuckets, one bucket ARN and one object ARN per bucket.
func TestRepoTemplateLogsFunctionReadsOnlyItsBuckets(t *testing.T) {
	tpl := loadRepoTemplate(t)
	logIndex := []string{
		"arn:aws:dynamodb:us-east-1:123456789012:table/LogIndexTable/index/ByUntil",
		"arn:aws:dynamodb:us-east-1:123456789012:table/LogIndexTable/index/ByKey",
	}
	complete := []string{"arn:aws:dynamodb:us-east-1:123456789012:table/LogIndexTable"}
	for buckets, want := range map[string][]policyStatement{
		"": { // the default, task-logs
			{Effect: "Allow", Actions: []string{"dynamodb:Query"}, Resources: logIndex},
			{Effect: "Allow", Actions: []string{"dynamodb:BatchGetItem"}, Resources: complete},
			{Effect: "Allow", Actions: []string{"s3:ListBucket"}, Resources: []string{"arn:aws:s3:::task-logs"}},
			{Effect: "Allow", Actions: []string{"s3:GetObject"}, Resources: []string{"arn:aws:s3:::task-logs/*"}},
		},
		"task-logs,archive.logs": {
			{Effect: "Allow", Actions: []string{"dynamodb:Query"}, Resources: logIndex},
			{Effect: "Allow", Actions: []string{"dynamodb:BatchGetItem"}, Resources: complete},
			{Effect: "Allow", Actions: []string{"s3:ListBucket"}, Resources: []string{"arn:aws:s3:::task-logs", "arn:aws:s3:::archive.logs"}},
			{Effect: "Allow", Actions: []string{"s3:GetObject"}, Resources: []string{"arn:aws:s3:::task-logs/*", "arn:aws:s3:::archive.logs/*"}},
		},
	} {
		t.Run("LogBuckets="+buckets, func(t *testing.T) {
			params := map[string]string{}
			if buckets != "" {
				params["LogBuckets"] = buckets
			}
			got, problems := functionStatements(tpl, "LogsFunction", params)
			if len(problems) != 0 || !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v (%v), want %+v", got, problems, want)
			}
		})
	}
	t.Run("every other function's tables are the template's, and InventoryFunction's reports", func(t *testing.T) {
		for _, fn := range []string{"SlavesFunction", "InventoryFunction", "ExpiryFunction"} {
			got, problems := functionStatements(tpl, fn, nil)
			if len(got) == 0 || len(problems) != 0 {
				t.Fatalf("%s: got %+v (%v), want resolved statements", fn, got, problems)
			}
			for _, st := range got {
				for _, r := range st.Resources {
					reports := fn == "InventoryFunction" && (r == "arn:aws:s3:::reportsbucket/reports/*" || r == "arn:aws:s3:::reportsbucket/reports-work/*")
					if !reports && !strings.HasPrefix(r, "arn:aws:dynamodb:us-east-1:123456789012:table/") {
						t.Errorf("%s: got resource %s, want one of the template's tables (or InventoryFunction's report objects)", fn, r)
					}
				}
			}
		}
	})
}

// overGranting is a template with every over-grant policyProblems must
// find, beside grants it must accept.
const overGranting = `
Parameters:
  LogBuckets: {Type: String, Default: task-logs}
Conditions:
  Always: !Equals [a, a]
Resources:
  Table:
    Type: AWS::DynamoDB::Table
  SlavesFunction:
    Type: AWS::Serverless::Function
    Properties:
      Policies:
        - Version: "2012-10-17"
          Statement:
            - Effect: Allow
              Action: dynamodb:*
              Resource: "*"
            - Sid: TableChildren
              Effect: Allow
              Action: [dynamodb:GetItem]
              Resource: !Sub "${Table.Arn}/*"
            - Effect: Allow
              Action: s3:GetObject
              Resource: arn:aws:s3:::task-logs/*
            - Effect: Allow
              Action: dynamodb:Get*
              Resource: arn:aws:dynamodb:us-east-1:123456789012:table/*
            - Effect: Allow
              NotAction: dynamodb:DeleteTable
              Resource: !GetAtt Table.Arn
            - Effect: Allow
              Action: [dynamodb:Query]
              Resource: !Sub "${Table.Arn}/index/ByState"
            - Effect: Deny
              Action: "*"
              Resource: "*"
        - DynamoDBCrudPolicy:
            TableName: !Ref Table
        - arn:aws:iam::aws:policy/AdministratorAccess
  LogsFunction:
    Type: AWS::Serverless::Function
    Properties:
      Policies:
        - Statement:
            - Effect: Allow
              Action: [s3:GetObject, s3:PutObject, s3:DeleteObject, s3:ListBucket, s3:GetObjectTagging]
              Resource: !Split
                - ","
                - !Sub
                  - arn:aws:s3:::${Names}/*
                  - Names: !Join ["/*,arn:aws:s3:::", !Split [",", !Ref LogBuckets]]
            - Effect: Allow
              Action: s3:GetObject
              Resource: ["arn:aws:s3:::*", "arn:aws:s3:::*/*", "arn:aws:s3:::task-*/*", "arn:aws:s3:*:*:task-logs", "arn:aws:s3:::task-logs*", "arn:aws:s3:::task-logs/2026/*"]
            - Effect: Allow
              Action: dynamodb:GetItem
              Resource: !GetAtt Table.Arn
            - Effect: Allow
              Action: s3:Get?bject
              Resource: !If [Always, arn:aws:s3:::a, arn:aws:s3:::b]
  RoleFunction:
    Type: AWS::Serverless::Function
    Properties:
      Role: arn:aws:iam::123456789012:role/admin
  BareFunction:
    Type: AWS::Serverless::Function
`

func TestPolicyProblemsReportsEveryOverGrant(t *testing.T) {
	problems := policyProblems(parse(t, overGranting), nil)
	for _, want := range []string{
		`SlavesFunction: policy 1 statement 1: Action "dynamodb:*" is a wildcard`,
		`SlavesFunction: policy 1 statement 1: Resource "*" is every resource`,
		`SlavesFunction: policy 1 statement TableChildren: Resource "arn:aws:dynamodb:us-east-1:123456789012:table/Table/*" is a wildcard`,
		`SlavesFunction: policy 1 statement 3: Action "s3:GetObject" is S3, which only IndexerFunction, InventoryFunction, LogsFunction may use`,
		`SlavesFunction: policy 1 statement 4: Action "dynamodb:Get*" is a wildcard`,
		`SlavesFunction: policy 1 statement 4: Resource "arn:aws:dynamodb:us-east-1:123456789012:table/*" is a wildcard`,
		`SlavesFunction: policy 1 statement 5: NotAction grants everything it does not name`,
		`SlavesFunction: policy 2 is not an explicit policy document`,
		`SlavesFunction: policy 3 is not an explicit policy document`,
		`LogsFunction: policy 1 statement 1: Action "s3:PutObject" is not read-only`,
		`LogsFunction: policy 1 statement 1: Action "s3:DeleteObject" is not read-only`,
		`LogsFunction: policy 1 statement 2: Resource "arn:aws:s3:::*" is a wildcard`,
		`LogsFunction: policy 1 statement 2: Resource "arn:aws:s3:::*/*" is a wildcard`,
		`LogsFunction: policy 1 statement 2: Resource "arn:aws:s3:::task-*/*" is a wildcard`,
		`LogsFunction: policy 1 statement 2: Resource "arn:aws:s3:*:*:task-logs" is a wildcard`,
		`LogsFunction: policy 1 statement 2: Resource "arn:aws:s3:::task-logs*" is a wildcard`,
		`LogsFunction: policy 1 statement 3: Action "dynamodb:GetItem" is DynamoDB, which LogsFunction does not use`,
		`LogsFunction: policy 1 statement 4: Action "s3:Get?bject" is a wildcard`,
		`LogsFunction: policy 1 statement 4: Resource: Fn::If cannot be resolved`,
		`RoleFunction: a Role given outright cannot be checked`,
		`BareFunction: no Policies`,
	} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("got no problem %q", want)
		}
	}
	for _, p := range problems {
		for _, fine := range []string{
			"statement 6", "statement 7", // an index of one named table, and a Deny
			`"s3:GetObject" is not read-only`, `"s3:ListBucket"`, `"s3:GetObjectTagging"`, `"arn:aws:s3:::task-logs/*"`,
			`"arn:aws:s3:::task-logs/2026/*"`, // objects of a named bucket, fewer of them
		} {
			if strings.Contains(p, fine) {
				t.Errorf("got problem %q, want %s accepted", p, fine)
			}
		}
	}
	if t.Failed() {
		t.Logf("problems:\n%s", strings.Join(problems, "\n"))
	}
}

// policyStatement is one statement of a function's policy, its actions and
// resources resolved to strings.
type policyStatement struct {
	Effect    string
	Actions   []string
	Resources []string
}

// Which functions may use S3, which may not use DynamoDB, and which may
// only read. Every function may use DynamoDB and S3 only; a new service
// must be added here deliberately.
var (
	s3Functions = map[string]bool{"LogsFunction": true, "InventoryFunction": true, "IndexerFunction": true}
	noDynamoDB  = map[string]bool{"LogsFunction": true, "PublisherFunction": true}
	// busWriters may put events on a bus, and only that.
	busWriters = map[string]bool{"PublisherFunction": true}
	// indexReaders may Query the log index, and nothing else of DynamoDB.
	indexReaders      = map[string]bool{"LogsFunction": true}
	readOnlyFunctions = map[string]bool{"LogsFunction": true}
)

// policyProblems checks the policies of every function of tpl for least
// privilege, with params overriding parameter defaults, and returns what it
// finds wrong: wildcard actions; resources that are "*" or end in a wildcard
// (other than the objects of one named bucket, arn:aws:s3:::bucket/*);
// NotAction and NotResource; services other than DynamoDB and S3; S3 outside
// s3Functions, DynamoDB inside them; writes by readOnlyFunctions; and
// anything it cannot verify (managed policies, SAM policy templates, a Role,
// an intrinsic it cannot resolve). Deny statements grant nothing and are
// not checked.
func policyProblems(tpl *Template, params map[string]string) []string {
	var problems []string
	for _, fn := range tpl.Functions() {
		_, p := functionStatements(tpl, fn, params)
		problems = append(problems, p...)
	}
	return problems
}

// functionStatements resolves fn's Allow and Deny statements and returns
// them with the problems of policyProblems.
func functionStatements(tpl *Template, fn string, params map[string]string) ([]policyStatement, []string) {
	var out []policyStatement
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(fn+": "+format, args...)) }
	props := tpl.Resources[fn].Properties
	if _, ok := props["Role"]; ok {
		report("a Role given outright cannot be checked")
	}
	raw, ok := props["Policies"]
	if !ok {
		if _, role := props["Role"]; !role {
			report("no Policies")
		}
		return nil, problems
	}
	eval := cfnEvaluator{tpl: tpl, params: params}
	for i, policy := range asList(raw) {
		doc, ok := policy.(map[string]any)
		if !ok || doc["Statement"] == nil || isIntrinsic(doc) {
			report("policy %d is not an explicit policy document (a managed policy or a SAM policy template cannot be checked)", i+1)
			continue
		}
		for j, s := range asList(doc["Statement"]) {
			st := mapOf(s)
			where := fmt.Sprintf("policy %d statement %d", i+1, j+1)
			if sid := stringOf(st["Sid"]); sid != "" {
				where = fmt.Sprintf("policy %d statement %s", i+1, sid)
			}
			effect := stringOf(st["Effect"])
			if effect == "Deny" {
				continue
			}
			for _, not := range []string{"NotAction", "NotResource"} {
				if _, ok := st[not]; ok {
					report("%s: %s grants everything it does not name", where, not)
				}
			}
			stmt := policyStatement{Effect: effect}
			var err error
			if _, not := st["NotAction"]; !not {
				if stmt.Actions, err = eval.strings(st["Action"]); err != nil {
					report("%s: Action: %v", where, err)
				}
			}
			if _, not := st["NotResource"]; !not {
				if stmt.Resources, err = eval.strings(st["Resource"]); err != nil {
					report("%s: Resource: %v", where, err)
				}
			}
			for _, a := range stmt.Actions {
				if p := actionProblem(fn, a); p != "" {
					report("%s: Action %q %s", where, a, p)
				}
			}
			for _, r := range stmt.Resources {
				if p := resourceProblem(r); p != "" {
					report("%s: Resource %q %s", where, r, p)
				}
			}
			out = append(out, stmt)
		}
	}
	return out, problems
}

// actionProblem says what is wrong with fn being allowed action, or "".
func actionProblem(fn, action string) string {
	if strings.ContainsAny(action, "*?") {
		return "is a wildcard"
	}
	service, name, _ := strings.Cut(action, ":")
	switch strings.ToLower(service) {
	case "dynamodb":
		// The log index's readers Query it, and read which buckets it
		// holds completely (BatchGetItem).
		if noDynamoDB[fn] && !(indexReaders[fn] && (action == "dynamodb:Query" || action == "dynamodb:BatchGetItem")) {
			return "is DynamoDB, which " + fn + " does not use"
		}
	case "s3":
		if !s3Functions[fn] {
			return "is S3, which only " + strings.Join(sortedKeys(s3Functions), ", ") + " may use"
		}
	case "events":
		if !busWriters[fn] || action != "events:PutEvents" {
			return "is EventBridge, which only " + strings.Join(sortedKeys(busWriters), ", ") + " may use, to put events"
		}
	default:
		return "is neither DynamoDB, S3 nor EventBridge"
	}
	if readOnlyFunctions[fn] {
		for _, read := range []string{"Get", "List", "Describe", "Head", "Query", "Scan", "BatchGet"} {
			if strings.HasPrefix(name, read) {
				return ""
			}
		}
		return "is not read-only"
	}
	return ""
}

// resourceProblem says what is wrong with granting resource, or "". The one
// wildcard allowed is in the object key of one named bucket
// (arn:aws:s3:::task-logs/*): it grants no more than that bucket's objects.
func resourceProblem(resource string) string {
	if resource == "*" {
		return "is every resource"
	}
	parts := strings.SplitN(resource, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return "is not an ARN"
	}
	if !strings.ContainsAny(resource, "*?") {
		return ""
	}
	bucket, key, object := strings.Cut(parts[5], "/")
	if strings.Join(parts[:5], ":") == "arn:aws:s3::" && object && key != "" && bucket != "" && !strings.ContainsAny(bucket, "*?") {
		return ""
	}
	return "is a wildcard"
}

// cfnEvaluator resolves the intrinsics a policy is written with: Ref (of a
// parameter, a pseudo parameter or a resource), Fn::GetAtt of an Arn,
// Fn::Sub, Fn::Join and Fn::Split. Parameters take params over their
// Default. A resource's name is its logical id, in us-east-1 of account
// 123456789012.
type cfnEvaluator struct {
	tpl    *Template
	params map[string]string
}

var pseudoParameters = map[string]string{
	"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
	"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "fleet",
}

// strings resolves v to a list of strings: a string, a list, or an
// intrinsic giving either.
func (e cfnEvaluator) strings(v any) ([]string, error) {
	if v == nil {
		return nil, errors.New("missing")
	}
	r, err := e.eval(v)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range asList(r) {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%v is not a string", x)
		}
		out = append(out, s)
	}
	return out, nil
}

func (e cfnEvaluator) eval(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		var out []any
		for _, x := range v {
			r, err := e.eval(x)
			if err != nil {
				return nil, err
			}
			out = append(out, asList(r)...)
		}
		return out, nil
	case map[string]any:
		if !isIntrinsic(v) {
			return nil, errors.New("a mapping is not a value")
		}
	default:
		return scalarString(v)
	}
	m := v.(map[string]any)
	name := sortedKeys(m)[0]
	arg := m[name]
	switch name {
	case "Ref":
		return e.ref(stringOf(arg))
	case "Fn::GetAtt":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::GetAtt %v is not [Resource, Attribute]", arg)
		}
		return e.getAtt(stringOf(a[0]), stringOf(a[1]))
	case "Fn::Sub":
		return e.sub(arg)
	case "Fn::Join":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Join %v is not [delimiter, list]", arg)
		}
		parts, err := e.strings(a[1])
		if err != nil {
			return nil, err
		}
		return strings.Join(parts, stringOf(a[0])), nil
	case "Fn::Split":
		a := asList(arg)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Split %v is not [delimiter, string]", arg)
		}
		s, err := e.eval(a[1])
		if err != nil {
			return nil, err
		}
		str, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Split of %v, not a string", s)
		}
		var out []any
		for _, p := range strings.Split(str, stringOf(a[0])) {
			out = append(out, p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s cannot be resolved", name)
}

func (e cfnEvaluator) ref(id string) (any, error) {
	if v, ok := pseudoParameters[id]; ok {
		return v, nil
	}
	if v, ok := e.params[id]; ok {
		return v, nil
	}
	if p, ok := e.tpl.Parameters[id]; ok {
		if !p.HasDefault {
			return nil, fmt.Errorf("parameter %s has no Default", id)
		}
		return p.Default, nil
	}
	if _, ok := e.tpl.Resources[id]; ok {
		return id, nil
	}
	return nil, fmt.Errorf("Ref %s cannot be resolved", id)
}

func (e cfnEvaluator) getAtt(id, attr string) (any, error) {
	r, ok := e.tpl.Resources[id]
	if !ok || attr != "Arn" {
		return nil, fmt.Errorf("Fn::GetAtt %s.%s cannot be resolved", id, attr)
	}
	switch r.Type {
	case dynamoDBTable:
		return "arn:aws:dynamodb:us-east-1:123456789012:table/" + id, nil
	case serverlessFunction, lambdaFunction:
		return "arn:aws:lambda:us-east-1:123456789012:function:" + id, nil
	case "AWS::S3::Bucket":
		return "arn:aws:s3:::" + strings.ToLower(id), nil
	case eventBus:
		return "arn:aws:events:us-east-1:123456789012:event-bus/" + id, nil
	}
	return nil, fmt.Errorf("Fn::GetAtt %s.Arn of a %s cannot be resolved", id, r.Type)
}

var subVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

func (e cfnEvaluator) sub(arg any) (any, error) {
	text, vars := "", map[string]any{}
	switch a := arg.(type) {
	case string:
		text = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub %v is not [string, variables]", arg)
		}
		text, vars = stringOf(a[0]), mapOf(a[1])
	}
	var err error
	out := subVariable.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		var v any
		var e2 error
		if x, ok := vars[name]; ok {
			v, e2 = e.eval(x)
		} else if id, attr, ok := strings.Cut(name, "."); ok {
			v, e2 = e.getAtt(id, attr)
		} else {
			v, e2 = e.ref(name)
		}
		s, ok := v.(string)
		if e2 == nil && !ok {
			e2 = fmt.Errorf("${%s} is not a string", name)
		}
		if e2 != nil && err == nil {
			err = e2
		}
		return s
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// asList is v as a list: itself when it is one, else a list of v.
func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// Every function of the template has a build target in the Makefile
// (SAM's BuildMethod: makefile calls it), and the directory it builds
// holds a main package.
func TestMakefileBuildsEveryFunction(t *testing.T) {
	tpl := loadRepoTemplate(t)
	dirs, err := FunctionDirs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(dirs)), tpl.Functions(); !slices.Equal(got, want) {
		t.Errorf("got build targets for %v, want the template's functions %v", got, want)
	}
	for fn, dir := range dirs {
		if _, err := os.Stat(filepath.Join("..", "..", "functions", dir, "main.go")); err != nil {
			t.Errorf("%s: %v", fn, err)
		}
	}
}

// The bench reads how often the schedules run from the template: every
// schedule of it is a rate() ScheduleRate reads, the reconciliation's
// through its parameter.
func TestScheduleRateReadsTheTemplatesSchedules(t *testing.T) {
	tpl := loadRepoTemplate(t)
	for _, c := range []struct {
		resource, event string
		want            time.Duration
	}{
		{"ExpiryFunction", "Expiry", time.Minute},
		{"ExpiryFunction", "Retention", time.Hour},
		{"ReconcileStateMachine", "Daily", 24 * time.Hour},
	} {
		got, err := tpl.ScheduleRate(c.resource, c.event)
		if err != nil || got != c.want {
			t.Errorf("ScheduleRate(%s, %s): got %v, %v, want %v", c.resource, c.event, got, err, c.want)
		}
	}
	if _, err := tpl.ScheduleRate("ExpiryFunction", "Nothing"); err == nil {
		t.Error("ScheduleRate of an event the template does not declare: got no error")
	}
}
