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

// TestContextLinesAreWhatGrepPrints checks -A, -B and -C against the
// output of GNU grep -n -H over the same lines.
func TestContextLinesAreWhatGrepPrints(t *testing.T) {
	const text = "a\nb\nERR 1\nc\nd\ne\nf\nERR 2\nERR 3\ng\nh\ni\nj\nk\nERR 4\n"
	for _, tc := range []struct {
		name string
		o    grepOptions
		want string
	}{
		{"-A1", grepOptions{after: 1}, "k:3:ERR 1\nk-4-c\n--\nk:8:ERR 2\nk:9:ERR 3\nk-10-g\n--\nk:15:ERR 4\n"},
		{"-B2", grepOptions{before: 2}, "k-1-a\nk-2-b\nk:3:ERR 1\n--\nk-6-e\nk-7-f\nk:8:ERR 2\nk:9:ERR 3\n--\nk-13-j\nk-14-k\nk:15:ERR 4\n"},
		{"-C1", grepOptions{before: 1, after: 1}, "k-2-b\nk:3:ERR 1\nk-4-c\n--\nk-7-f\nk:8:ERR 2\nk:9:ERR 3\nk-10-g\n--\nk-14-k\nk:15:ERR 4\n"},
		{"-A1 -B3, groups that touch merge", grepOptions{before: 3, after: 1},
			"k-1-a\nk-2-b\nk:3:ERR 1\nk-4-c\nk-5-d\nk-6-e\nk-7-f\nk:8:ERR 2\nk:9:ERR 3\nk-10-g\n--\nk-12-i\nk-13-j\nk-14-k\nk:15:ERR 4\n"},
		{"-v -C1", grepOptions{invert: true, before: 1, after: 1},
			"k:1:a\nk:2:b\nk-3-ERR 1\nk:4:c\nk:5:d\nk:6:e\nk:7:f\nk-8-ERR 2\nk-9-ERR 3\nk:10:g\nk:11:h\nk:12:i\nk:13:j\nk:14:k\nk-15-ERR 4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := newMatcher("ERR", tc.o)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			n, err := grepContext(strings.NewReader(text), m, tc.o, "k", &got)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got.String(), tc.want)
			}
			if wantN := strings.Count(tc.want, ":") / 2; n != wantN {
				t.Errorf("got %d selected, want %d", n, wantN)
			}
		})
	}
}
