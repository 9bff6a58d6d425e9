package stack

import (
	"reflect"
	"strings"
	"testing"
)

const conditionalTemplate = `
Parameters:
  Endpoint: {Type: String, Default: ""}
  Mode: {Type: String, Default: a}
Conditions:
  HasEndpoint: !Not [!Equals [!Ref Endpoint, ""]]
  IsA: !Equals [!Ref Mode, a]
  AWithEndpoint: !And [!Condition IsA, !Condition HasEndpoint]
  AOrEndpoint: !Or [!Condition IsA, !Condition HasEndpoint]
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          ENDPOINT: !If [HasEndpoint, !Ref Endpoint, !Ref AWS::NoValue]
          MODE: !If [IsA, mode-a, !Ref Mode]
          BOTH: !If [AWithEndpoint, "yes", "no"]
          EITHER: !If [AOrEndpoint, "yes", "no"]
`

func TestFunctionEnvFollowsConditionsAndDropsNoValue(t *testing.T) {
	tpl := parse(t, conditionalTemplate)
	tests := []struct {
		name      string
		overrides map[string]string
		want      map[string]string
	}{
		{"the defaults leave the endpoint out", nil,
			map[string]string{"MODE": "mode-a", "BOTH": "no", "EITHER": "yes"}},
		{"an endpoint is passed when given", map[string]string{"Endpoint": "http://127.0.0.1:4566"},
			map[string]string{"ENDPOINT": "http://127.0.0.1:4566", "MODE": "mode-a", "BOTH": "yes", "EITHER": "yes"}},
		{"the else branch", map[string]string{"Mode": "b"},
			map[string]string{"MODE": "b", "BOTH": "no", "EITHER": "no"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := tpl.WithParameters(tt.overrides)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.FunctionEnv("Fn", LocalName)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := tpl.WithParameters(map[string]string{"Endpont": "x"}); err == nil || !strings.Contains(err.Error(), "Endpoint, Mode") {
		t.Errorf("an unknown parameter: got %v, want an error listing Endpoint, Mode", err)
	}
	if tpl.Parameters["Endpoint"].Default != "" {
		t.Error("WithParameters changed the template it was called on")
	}
}

func TestFunctionEnvNamesAConditionItCannotEvaluate(t *testing.T) {
	tpl := parse(t, `
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          X: !If [Missing, a, b]
`)
	if _, err := tpl.FunctionEnv("Fn", LocalName); err == nil || !strings.Contains(err.Error(), "X") || !strings.Contains(err.Error(), "Missing") {
		t.Errorf("got %v, want an error naming X and the condition Missing", err)
	}
}

func TestParseParameterOverridesReadsSamsForms(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"LogUrlTtl=2h MaxDecommissioningSlaves=0", map[string]string{"LogUrlTtl": "2h", "MaxDecommissioningSlaves": "0"}},
		{`AdminGroups="Helpdesk Admins,ops" ReadGroups=''`, map[string]string{"AdminGroups": "Helpdesk Admins,ops", "ReadGroups": ""}},
		{"ParameterKey=LogUrlTtl,ParameterValue=2h", map[string]string{"LogUrlTtl": "2h"}},
		{"AwsEndpointUrl=http://127.0.0.1:4566", map[string]string{"AwsEndpointUrl": "http://127.0.0.1:4566"}},
	}
	for _, tt := range tests {
		got, err := ParseParameterOverrides(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"LogUrlTtl", "=2h", "ParameterKey=LogUrlTtl"} {
		if _, err := ParseParameterOverrides(bad); err == nil {
			t.Errorf("%q: got no error, want one", bad)
		}
	}
}
