package main

import (
	"strings"
	"testing"
)

func TestALineShowsTheChangeOnceAndKeepsControlsOutOfTheTerminal(t *testing.T) {
	body := `{"time":"2026-11-26T21:40:02Z","detail":{"slaveId":"S1\u001b[2J","type":"stateChanged","sequence":9,` +
		`"previousState":"ACTIVE","update":{"state":"FROZEN","user":"alice\u202e","message":"a\nb"}}}`
	seen := map[string]bool{}
	line, err := render(body, false, seen)
	if err != nil {
		t.Fatal(err)
	}
	want := `2026-11-26T21:40:02Z  S1\x1b[2J  stateChanged  seq 9  ACTIVE -> FROZEN  by alice\u202e  "a\nb"`
	if line != want {
		t.Errorf("got  %s\nwant %s", line, want)
	}
	again, _ := render(body, false, seen)
	if !strings.HasSuffix(again, "(duplicate)") {
		t.Errorf("got %s, want the same slave and sequence marked as a duplicate", again)
	}
	raw, _ := render(body, true, map[string]bool{})
	if strings.ContainsAny(raw, "\x1b\u202e\n") {
		t.Errorf("got %q, want no control character in a JSON line", raw)
	}
	if _, err := render(`{"detail":"not a change"}`, false, seen); err == nil {
		t.Error("got no error for a detail that is not a change")
	}
}
