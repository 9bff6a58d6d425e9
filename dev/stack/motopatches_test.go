package stack

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every patch dev/motoserver.py makes is listed once with the reason it is
// still needed ("Whether each patch is still needed"), has its shape check
// in SHAPES, and is applied by main: a patch added without its reason, or
// a reason left behind by a patch taken out, fails here.
func TestEveryMotoPatchIsListedWithItsReasonCheckedAndApplied(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "dev", "motoserver.py"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	_, list, ok := strings.Cut(src, "\nWhether each patch is still needed")
	list, _, ok2 := strings.Cut(list, "\nUpgrading moto.")
	_, body, ok3 := strings.Cut(src, "\ndef main(")
	if !ok || !ok2 || !ok3 {
		t.Fatal("dev/motoserver.py has no list of patches (Whether each patch is still needed ... Upgrading moto.) or no main")
	}
	names := func(re string, text string) []string {
		var out []string
		for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(text, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
		slices.Sort(out)
		return out
	}
	listed := names(`(?m)^- (\w+) \(`, list)
	checked := names(`(?m)^    \("(\w+)",`, src)
	if len(listed) < 10 {
		t.Fatalf("found %d patches listed with their reasons, want the launcher's list", len(listed))
	}
	if !slices.Equal(listed, checked) {
		t.Errorf("patches listed with their reasons: %q\npatches with a shape check in SHAPES: %q\nwant the same", listed, checked)
	}
	for _, p := range listed {
		if !regexp.MustCompile(`\b` + p + `\(`).MatchString(body) {
			t.Errorf("the patch %s is listed, but main does not apply it", p)
		}
	}
}
