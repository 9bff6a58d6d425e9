// Package termtext renders text from the service, S3 or a report for a
// terminal (fleetctl's human output, make events' lines).
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible renders text from the service or S3 (a machine's message or host,
// a log key, an error) for a terminal, as git and kubectl do: control
// characters (\n, \r, \t, ESC, DEL, the C1 range U+0080 to U+009F), other
// non-printing runes (bidirectional overrides, zero-width marks) and bytes
// that are not UTF-8 are written as escapes (\n, \x1b, \u009b, \xff), so
// that no answer can move the cursor, retitle the window or break a line.
// Printable text, Unicode included, stays as it is. Only human output goes
// through it: -o json and --print0 stay exact.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && !printable(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !printable(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// printable reports whether r may reach a terminal as it is: a graphic
// rune or a plain space.
func printable(r rune) bool {
	return r == ' ' || unicode.IsPrint(r)
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !printable(r) {
			return true
		}
	}
	return false
}
