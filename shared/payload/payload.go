// Package payload owns what a Lambda proxy response can carry: Lambda's
// limit on a synchronous response, and how many bytes a response body takes
// inside the JSON envelope that API Gateway's proxy integration reads
// (statusCode, headers, body, isBase64Encoded). Every answer of the API is
// streamed, which has no such limit; the routes that page by size (the log
// search, the change feed) still keep each page within Budget, the size
// their clients page through, and dev/lambdarun writes that envelope for
// make invoke.
package payload

import (
	"encoding/base64"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Limit is the largest synchronous response payload Lambda returns, in
// bytes: the whole proxy envelope as the runtime posts it, not the body
// alone. Beyond it Lambda fails the invocation (Function.ResponseSizeTooLarge)
// and API Gateway answers a 502 that is not JSON.
const Limit = 6 << 20

// Budget is the most bytes a page of the log search or the change feed
// takes as the envelope would carry its body (StringSize): Limit, less 64
// KiB for the status and headers. A page of that size is what one buffered
// answer could carry, and stays the page clients know.
const Budget = Limit - 64<<10

// Base64 reports whether a proxy response carries body base64-encoded.
// API Gateway passes a textual body through as a JSON string; a body with a
// Content-Encoding, one that is not UTF-8 (a JSON string cannot carry those
// bytes unchanged) or one whose Content-Type is not textual must be base64.
func Base64(h http.Header, body []byte) bool {
	if len(body) == 0 {
		return false
	}
	if ce := h.Get("Content-Encoding"); ce != "" && ce != "identity" {
		return true
	}
	if !utf8.Valid(body) {
		return true
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return true
	}
	return !(strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "application/xml" ||
		strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") || strings.Contains(mt, "javascript"))
}

// BodySize returns how many bytes body takes in the envelope's "body"
// field, quotes left out: 4 for every 3 bytes when Base64 says so, else its
// length as a JSON string (see StringSize).
func BodySize(h http.Header, body []byte) int {
	if Base64(h, body) {
		return base64.StdEncoding.EncodedLen(len(body))
	}
	return StringSize(body)
}

// StringSize returns the length of s written as a JSON string by
// encoding/json, quotes left out. A JSON body grows when it is carried as a
// string: '"' and '\' take 2 bytes, and so do \b, \f, \n, \r and \t; other
// control characters, '<', '>' and '&' (escaped for HTML safety), U+2028,
// U+2029 and every byte that is not UTF-8 take 6. A '<' inside a JSON
// string of the body is already the 6 bytes \u003c there, and 7 in the
// envelope.
func StringSize(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			n += asciiSize[c]
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// asciiSize is the length of each ASCII byte in a JSON string.
var asciiSize = func() (t [utf8.RuneSelf]int) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()
