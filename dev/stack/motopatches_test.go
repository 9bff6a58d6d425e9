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
// still needed ("The patches, and why each is still needed"), the list says
// how many there are, and each has its shape check in SHAPES and is applied
// by main: a patch added without its reason, or a reason or a count left
// behind by a patch taken out, fails here. docs/decisions.md refers to this
// list rather than repeat it.
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
	_, list, ok := strings.Cut(src, "\nThe patches, and why each is still needed")
	list, _, ok2 := strings.Cut(list, "\nUpgrading moto.")
	_, body, ok3 := strings.Cut(src, "\ndef main(")
	if !ok || !ok2 || !ok3 {
		t.Fatal("dev/motoserver.py has no list of patches (The patches, and why each is still needed ... Upgrading moto.) or no main")
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
	if len(listed) == 0 {
		t.Fatal("found no patch listed with its reason, want the launcher's list")
	}
	count := regexp.MustCompile(`\b([A-Z][a-z]+)\s+patches\b`).FindStringSubmatch(list)
	if count == nil {
		t.Fatal(`the list of patches does not say how many there are ("Eleven patches")`)
	}
	numbers := []string{"", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten",
		"Eleven", "Twelve", "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen", "Twenty"}
	if n := slices.Index(numbers, count[1]); n != len(listed) {
		t.Errorf("the list says %q patches, and lists %d: %q", count[1], len(listed), listed)
	}
	// Each entry, up to the next, says that it is needed and why.
	for _, entry := range regexp.MustCompile(`(?m)^- `).Split(list, -1)[1:] {
		name, _, _ := strings.Cut(entry, " ")
		if _, why, ok := strings.Cut(entry, "needed"); !ok || len(strings.Fields(why)) < 4 {
			t.Errorf("the patch %s is listed without the reason it is needed: %q", name, entry)
		}
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
