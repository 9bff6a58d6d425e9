package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestLiteralSearchAgreesWithLineByLine checks the chunked search of fixed
// strings against the line-by-line one (forced by a regular expression
// that matches the same lines), across chunk borders and over a last line
// without a newline.
func TestLiteralSearchAgreesWithLineByLine(t *testing.T) {
	var text strings.Builder
	for i := range 60000 {
		fmt.Fprintf(&text, "line %d status=%d %s\n", i, []int{200, 503, 404}[i%3], strings.Repeat("x", i%50))
	}
	text.WriteString("Status=503 last line without a newline")
	for _, tc := range []struct {
		name string
		o    grepOptions
	}{{"plain", grepOptions{}}, {"-i", grepOptions{ignoreCase: true}}, {"-c", grepOptions{count: true}}, {"-l", grepOptions{filesOnly: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			lit, err := newMatcher("status=503", tc.o)
			if err != nil || lit.literal == nil {
				t.Fatalf("got %+v, %v, want a literal matcher", lit, err)
			}
			var got bytes.Buffer
			n, err := grepLiteral(strings.NewReader(text.String()), lit, tc.o, "k", &got)
			if err != nil {
				t.Fatal(err)
			}
			re, _ := newMatcher("status=50[3]", tc.o)
			want, wantN := lineByLine(t, text.String(), re, tc.o)
			if n != wantN || got.String() != want {
				t.Errorf("got %d selected, want %d; outputs differ: %t (got %.200q, want %.200q)", n, wantN, got.String() != want, got.String(), want)
			}
		})
	}
}

func lineByLine(t *testing.T, text string, m *matcher, o grepOptions) (string, int) {
	t.Helper()
	var out bytes.Buffer
	n := 0
	for i, line := range strings.Split(text, "\n") {
		if m.match([]byte(line), new([]byte)) == o.invert {
			continue
		}
		n++
		if o.filesOnly {
			return "k\n", n
		}
		if !o.count {
			fmt.Fprintf(&out, "k:%d:%s\n", i+1, line)
		}
	}
	if o.count {
		fmt.Fprintf(&out, "k:%d\n", n)
	}
	return out.String(), n
}
