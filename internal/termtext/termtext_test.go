package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestVisibleEscapesWhatATerminalWouldObey(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text stays", "kernel upgrade, node-17", "kernel upgrade, node-17"},
		{"Unicode text stays", "überprüft → 完了 🚀", "überprüft → 完了 🚀"},
		{"a retitle and a screen clear", "\x1b]0;pwned\x07\x1b[2Jhi", `\x1b]0;pwned\x07\x1b[2Jhi`},
		{"line breaks and tabs", "evil\n/etc/passwd\r\tx", `evil\n/etc/passwd\r\tx`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"a C1 control (CSI)", "a\u009b2Jb", `a\u009b2Jb`},
		{"a bidirectional override", "abc\u202etxt.exe", `abc\u202etxt.exe`},
		{"bytes that are not UTF-8", "a\xff\xc3b", `a\xff\xc3b`},
		{"a real replacement character stays", "a\uFFFDb", "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.want {
				t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzVisibleLeavesNoControlCharacter(f *testing.F) {
	for _, s := range []string{"", "a", "\x1b[2J", "\u009b", "\xff\xfe", "é\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Visible(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Visible(%q) = %q, not UTF-8", s, got)
		}
		for _, r := range got {
			if !printable(r) {
				t.Fatalf("Visible(%q) = %q holds %U", s, got, r)
			}
		}
		if !needsEscape(s) && got != s {
			t.Fatalf("Visible(%q) = %q, want it unchanged", s, got)
		}
		if strings.ContainsAny(got, "\n\r\x00") {
			t.Fatalf("Visible(%q) = %q breaks a line", s, got)
		}
	})
}
