package exactjson_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetops/fleet/shared/exactjson"
)

func TestValidTextRefusesWhatTheDecoderWouldReplace(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		valid      bool
	}{
		{"plain text", `{"host":"node-1.example.com","attributes":{"zone":"é😀"}}`, true},
		{"a U+FFFD the sender wrote as UTF-8", "{\"host\":\"bad-\xef\xbf\xbd-host\"}", true},
		{"a U+FFFD the sender escaped", `{"host":"bad-\ufffd-host","rack":"\uFFFD"}`, true},
		{"an escaped surrogate pair", `{"host":"\ud83d\ude00"}`, true},
		{"an escaped backslash before a u", `{"host":"C:\\ud800"}`, true},
		{"a backslash at the end", `\`, true},
		{"bytes that are not UTF-8 in a value", "{\"host\":\"bad-\xff\xfe-host\"}", false},
		{"bytes that are not UTF-8 in a key", "{\"ho\xffst\":\"h\"}", false},
		{"a truncated rune", "{\"host\":\"\xe2\x82\"}", false},
		{"a UTF-8 encoded surrogate", "{\"host\":\"\xed\xa0\x80\"}", false},
		{"a lone high surrogate", `{"host":"\ud800"}`, false},
		{"a lone high surrogate at the end", `"\ud800`, false},
		{"a high surrogate before another", `{"host":"\ud800\ud800"}`, false},
		{"a lone low surrogate", `{"host":"\udc00x"}`, false},
		{"a low surrogate after a pair", `{"host":"\ud83d\ude00\ude00"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := exactjson.ValidText([]byte(tc.data))
			if (err == nil) != tc.valid {
				t.Fatalf("got %v, want valid %v", err, tc.valid)
			}
			if !tc.valid || !json.Valid([]byte(tc.data)) {
				return
			}
			// What is accepted decodes to the U+FFFDs the sender wrote, no more.
			var v any
			if err := json.Unmarshal([]byte(tc.data), &v); err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(v)
			sent := strings.Count(tc.data, "\uFFFD") + strings.Count(strings.ToLower(tc.data), `\ufffd`)
			if got := strings.Count(string(out), string(utf8.RuneError)) + strings.Count(string(out), `\ufffd`); got != sent {
				t.Errorf("got %d U+FFFD decoded, want the %d sent", got, sent)
			}
		})
	}
}
