package stack

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// EventBridge Scheduler names a schedule uniquely per account and region:
// the schedules carry the stack's name so that two stacks do not collide,
// and the longest name must fit Scheduler's 64 characters for a stack name
// of maxStackName characters.
func TestRepoTemplateSchedulesAreNamedAfterTheStack(t *testing.T) {
	const maxStackName, maxScheduleName = 54, 64
	tpl := loadRepoTemplate(t)
	n := 0
	for _, fn := range tpl.Functions() {
		props, err := tpl.functionProperties(fn)
		if err != nil {
			t.Fatal(err)
		}
		for id, raw := range mapOf(props["Events"]) {
			ev := mapOf(raw)
			if stringOf(ev["Type"]) != "ScheduleV2" && stringOf(ev["Type"]) != "Schedule" {
				continue
			}
			n++
			sub, _ := mapOf(mapOf(ev["Properties"])["Name"])["Fn::Sub"].(string)
			suffix, ok := strings.CutPrefix(sub, "${AWS::StackName}")
			if !ok || suffix == "" || strings.Contains(suffix, "$") {
				t.Errorf("%s.%s: Name %v, want !Sub ${AWS::StackName}-<suffix>", fn, id, mapOf(ev["Properties"])["Name"])
				continue
			}
			if l := maxStackName + len(suffix); l > maxScheduleName {
				t.Errorf("%s.%s: a %d-character stack name makes a %d-character schedule name, over %d", fn, id, maxStackName, l, maxScheduleName)
			}
		}
	}
	if n == 0 {
		t.Fatal("got no schedules in the template, want ExpiryFunction's")
	}
	root, _ := RepoRoot()
	samconfig, err := os.ReadFile(filepath.Join(root, "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^stack_name = "([^"]*)"`).FindSubmatch(samconfig)
	if m == nil || len(m[1]) > maxStackName {
		t.Errorf("samconfig.toml: got stack_name %q, want one of at most %d characters", m, maxStackName)
	}
}

// MAX_DECOMMISSIONING_SLAVES=0 means no limit: the parameter must accept it.
func TestRepoTemplateAllowsNoDecommissionLimit(t *testing.T) {
	root, _ := RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Parameters map[string]map[string]any `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Parameters["MaxDecommissioningSlaves"]
	if p["MinValue"] != 0 {
		t.Errorf("MaxDecommissioningSlaves: got MinValue %v, want 0 (no limit)", p["MinValue"])
	}
	if desc, _ := p["Description"].(string); !strings.Contains(desc, "0 means no limit") {
		t.Errorf("MaxDecommissioningSlaves: got Description %q, want it to say 0 means no limit", desc)
	}
	tpl, err := loadRepoTemplate(t).WithParameters(map[string]string{"MaxDecommissioningSlaves": "0"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := tpl.FunctionEnv("ExpiryFunction", LocalName)
	if err != nil {
		t.Fatal(err)
	}
	if got := env["MAX_DECOMMISSIONING_SLAVES"]; got != "0" {
		t.Errorf("got MAX_DECOMMISSIONING_SLAVES=%q, want 0", got)
	}
}
