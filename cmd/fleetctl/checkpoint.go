package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
)

// checkpoint is what an import has done so far: the slaves the destination
// answered imported or unchanged, so that the same import run again after
// an interrupt skips them. Slaves in conflict or refused are not recorded:
// a run again sends them again, with the flags of that run (--mode
// replace, --override-limit).
//
// It lives in a directory "imports" beside the logs cache (--cache-dir),
// in a file named by a hash of the source and destination endpoints:
// nothing the source answers takes part in its path. Losing it costs only
// time: the import route answers a slave stored so already "unchanged".
type checkpoint struct {
	path string
	mu   sync.Mutex
	file checkpointFile
	done map[string]bool
}

// checkpointFile is the checkpoint as it is written.
type checkpointFile struct {
	Source      string   `json:"source"`
	Destination string   `json:"destination"`
	Done        []string `json:"done"`
}

// checkpointPath is the checkpoint of an import from source to destination
// for the logs cache cacheDir.
func checkpointPath(cacheDir, source, destination string) string {
	sum := sha256.Sum256([]byte(source + "\n" + destination))
	return filepath.Join(filepath.Dir(filepath.Clean(cacheDir)), "imports", hex.EncodeToString(sum[:16])+".json")
}

// openCheckpoint reads the checkpoint of an import from source to
// destination, or starts an empty one when there is none or fresh is set.
// A file that cannot be read as a checkpoint of this import is an error.
func openCheckpoint(cacheDir, source, destination string, fresh bool) (*checkpoint, error) {
	c := &checkpoint{path: checkpointPath(cacheDir, source, destination), done: map[string]bool{},
		file: checkpointFile{Source: redacted(source), Destination: redacted(destination)}}
	if fresh {
		return c, nil
	}
	raw, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var f checkpointFile
	if err := json.Unmarshal(raw, &f); err != nil || f.Source != c.file.Source || f.Destination != c.file.Destination {
		return nil, fmt.Errorf("checkpoint %s is not one of this import (--restart starts afresh)", c.path)
	}
	for _, id := range f.Done {
		c.done[id] = true
	}
	return c, nil
}

// has reports whether the slave id was done.
func (c *checkpoint) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done[id]
}

// add records the slaves ids as done and writes the checkpoint: a new file
// renamed over the old one, so that an interrupt leaves either.
func (c *checkpoint) add(ids []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.done[id] = true
	}
	c.file.Done = sortedKeys(c.done)
	raw, err := json.Marshal(c.file)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	_, err = tmp.Write(raw)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// remove deletes the checkpoint of an import with nothing left to do.
func (c *checkpoint) remove() error {
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// count is how many slaves were done.
func (c *checkpoint) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.done)
}

// redacted is an endpoint without the password of its user, if it names
// one, as a file may hold it.
func redacted(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint
	}
	return u.Redacted()
}
