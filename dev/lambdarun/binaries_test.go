package lambdarun

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestBinariesBuildEachNameOnce(t *testing.T) {
	b := Binaries{Dir: t.TempDir()}
	var mu sync.Mutex
	writes := map[string]int{}
	write := func(out string) error {
		mu.Lock()
		writes[filepath.Base(filepath.Dir(out))]++
		mu.Unlock()
		return os.WriteFile(out, []byte("binary"), 0o755)
	}
	var wg sync.WaitGroup
	paths := make([]string, 8)
	for i := range paths {
		wg.Go(func() {
			path, err := b.Get("SlavesFunction", write)
			if err != nil {
				t.Error(err)
			}
			paths[i] = path
		})
	}
	wg.Wait()
	other, err := b.Get("LogsFunction", write)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(b.Dir, "SlavesFunction", "bootstrap")
	for _, p := range paths {
		if p != want {
			t.Errorf("got %q, want %q", p, want)
		}
	}
	if other != filepath.Join(b.Dir, "LogsFunction", "bootstrap") || writes["SlavesFunction"] != 1 || writes["LogsFunction"] != 1 {
		t.Errorf("got %q and writes %v, want each binary written once, in a directory of its own", other, writes)
	}

	failed := errors.New("build failed")
	calls := 0
	for range 2 {
		if _, err := b.Get("Broken", func(string) error { calls++; return failed }); !errors.Is(err, failed) {
			t.Errorf("got %v, want the failed build's error", err)
		}
	}
	if calls != 1 {
		t.Errorf("got %d builds of a binary that failed, want 1: its failure is the answer", calls)
	}
}
