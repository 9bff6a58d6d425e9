package stack

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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
		{"!Ref Bucket", "Bucket"},
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
	if got, want := tpl.Functions(), []string{"ExpiryFunction", "InventoryFunction", "LogsFunction", "SlavesFunction"}; !slices.Equal(got, want) {
		t.Errorf("Functions: got %v, want %v", got, want)
	}
	if got, want := tpl.Tables(), []string{"ExpiringTable", "HistoryTable", "RequestsTable", "SlavesTable"}; !slices.Equal(got, want) {
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

func TestRepoTemplateGivesEveryFunctionTheSpecEnvironment(t *testing.T) {
	tpl := loadRepoTemplate(t)
	want := map[string]string{
		"SLAVES_TABLE":               "SlavesTable",
		"HISTORY_TABLE":              "HistoryTable",
		"EXPIRING_TABLE":             "ExpiringTable",
		"REQUESTS_TABLE":             "RequestsTable",
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
		"S3_FORCE_PATH_STYLE": "false",
	})
	for _, fn := range tpl.Functions() {
		got, err := tpl.FunctionEnv(fn, LocalName)
		if err != nil {
			t.Fatal(err)
		}
		want := want
		if fn == "LogsFunction" {
			want = logs
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", fn, got, want)
		}
		cfg, err := tpl.FunctionConfig(fn)
		if err != nil {
			t.Fatal(err)
		}
		if fn == "SlavesFunction" && cfg.Timeout >= 29*time.Second {
			t.Errorf("%s: Timeout %v, want under API Gateway's 29 s", fn, cfg.Timeout)
		}
	}
}

func TestRepoTemplatePoliciesGrantNoWildcard(t *testing.T) {
	tpl := loadRepoTemplate(t)
	for _, fn := range tpl.Functions() {
		policies, _ := tpl.Resources[fn].Properties["Policies"].([]any)
		if len(policies) == 0 {
			t.Errorf("%s has no Policies", fn)
		}
		for _, p := range policies {
			stmts, _ := mapOf(p)["Statement"].([]any)
			if len(stmts) == 0 {
				t.Errorf("%s: policy %v has no explicit Statement", fn, p)
			}
			for _, s := range stmts {
				for _, key := range []string{"Action", "Resource"} {
					for _, v := range listOf(mapOf(s)[key]) {
						if str, ok := v.(string); ok && strings.Contains(str, "*") {
							t.Errorf("%s: %s %q is a wildcard", fn, key, str)
						}
					}
				}
			}
		}
	}
}

func TestMakefileBuildsEveryFunction(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range loadRepoTemplate(t).Functions() {
		if !strings.Contains(string(makefile), "\nbuild-"+fn+":") {
			t.Errorf("Makefile has no build-%s target (SAM's BuildMethod: makefile calls it)", fn)
		}
	}
}

func listOf(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}
