package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// steps tells p of an execution in two parts, the first failing once.
func steps(p *progress) {
	p.start("plan")
	p.done("plan", json.RawMessage(`{"machines":400,"invalid":1,"changed":399,"report":"r","parts":2}`))
	p.start("applyPart")
	p.failed()
	p.done("applyPart", json.RawMessage(`{"machines":200,"changed":200}`))
	p.done("applyPart", json.RawMessage(`{"machines":199,"changed":199}`))
	p.start("finish")
	p.done("finish", json.RawMessage(`{"absent":0,"changed":0}`))
	p.close()
}

func TestEachStepIsOneLine(t *testing.T) {
	want := []string{
		"report: plan: 400 machines read, 1 invalid, 0 absent, 399 to change, in 2 parts",
		"report: parts: 2 of 2 applied, 399 machines (1 invocations retried)",
		"report: finish: 0 absent",
	}
	t.Run("written once each when not on a terminal", func(t *testing.T) {
		var out bytes.Buffer
		steps(newProgress(&out, false))
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != len(want) {
			t.Fatalf("got %q, want %d lines", lines, len(want))
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, want[i]+" (") {
				t.Errorf("got line %q, want %q and its time", l, want[i])
			}
		}
	})
	t.Run("rewritten in place on a terminal", func(t *testing.T) {
		var out bytes.Buffer
		steps(newProgress(&out, true))
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != len(want) {
			t.Fatalf("got %q, want %d lines", lines, len(want))
		}
		for i, l := range lines {
			shown := strings.Split(l, "\r\033[K")
			if last := shown[len(shown)-1]; !strings.HasPrefix(last, want[i]+" (") || len(shown) < 3 {
				t.Errorf("got line %q, want it rewritten and ending as %q", l, want[i])
			}
		}
	})
}
