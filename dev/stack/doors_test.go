package stack

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dev/ fills tables only through the service's own doors: the store, or
// the items shared/dynamo builds (SlaveItem, HistoryItem, ExpiringItem,
// ...), never items written by hand, which a change of a record would
// leave behind, far from the change. The names here belong to the tables'
// records alone (the API says state, timestamp and user inside
// currentState, never these).
func TestDevBuildsNoTableItemByHand(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	recordOnly := regexp.MustCompile(`"(stateTimestamp|stateMessage|stateUser|dueShard|dueAt|lastAt|describedAt)"`)
	checked := 0
	err = filepath.WalkDir(filepath.Join(root, "dev"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if m := recordOnly.FindString(line); m != "" {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d names the record attribute %s: build the item with shared/dynamo (SlaveItem, HistoryItem, ExpiringItem, ...) or write it through the store", rel, i+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d Go files under dev/, want all of them", checked)
	}
}
