package lambdarun

import (
	"os"
	"path/filepath"
	"sync"
)

// Binaries are function binaries built once each, into Dir, for every
// caller that asks for one by name: the tests of a package run the same
// function many times, and a go build costs seconds of CPU.
type Binaries struct {
	Dir string

	mu    sync.Mutex
	built map[string]*binary
}

type binary struct {
	once sync.Once
	path string
	err  error
}

// Get returns the binary called name, a bootstrap file in Dir/name, which
// write makes at the path it is given the first time name is asked for.
// A failed write is the answer for name from then on.
func (b *Binaries) Get(name string, write func(out string) error) (string, error) {
	b.mu.Lock()
	if b.built == nil {
		b.built = map[string]*binary{}
	}
	bin := b.built[name]
	if bin == nil {
		bin = &binary{}
		b.built[name] = bin
	}
	b.mu.Unlock()
	bin.once.Do(func() {
		dir := filepath.Join(b.Dir, name)
		if bin.err = os.Mkdir(dir, 0o755); bin.err == nil {
			bin.path = filepath.Join(dir, "bootstrap")
			bin.err = write(bin.path)
		}
	})
	return bin.path, bin.err
}
