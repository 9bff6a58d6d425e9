package logindex

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTheKeyRangeOfAPrefixHoldsEveryKeyUnderItAndNoMore(t *testing.T) {
	long := strings.Repeat("a", maxKeyBytes)
	for _, c := range []struct {
		name, prefix, after string
		lo                  string
		ok                  bool
	}{
		{"from the prefix without a token", "p/", "", "p/", true},
		{"from the prefix with a token before it", "p/", "a", "p/", true},
		{"just after the token", "p/", "p/x", "p/x\x00", true},
		{"nothing after a token past the prefix", "p/", "q", "", false},
		{"after a key of 1,024 bytes, its last character grown", "a", long, long[:maxKeyBytes-1] + "b", true},
		{"a last character that cannot grow within the limit goes", "a", long[:maxKeyBytes-1] + "\x7f", long[:maxKeyBytes-2] + "b", true},
		{"nothing under a prefix longer than any key", long + "b", "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			lo, hi, ok := keyRange(c.prefix, c.after)
			if ok != c.ok || lo != c.lo {
				t.Fatalf("got %.20q…, %v, want %.20q…, %v", lo, ok, c.lo, c.ok)
			}
			if !ok {
				return
			}
			if len(lo) > maxKeyBytes || len(hi) > maxKeyBytes || !utf8.ValidString(lo) || !utf8.ValidString(hi) {
				t.Errorf("got bounds of %d and %d bytes, want valid UTF-8 within %d", len(lo), len(hi), maxKeyBytes)
			}
			for _, k := range []string{c.prefix + "\U0010FFFF\U0010FFFFx", c.prefix + strings.Repeat("\U0010FFFF", (maxKeyBytes-len(c.prefix))/4)} {
				if len(k) <= maxKeyBytes && k > hi {
					t.Errorf("key %.20q… under the prefix sorts after hi", k)
				}
			}
			if next := c.prefix[:len(c.prefix)-1] + string(rune(c.prefix[len(c.prefix)-1]+1)); next <= hi {
				t.Errorf("%q, past the prefix, sorts before hi", next)
			}
		})
	}
}
