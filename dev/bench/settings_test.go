package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/stack"
)

// settingWords are what a template setting and a bench constant are named
// after when one could stand for the other: a timeout, a memory size, a
// retention (a TTL, a lookback, an expiry, an age), a schedule, a batch.
var settingWords = []string{"timeout", "memory", "memlimit", "retention", "ttl", "lookback", "expir", "age", "rate", "every", "schedule", "period", "batch", "window", "part"}

// setting is one value template.yaml sets, and where.
type setting struct {
	where string
	words []string
	value float64 // nanoseconds for a duration
	isDur bool
}

// The bench reads its settings (timeouts, memory sizes, retention,
// schedules, batching) from template.yaml (stack.Template: FunctionConfig,
// FunctionEnv, ScheduleRate, EventSetting), never copies them: a copy is a
// second source of truth that a change of the template leaves behind,
// measuring a service that is not the one deployed. So no constant,
// variable or field of dev/bench named after a kind of setting holds the
// value the template gives a setting of that kind, and no environment
// variable of a function is set to the template's own value. Figures of
// the code before a change (before*) are history, not settings.
func TestBenchCopiesNoTemplateSetting(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.LoadTemplate(filepath.Join(root, stack.TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	settings, envValues := templateSettings(t, tpl)
	if len(settings) < 20 {
		t.Fatalf("read %d settings of template.yaml, want its timeouts, memory sizes, retentions, schedules and batching", len(settings))
	}

	dir := filepath.Join(root, "dev", "bench")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	fset := token.NewFileSet()
	reported := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		named := func(name string, value ast.Expr) {
			if strings.HasPrefix(strings.ToLower(name), "before") {
				return
			}
			v, isDur, ok := literalValue(value)
			if !ok {
				return
			}
			for _, s := range settings {
				if s.isDur == isDur && s.value == v && shareWord(words(name), s.words) {
					at := fset.Position(value.Pos()).String()
					if reported[at] {
						continue
					}
					reported[at] = true
					t.Errorf("%s: %s is %s, %s in template.yaml: read it from the template (stack.Template)", fset.Position(value.Pos()), name, show(v, isDur), s.where)
				}
			}
		}
		env := func(key, value ast.Expr) {
			k, kok := stringLit(key)
			v, vok := stringLit(value)
			if kok && vok && envValues[k][v] != "" {
				t.Errorf("%s: %s set to %q, %s in template.yaml: take the function's environment from the template (functionEnv), and set only what the bench measures at another value", fset.Position(value.Pos()), k, v, envValues[k][v])
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						named(name.Name, n.Values[i])
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if i >= len(n.Rhs) || len(n.Lhs) != len(n.Rhs) {
						break
					}
					switch l := lhs.(type) {
					case *ast.Ident:
						named(l.Name, n.Rhs[i])
					case *ast.SelectorExpr:
						named(l.Sel.Name, n.Rhs[i])
					case *ast.IndexExpr:
						env(l.Index, n.Rhs[i])
					}
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok {
					named(id.Name, n.Value)
				} else {
					env(n.Key, n.Value)
				}
			}
			return true
		})
	}
	if checked < 15 {
		t.Fatalf("checked %d Go files of dev/bench, want all of them", checked)
	}
}

// templateSettings is every setting of tpl the bench could copy, and the
// environment variables of its functions by name and value (where each is
// set).
func templateSettings(t *testing.T, tpl *stack.Template) ([]setting, map[string]map[string]string) {
	t.Helper()
	var out []setting
	add := func(where, name string, value float64, isDur bool) {
		out = append(out, setting{where: where, words: words(name), value: value, isDur: isDur})
	}
	addText := func(where, name, text string) {
		if d, err := parseDuration(text); err == nil && d > 0 {
			add(where, name, float64(d), true)
		} else if n, err := strconv.ParseFloat(strings.TrimSuffix(text, "MiB"), 64); err == nil {
			add(where, name, n, false)
		}
	}
	envValues := map[string]map[string]string{}
	for _, fn := range tpl.Functions() {
		cfg, err := tpl.FunctionConfig(fn)
		if err != nil {
			t.Fatal(err)
		}
		add(fn+"'s Timeout", "Timeout", float64(cfg.Timeout), true)
		add(fn+"'s Timeout", "Timeout", cfg.Timeout.Seconds(), false)
		add(fn+"'s MemorySize", "MemorySize", float64(cfg.MemorySize), false)
		vars, err := tpl.FunctionEnv(fn, stack.LocalName)
		if err != nil {
			t.Fatal(err)
		}
		for name, value := range vars {
			addText(fn+"'s "+name, name, value)
			if envValues[name] == nil {
				envValues[name] = map[string]string{}
			}
			envValues[name][value] = fn + "'s " + name
		}
	}
	for name, p := range tpl.Parameters {
		addText("the parameter "+name, name, p.Default)
	}
	for id, r := range tpl.Resources {
		evs, _ := r.Properties["Events"].(map[string]any)
		for ev, raw := range evs {
			props, _ := raw.(map[string]any)["Properties"].(map[string]any)
			if _, ok := props["ScheduleExpression"]; ok {
				every, err := tpl.ScheduleRate(id, ev)
				if err != nil {
					t.Fatal(err)
				}
				add(fmt.Sprintf("%s's schedule %s", id, ev), "schedule every", float64(every), true)
			}
			for _, p := range []string{"BatchSize", "MaximumBatchingWindowInSeconds"} {
				if v, err := tpl.EventSetting(id, ev, p); err == nil {
					addText(fmt.Sprintf("%s's %s of %s", id, p, ev), p, v)
					if strings.HasSuffix(p, "Seconds") {
						addText(fmt.Sprintf("%s's %s of %s", id, p, ev), p, v+"s")
					}
				}
			}
		}
		walkSettings(r.Properties, func(key string, v int) {
			where := fmt.Sprintf("%s's %s", id, key)
			switch {
			case strings.HasSuffix(key, "InSeconds") || strings.HasSuffix(key, "Period"):
				add(where, key, float64(time.Duration(v)*time.Second), true)
				add(where, key, float64(v), false)
			case strings.HasSuffix(key, "InDays"):
				// A count of days is copied as a duration; a small number
				// alone says nothing.
				add(where, key, float64(time.Duration(v)*24*time.Hour), true)
			default:
				add(where, key, float64(v), false)
			}
		})
	}
	return out, envValues
}

// walkSettings calls f with every integer of props under a key that names
// a kind of setting (ExpirationInDays, MessageRetentionPeriod, ...).
func walkSettings(props any, f func(key string, v int)) {
	switch p := props.(type) {
	case map[string]any:
		for k, v := range p {
			if n, ok := v.(int); ok && len(words(k)) > 0 {
				f(k, n)
			}
			walkSettings(v, f)
		}
	case []any:
		for _, v := range p {
			walkSettings(v, f)
		}
	}
}

// words are the settingWords name holds.
func words(name string) []string {
	lower := strings.ToLower(name)
	var out []string
	for _, w := range settingWords {
		if strings.Contains(lower, w) {
			out = append(out, w)
		}
	}
	return out
}

func shareWord(a, b []string) bool {
	for _, w := range a {
		for _, v := range b {
			if w == v {
				return true
			}
		}
	}
	return false
}

// literalValue evaluates an expression made of literals only (numbers,
// durations of package time, Go duration strings): a number, or a
// duration in nanoseconds. Anything read from elsewhere is not literal.
func literalValue(e ast.Expr) (float64, bool, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		switch e.Kind {
		case token.INT, token.FLOAT:
			v, err := strconv.ParseFloat(strings.ReplaceAll(e.Value, "_", ""), 64)
			return v, false, err == nil
		case token.STRING:
			s, err := strconv.Unquote(e.Value)
			if err != nil {
				return 0, false, false
			}
			if d, err := parseDuration(s); err == nil {
				return float64(d), true, true
			}
			v, err := strconv.ParseFloat(s, 64)
			return v, false, err == nil
		}
	case *ast.ParenExpr:
		return literalValue(e.X)
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok && pkg.Name == "time" {
			units := map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
				"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}
			if d, ok := units[e.Sel.Name]; ok {
				return float64(d), true, true
			}
		}
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && len(e.Args) == 1 && sel.Sel.Name == "Duration" {
			v, _, ok := literalValue(e.Args[0])
			return v, true, ok
		}
	case *ast.BinaryExpr:
		x, xd, xok := literalValue(e.X)
		y, yd, yok := literalValue(e.Y)
		if !xok || !yok {
			return 0, false, false
		}
		switch e.Op {
		case token.MUL:
			return x * y, xd || yd, true
		case token.QUO:
			return x / y, xd && !yd, true
		case token.ADD:
			return x + y, xd || yd, true
		case token.SUB:
			return x - y, xd || yd, true
		}
	}
	return 0, false, false
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// parseDuration is time.ParseDuration with a d suffix for days, as the
// service's settings accept.
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		return time.Duration(n) * 24 * time.Hour, err
	}
	return time.ParseDuration(s)
}

func show(v float64, isDur bool) string {
	if isDur {
		return time.Duration(v).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func TestLiteralValue(t *testing.T) {
	for _, c := range []struct {
		src   string
		want  float64
		isDur bool
	}{
		{"300", 300, false},
		{"5 * time.Minute", float64(5 * time.Minute), true},
		{"time.Duration(300) * time.Second", float64(300 * time.Second), true},
		{`"2160h"`, float64(2160 * time.Hour), true},
		{`"90d"`, float64(90 * 24 * time.Hour), true},
		{"90 * 24 * time.Hour", float64(90 * 24 * time.Hour), true},
		{"1 << 10", 0, false},
	} {
		e, err := parser.ParseExpr(c.src)
		if err != nil {
			t.Fatal(err)
		}
		got, isDur, ok := literalValue(e)
		if c.want == 0 {
			if ok {
				t.Errorf("literalValue(%s): got %v, want not literal", c.src, got)
			}
			continue
		}
		if !ok || got != c.want || isDur != c.isDur {
			t.Errorf("literalValue(%s): got %v (duration %v, %v), want %v (duration %v)", c.src, got, isDur, ok, c.want, c.isDur)
		}
	}
}
