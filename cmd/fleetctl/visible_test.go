package main

import (
	"strings"
	"testing"
)

func TestTablesRenderEveryCellVisible(t *testing.T) {
	var b strings.Builder
	writeTable(&b, visibleRows([][]string{{"ID", "MESSAGE"}, {"n\x1b1", "a\nb"}}), nil)
	if want := "ID      MESSAGE\nn\\x1b1  a\\nb\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
