package stack

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Template is a parsed SAM/CloudFormation template. Values keep the JSON shape
// CloudFormation works with: maps, slices, strings, numbers, booleans, and
// intrinsic functions as one-key maps ({"Ref": "X"}, {"Fn::GetAtt": ["A", "B"]},
// {"Fn::If": [...]}), whether the file used short tags (!Ref, !Sub...) or not.
type Template struct {
	Parameters map[string]Parameter
	// Conditions is the template's Conditions section, each an intrinsic.
	Conditions map[string]any
	// Globals is the template's Globals section (e.g. Globals["Function"]).
	Globals   map[string]any
	Resources map[string]Resource
}

// Parameter is one entry of the template's Parameters section.
type Parameter struct {
	Type string
	// Default is the default value as CloudFormation passes it: a string.
	Default    string
	HasDefault bool
}

// Resource is one entry of the template's Resources section.
type Resource struct {
	Type       string
	Condition  string
	Properties map[string]any
}

const (
	serverlessFunction = "AWS::Serverless::Function"
	lambdaFunction     = "AWS::Lambda::Function"
	dynamoDBTable      = "AWS::DynamoDB::Table"
	eventBus           = "AWS::Events::EventBus"
)

// LoadTemplate reads and parses the template at path (YAML or JSON).
func LoadTemplate(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load template: %w", err)
	}
	t, err := ParseTemplate(data)
	if err != nil {
		return nil, fmt.Errorf("load template %s: %w", path, err)
	}
	return t, nil
}

// ParseTemplate parses a template held in memory (YAML or JSON).
func ParseTemplate(data []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("empty template")
	}
	v, err := value(doc.Content[0])
	if err != nil {
		return nil, err
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("template is not a mapping")
	}

	t := &Template{
		Parameters: map[string]Parameter{},
		Conditions: mapOf(root["Conditions"]),
		Globals:    mapOf(root["Globals"]),
		Resources:  map[string]Resource{},
	}
	for id, raw := range mapOf(root["Parameters"]) {
		p := mapOf(raw)
		param := Parameter{Type: stringOf(p["Type"])}
		if d, ok := p["Default"]; ok {
			s, err := scalarString(d)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: Default: %w", id, err)
			}
			param.Default, param.HasDefault = s, true
		}
		t.Parameters[id] = param
	}
	for id, raw := range mapOf(root["Resources"]) {
		r := mapOf(raw)
		typ := stringOf(r["Type"])
		if typ == "" {
			return nil, fmt.Errorf("resource %s has no Type", id)
		}
		t.Resources[id] = Resource{
			Type:       typ,
			Condition:  stringOf(r["Condition"]),
			Properties: mapOf(r["Properties"]),
		}
	}
	return t, nil
}

// value converts a YAML node to the JSON shape, expanding CloudFormation's
// short-form tags.
func value(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return value(n.Alias)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return value(n.Content[0])
	}

	if tag := n.Tag; strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		return intrinsic(n)
	}

	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping key is not a string", k.Line)
			}
			val, err := value(v)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := value(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		return s, nil
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
}

// intrinsic expands a short-form tag: !Ref X is {"Ref": "X"}, !GetAtt A.B is
// {"Fn::GetAtt": ["A", "B"]}, !Condition C is {"Condition": "C"} and any other
// !Name v is {"Fn::Name": v}.
func intrinsic(n *yaml.Node) (any, error) {
	name := strings.TrimPrefix(n.Tag, "!")
	plain := *n
	plain.Tag = ""
	if n.Kind == yaml.ScalarNode {
		plain.Tag = "!!str" // the argument of a short tag is a string, even 2 or true
	}
	arg, err := value(&plain)
	if err != nil {
		return nil, err
	}
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: arg}, nil
	case "GetAtt":
		if s, ok := arg.(string); ok {
			resource, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q is not Resource.Attribute", n.Line, s)
			}
			arg = []any{resource, attr}
		}
	}
	return map[string]any{"Fn::" + name: arg}, nil
}

// Functions lists the logical ids of the template's Lambda functions, sorted.
func (t *Template) Functions() []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == serverlessFunction || r.Type == lambdaFunction {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Tables lists the logical ids of the template's DynamoDB tables, sorted.
func (t *Template) Tables() []string {
	return t.resourcesOf(dynamoDBTable)
}

// resourcesOf returns the logical ids of the resources of type kind, sorted.
func (t *Template) resourcesOf(kind string) []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == kind {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// FunctionEnv returns the environment variables the template gives function:
// Globals.Function's merged with the function's own (for SAM functions). A !Ref
// of a parameter becomes its Default, a !Ref of a DynamoDB table becomes
// name(logicalID), a !Ref of an S3 bucket LocalBucketName(logicalID), an
// !If follows its condition (Fn::Equals, Fn::Not, Fn::And, Fn::Or over
// parameters) and a variable that comes out as
// AWS::NoValue is not set at all, as CloudFormation does; any other
// intrinsic is an error naming the variable.
func (t *Template) FunctionEnv(function string, name func(logicalID string) string) (map[string]string, error) {
	props, err := t.functionProperties(function)
	if err != nil {
		return nil, err
	}
	vars := mapOf(mapOf(props["Environment"])["Variables"])

	env := make(map[string]string, len(vars))
	for _, k := range sortedKeys(vars) {
		r, err := t.resolve(vars[k], name)
		if err != nil {
			return nil, fmt.Errorf("function %s: environment variable %s: %w", function, k, err)
		}
		if r == noValue {
			continue
		}
		s, err := scalarString(r)
		if err != nil {
			return nil, fmt.Errorf("function %s: environment variable %s: %w", function, k, err)
		}
		env[k] = s
	}
	return env, nil
}

// FunctionConfig is what the local runner needs to know of a function.
type FunctionConfig struct {
	MemorySize int           // MB
	Timeout    time.Duration // per invocation
}

// FunctionConfig returns function's MemorySize and Timeout (Globals.Function
// applies to SAM functions), with Lambda's defaults of 128 MB and 3 s.
func (t *Template) FunctionConfig(function string) (FunctionConfig, error) {
	props, err := t.functionProperties(function)
	if err != nil {
		return FunctionConfig{}, err
	}
	cfg := FunctionConfig{MemorySize: 128, Timeout: 3 * time.Second}
	if v, ok := props["MemorySize"]; ok {
		n, err := t.resolveInt(v)
		if err != nil {
			return FunctionConfig{}, fmt.Errorf("function %s: MemorySize: %w", function, err)
		}
		cfg.MemorySize = n
	}
	if v, ok := props["Timeout"]; ok {
		n, err := t.resolveInt(v)
		if err != nil {
			return FunctionConfig{}, fmt.Errorf("function %s: Timeout: %w", function, err)
		}
		cfg.Timeout = time.Duration(n) * time.Second
	}
	return cfg, nil
}

// functionProperties returns the properties of function id with, for a SAM
// function, Globals.Function merged in as SAM does: maps merge key by key, and
// the function's own value wins otherwise.
func (t *Template) functionProperties(id string) (map[string]any, error) {
	r, ok := t.Resources[id]
	if !ok {
		return nil, fmt.Errorf("template has no resource %s (functions: %s)", id, strings.Join(t.Functions(), ", "))
	}
	switch r.Type {
	case serverlessFunction:
		return mapOf(mergeGlobals(t.Globals["Function"], r.Properties)), nil
	case lambdaFunction:
		return r.Properties, nil
	default:
		return nil, fmt.Errorf("resource %s is a %s, not a function", id, r.Type)
	}
}

func mergeGlobals(global, local any) any {
	g, gok := global.(map[string]any)
	l, lok := local.(map[string]any)
	if !gok || !lok || isIntrinsic(g) || isIntrinsic(l) {
		if local == nil {
			return global
		}
		return local
	}
	out := make(map[string]any, len(g)+len(l))
	for k, v := range g {
		out[k] = v
	}
	for k, v := range l {
		out[k] = mergeGlobals(g[k], v)
	}
	return out
}

// noValue is what a Ref of AWS::NoValue resolves to: the property it is the
// value of is left out.
var noValue = &struct{ name string }{"AWS::NoValue"}

// resolve replaces the intrinsics a local run can answer: a !Ref of a parameter
// (its Default), of a DynamoDB table (name(logicalID), when name is not nil)
// or an event bus, an event bus's Name, and of AWS::NoValue (noValue, whose key is then dropped), and an !If on one
// of the template's conditions. Anything else is an error.
func (t *Template) resolve(v any, name func(string) string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if isIntrinsic(v) {
			if ref, ok := v["Ref"]; ok {
				return t.resolveRef(ref, name)
			}
			if arg, ok := v["Fn::If"]; ok {
				return t.resolveIf(arg, name)
			}
			if arg, ok := v["Fn::Split"]; ok {
				return t.resolveSplit(arg, name)
			}
			if arg, ok := v["Fn::GetAtt"]; ok {
				return t.resolveGetAtt(arg, name)
			}
			return nil, fmt.Errorf("%s cannot be resolved locally", sortedKeys(v)[0])
		}
		out := make(map[string]any, len(v))
		for _, k := range sortedKeys(v) {
			r, err := t.resolve(v[k], name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if r != noValue {
				out[k] = r
			}
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(v))
		for i, e := range v {
			r, err := t.resolve(e, name)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if r != noValue {
				out = append(out, r)
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

func (t *Template) resolveRef(ref any, name func(string) string) (any, error) {
	id, ok := ref.(string)
	if !ok {
		return nil, fmt.Errorf("a Ref of a %T cannot be resolved", ref)
	}
	if id == "AWS::NoValue" {
		return noValue, nil
	}
	if p, ok := t.Parameters[id]; ok {
		if !p.HasDefault {
			return nil, fmt.Errorf("parameter %s has no Default", id)
		}
		return p.Default, nil
	}
	if r, ok := t.Resources[id]; ok && r.Type == dynamoDBTable && name != nil {
		return name(id), nil
	}
	if r, ok := t.Resources[id]; ok && r.Type == s3Bucket && name != nil {
		return LocalBucketName(id), nil
	}
	if r, ok := t.Resources[id]; ok && r.Type == eventBus && name != nil {
		return name(id), nil
	}
	return nil, fmt.Errorf("a Ref of %s cannot be resolved locally (only parameters, DynamoDB tables, S3 buckets and event buses can)", id)
}

// resolveGetAtt resolves [resource, attribute] for the one attribute a
// local run names: an event bus's Name (name(logicalID)).
func (t *Template) resolveGetAtt(arg any, name func(string) string) (any, error) {
	a, ok := arg.([]any)
	if !ok || len(a) != 2 {
		return nil, fmt.Errorf("Fn::GetAtt %v is not [resource, attribute]", arg)
	}
	id, _ := a[0].(string)
	if r, ok := t.Resources[id]; ok && r.Type == eventBus && a[1] == "Name" && name != nil {
		return name(id), nil
	}
	return nil, fmt.Errorf("Fn::GetAtt %v cannot be resolved locally (only an event bus's Name can)", arg)
}

// resolveIf resolves [condition, then, else].
func (t *Template) resolveIf(arg any, name func(string) string) (any, error) {
	a, ok := arg.([]any)
	if !ok || len(a) != 3 {
		return nil, fmt.Errorf("Fn::If %v is not [condition, then, else]", arg)
	}
	cond, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("Fn::If names its condition with a %T, not a string", a[0])
	}
	holds, err := t.Condition(cond)
	if err != nil {
		return nil, err
	}
	if holds {
		return t.resolve(a[1], name)
	}
	return t.resolve(a[2], name)
}

// resolveSplit resolves [delimiter, source] into the list of source's parts.
func (t *Template) resolveSplit(arg any, name func(string) string) (any, error) {
	a, ok := arg.([]any)
	if !ok || len(a) != 2 {
		return nil, fmt.Errorf("Fn::Split %v is not [delimiter, source]", arg)
	}
	sep, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("Fn::Split's delimiter is a %T, not a string", a[0])
	}
	source, err := t.resolveString(a[1], name)
	if err != nil {
		return nil, fmt.Errorf("Fn::Split: %w", err)
	}
	var parts []any
	for _, p := range strings.Split(source, sep) {
		parts = append(parts, p)
	}
	return parts, nil
}

// Condition evaluates the template's condition named id, with the parameters'
// Defaults.
func (t *Template) Condition(id string) (bool, error) {
	c, ok := t.Conditions[id]
	if !ok {
		return false, fmt.Errorf("no condition %s", id)
	}
	holds, err := t.evalCondition(c, 0)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", id, err)
	}
	return holds, nil
}

// evalCondition evaluates Fn::Equals, Fn::Not, Fn::And, Fn::Or and
// {"Condition": name}; depth stops a condition that names itself.
func (t *Template) evalCondition(v any, depth int) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok || !isIntrinsic(m) {
		return false, fmt.Errorf("%v is not a condition function", v)
	}
	if depth > 32 {
		return false, errors.New("conditions nested too deep (a cycle?)")
	}
	fn := sortedKeys(m)[0]
	if fn == "Condition" {
		name, _ := m[fn].(string)
		c, ok := t.Conditions[name]
		if !ok {
			return false, fmt.Errorf("no condition %v", m[fn])
		}
		return t.evalCondition(c, depth+1)
	}
	args, ok := m[fn].([]any)
	if !ok {
		return false, fmt.Errorf("%s takes a list, got %T", fn, m[fn])
	}
	switch fn {
	case "Fn::Equals":
		if len(args) != 2 {
			return false, fmt.Errorf("Fn::Equals takes two values, got %d", len(args))
		}
		a, err := t.resolveString(args[0], nil)
		if err != nil {
			return false, err
		}
		b, err := t.resolveString(args[1], nil)
		if err != nil {
			return false, err
		}
		return a == b, nil
	case "Fn::Not":
		if len(args) != 1 {
			return false, fmt.Errorf("Fn::Not takes one condition, got %d", len(args))
		}
		holds, err := t.evalCondition(args[0], depth+1)
		return !holds, err
	case "Fn::And", "Fn::Or":
		for _, c := range args {
			holds, err := t.evalCondition(c, depth+1)
			if err != nil {
				return false, err
			}
			if holds == (fn == "Fn::Or") {
				return holds, nil
			}
		}
		return fn == "Fn::And", nil
	}
	return false, fmt.Errorf("%s is not a condition function", fn)
}

// WithParameters returns a copy of t whose parameters take the values of
// overrides (name → value, as sam's --parameter-overrides gives them) in
// place of their Defaults. A name the template does not declare is an error
// listing those it does.
func (t *Template) WithParameters(overrides map[string]string) (*Template, error) {
	c := *t
	c.Parameters = maps.Clone(t.Parameters)
	for k, v := range overrides {
		p, ok := c.Parameters[k]
		if !ok {
			return nil, fmt.Errorf("parameter override %s: the template has no such parameter (it has %s)", k, strings.Join(sortedKeys(t.Parameters), ", "))
		}
		p.Default, p.HasDefault = v, true
		c.Parameters[k] = p
	}
	return &c, nil
}

// ParseParameterOverrides reads overrides in sam's --parameter-overrides
// form: "Name=Value" pairs separated by spaces, a value optionally in
// quotes ('LogUrlTtl=2h AdminGroups="ops, admins"'), or the form
// ParameterKey=Name,ParameterValue=Value.
func ParseParameterOverrides(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, word := range splitWords(s) {
		if rest, ok := strings.CutPrefix(word, "ParameterKey="); ok {
			k, v, found := strings.Cut(rest, ",ParameterValue=")
			if !found {
				return nil, fmt.Errorf("parameter override %q: want ParameterKey=Name,ParameterValue=Value", word)
			}
			out[k] = v
			continue
		}
		k, v, found := strings.Cut(word, "=")
		if !found || k == "" {
			return nil, fmt.Errorf("parameter override %q: want Name=Value", word)
		}
		out[k] = v
	}
	return out, nil
}

// splitWords splits s on spaces outside double or single quotes, and drops
// the quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func (t *Template) resolveString(v any, name func(string) string) (string, error) {
	r, err := t.resolve(v, name)
	if err != nil {
		return "", err
	}
	return scalarString(r)
}

func (t *Template) resolveInt(v any) (int, error) {
	s, err := t.resolveString(v, nil)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// scalarString renders a scalar the way CloudFormation passes it on: as a string.
func scalarString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("%T is not a scalar", v)
	}
}

// isIntrinsic reports whether m is an intrinsic function such as {"Ref": "X"}.
func isIntrinsic(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// EventSetting returns the property of resource's event (a function's or
// a state machine's Events entry), intrinsics resolved, as CloudFormation
// passes it on: a string ("100", "rate(1 minute)").
func (t *Template) EventSetting(resource, event, property string) (string, error) {
	r, ok := t.Resources[resource]
	if !ok {
		return "", fmt.Errorf("template has no resource %s", resource)
	}
	ev := mapOf(mapOf(r.Properties["Events"])[event])
	v, ok := mapOf(ev["Properties"])[property]
	if !ok {
		return "", fmt.Errorf("%s has no event %s with a %s", resource, event, property)
	}
	s, err := t.resolveString(v, LocalName)
	if err != nil {
		return "", fmt.Errorf("%s: event %s: %s: %w", resource, event, property, err)
	}
	return s, nil
}

// ScheduleRate returns the period of resource's schedule event, whose
// ScheduleExpression is rate(<n> <unit>): how often it runs.
func (t *Template) ScheduleRate(resource, event string) (time.Duration, error) {
	expr, err := t.EventSetting(resource, event, "ScheduleExpression")
	if err != nil {
		return 0, err
	}
	inner, ok := strings.CutPrefix(expr, "rate(")
	inner, closed := strings.CutSuffix(inner, ")")
	n, unit, spaced := strings.Cut(inner, " ")
	count, nerr := strconv.Atoi(n)
	units := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}
	if !ok || !closed || !spaced || nerr != nil || count < 1 || units[unit] == 0 {
		return 0, fmt.Errorf("%s: event %s: ScheduleExpression %q is not rate(<n> minutes|hours|days)", resource, event, expr)
	}
	return time.Duration(count) * units[unit], nil
}
