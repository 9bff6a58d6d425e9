package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCachePathsKeepOrdinaryKeysAndEscapeTheRest(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"web-api/2026/11/web-api-v42-1793491200000-0-node17-us_east_1a_0-1793491200000-stdout", "web-api/2026/11/web-api-v42-1793491200000-0-node17-us_east_1a_0-1793491200000-stdout"},
		{"r/2026/11/x.log.gz", "r/2026/11/x.log.gz"},
		{"same/x.log", "same/x.log"},
		{"same//x.log", "same/%/x.log"},
		{"same/./x.log", "same/%2E/x.log"},
		{"same/../x.log", "same/%2E./x.log"},
		{"../../etc/passwd", "%2E./%2E./etc/passwd"},
		{"/abs", "%/abs"},
		{"a/.hidden", "a/%2Ehidden"},
		{"a/x.part", "a/x%2Epart"},
		{"a/x.part.gz", "a/x.part.gz"},
		{"a/evil\n", "a/evil%0A"},
		{"a/esc\x1b[2j", "a/esc%1B%5B2j"},
		{`a\b:c`, "a%5Cb%3Ac"},
		{"a/100%", "a/100%25"},
		{"a/é", "a/%C3%A9"},
	} {
		if got := cacheRel(tc.key); got != filepath.FromSlash(tc.want) {
			t.Errorf("cacheRel(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestCachePathsOfUpperCaseAndLongSegmentsAreHashed(t *testing.T) {
	upper, lower := cacheRel("r/Node.log"), cacheRel("r/node.log")
	if strings.EqualFold(upper, lower) || !strings.HasPrefix(upper, filepath.FromSlash("r/Node.log%~")) {
		t.Errorf("got %q and %q, want names that differ even ignoring case", upper, lower)
	}
	long := strings.Repeat("x", 300)
	name := filepath.Base(cacheRel("r/" + long))
	if len(name) > maxName || !strings.HasPrefix(name, "xxxx") || !strings.Contains(name, "%~") {
		t.Errorf("got %q (%d bytes), want at most %d bytes, readable, hashed", name, len(name), maxName)
	}
	if other := filepath.Base(cacheRel("r/" + long + "y")); other == name {
		t.Errorf("two long segments share %q", name)
	}
	escaped := filepath.Base(cacheRel("r/" + strings.Repeat("\x1b", 100)))
	if len(escaped) > maxName || strings.Contains(strings.SplitN(escaped, "%~", 2)[0]+"%", "%%") {
		t.Errorf("got %q, want an escape never cut in two", escaped)
	}
}

// checkCachePaths checks the two properties of the mapping on keys: every
// path is inside the directory and ends in no .part, and distinct keys
// get paths that differ even on a file system that ignores case.
func checkCachePaths(t *testing.T, keys ...string) {
	t.Helper()
	seen := map[string]string{}
	for _, k := range keys {
		rel := cacheRel(k)
		if !filepath.IsLocal(rel) || filepath.Clean(rel) != rel {
			t.Fatalf("cacheRel(%q) = %q, not a clean path inside the directory", k, rel)
		}
		if strings.HasSuffix(rel, partSuffix) {
			t.Fatalf("cacheRel(%q) = %q ends in %s", k, rel, partSuffix)
		}
		for _, seg := range strings.Split(rel, string(filepath.Separator)) {
			if len(seg) > maxName {
				t.Fatalf("cacheRel(%q) has a %d-byte name", k, len(seg))
			}
		}
		folded := strings.ToLower(rel)
		if other, ok := seen[folded]; ok && other != k {
			t.Fatalf("keys %q and %q share the path %q", other, k, rel)
		}
		seen[folded] = k
	}
}

func TestCachePathsAreInjectiveAndConfined(t *testing.T) {
	checkCachePaths(t, "same/x.log", "same//x.log", "same/./x.log", "same/../x.log", "same/x.log/", "same/x.log.part",
		"same/x.log%2Epart", "same/%2E/x.log", "same/%/x.log", "", "/", "//", ".", "..", "...", "A", "a", "a%~x",
		"same/X.log", "same/x.LOG", strings.Repeat("y", 300), strings.Repeat("y", 301), strings.Repeat("Y", 300))
}

func FuzzCachePathsAreInjectiveAndConfined(f *testing.F) {
	f.Add("same/x.log", "same//x.log")
	f.Add("a/./b", "a/b")
	f.Add("A", "a")
	f.Add("x.part", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		checkCachePaths(t, a, b)
	})
}
