package payload_test

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/payload"
)

// marshaled is what encoding/json writes for s, quotes left out: the rule
// StringSize must follow byte for byte.
func marshaled(t *testing.T, s []byte) int {
	t.Helper()
	out, err := json.Marshal(string(s))
	if err != nil {
		t.Fatal(err)
	}
	return len(out) - 2
}

func TestStringSizeIsWhatEncodingJSONWrites(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want int
	}{
		{"plain ASCII is itself", "abc-123", 7},
		{"quote and backslash take two bytes", `a"b\c`, 7},
		{"short control escapes take two bytes", "\b\f\n\r\t", 10},
		{"other control characters take six", "\x00\x1f\x7f", 13},
		{"HTML characters take six", "<>&", 18},
		{"an escaped '<' in a JSON body takes seven", `\u003c`, 7},
		{"UTF-8 runs as it is", "é漢😀", 9},
		{"line and paragraph separators take six", "\u2028\u2029", 12},
		{"a byte that is not UTF-8 takes six", "caf\xe9", 9},
		{"a cut rune takes six per byte", "\xe6\xbc", 12},
		{"empty is empty", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := payload.StringSize([]byte(tt.s)); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
			if got, want := payload.StringSize([]byte(tt.s)), marshaled(t, []byte(tt.s)); got != want {
				t.Errorf("got %d, encoding/json writes %d", got, want)
			}
		})
	}

	t.Run("every single byte and random strings agree with encoding/json", func(t *testing.T) {
		for c := range 256 {
			s := []byte{byte(c)}
			if got, want := payload.StringSize(s), marshaled(t, s); got != want {
				t.Errorf("byte %#x: got %d, want %d", c, got, want)
			}
		}
		alphabet := []rune("a\"\\<>&\n\x01é漢😀\u2028\u2029\ufffd")
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			var b strings.Builder
			for range rng.IntN(40) {
				if rng.IntN(10) == 0 {
					b.WriteByte(byte(rng.IntN(256))) // sometimes not UTF-8
				} else {
					b.WriteRune(alphabet[rng.IntN(len(alphabet))])
				}
			}
			s := []byte(b.String())
			if got, want := payload.StringSize(s), marshaled(t, s); got != want {
				t.Fatalf("%q: got %d, want %d", s, got, want)
			}
		}
	})
}

func TestBodySize(t *testing.T) {
	jsonType := http.Header{"Content-Type": {"application/json"}}
	gzipped := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	tests := []struct {
		name   string
		header http.Header
		body   string
		base64 bool
	}{
		{"JSON is carried as a string", jsonType, `["<a>"]`, false},
		{"a gzip body is base64", gzipped, "\x1f\x8b\x08", true},
		{"identity encoding is no encoding", http.Header{"Content-Encoding": {"identity"}}, `{}`, false},
		{"bytes that are not UTF-8 are base64", jsonType, "caf\xe9", true},
		{"a binary type is base64", http.Header{"Content-Type": {"image/png"}}, "png", true},
		{"a malformed type is base64", http.Header{"Content-Type": {"text/;;"}}, "x", true},
		{"no type is text", http.Header{}, "x", false},
		{"an empty body is an empty string", gzipped, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := payload.Base64(tt.header, []byte(tt.body)); got != tt.base64 {
				t.Fatalf("got base64 %v, want %v", got, tt.base64)
			}
			want := payload.StringSize([]byte(tt.body))
			if tt.base64 {
				want = len(base64.StdEncoding.EncodeToString([]byte(tt.body)))
			}
			if got := payload.BodySize(tt.header, []byte(tt.body)); got != want {
				t.Errorf("got %d, want %d", got, want)
			}
		})
	}
}
