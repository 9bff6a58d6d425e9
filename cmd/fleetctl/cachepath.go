package main

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// maxName bounds a file name of the cache, below the 255 bytes most file
// systems allow, leaving room for the .part suffix.
const maxName = 200

// cacheRel maps a log key to its path under the cache directory. The
// mapping is injective and confined: every "/"-separated segment of the
// key becomes one file name of segmentName, which is never "", "." or ".."
// and never holds a separator, so distinct keys (a/x, a//x, a/./x, a/../x)
// get distinct paths, none outside the directory, and no path ends in the
// .part suffix of a download in progress. Ordinary keys keep their names.
// A key that is also the folder of another (a/b and a/b/c) is the one
// thing a file system cannot hold both of: the second to be fetched fails,
// named like any other log that could not be fetched.
func cacheRel(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = segmentName(s)
	}
	return filepath.Join(segs...)
}

// segmentName is the file name of one key segment. Bytes other than
// lower-case letters, digits and -_.,+=@ are escaped as %XX (upper-case
// hex), and so are a leading dot (".", "..", hidden files) and the dot of a
// trailing ".part"; the empty segment is "%". A segment with upper-case
// letters, or whose name would be too long, gets "%~" and a hash of the
// segment: distinct on file systems that ignore case (macOS, Windows) and
// within their name limit. No escaped byte produces "%~" or a lone "%",
// so those names cannot meet an escaped one.
func segmentName(seg string) string {
	if seg == "" {
		return "%"
	}
	var b strings.Builder
	upper := false
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', strings.IndexByte("-_,+=@", c) >= 0:
			b.WriteByte(c)
		case 'A' <= c && c <= 'Z':
			upper = true
			b.WriteByte(c)
		case c == '.' && i > 0 && seg[i:] != partSuffix:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	name := b.String()
	if !upper && len(name) <= maxName {
		return name
	}
	cut := min(len(name), maxName-2-32)
	// Never cut an escape in two.
	if i := strings.LastIndexByte(name[:cut], '%'); i >= 0 && i > cut-3 {
		cut = i
	}
	sum := sha256.Sum256([]byte(seg))
	return name[:cut] + "%~" + hex.EncodeToString(sum[:16])
}
