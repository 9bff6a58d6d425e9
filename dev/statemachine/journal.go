package statemachine

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Journal records the Map items and Task states of one execution that
// succeeded, with their outputs, one JSON line each in a file, so that the execution can
// be run again after an interruption without redoing them: the local
// counterpart of Step Functions' redrive, which reruns only a Map Run's
// child executions that did not succeed. An item is known by its Map's
// name and a hash of its whole input (a batch's keys, sizes, ETags and
// times), so an item whose objects changed since is run again.
type Journal struct {
	mu   sync.Mutex
	path string
	file *os.File
	done map[string]any
}

type journalLine struct {
	Item   string `json:"item"`
	Output any    `json:"output"`
}

// OpenJournal opens the journal at path, creating it (and its directory)
// when absent, and reads what an earlier run recorded there.
func OpenJournal(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	j := &Journal{path: path, done: map[string]any{}}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		lines := bufio.NewScanner(f)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var l journalLine
			// A line cut short by an interruption is an item to run again.
			if json.Unmarshal(lines.Bytes(), &l) == nil && l.Item != "" {
				j.done[l.Item] = l.Output
			}
		}
		f.Close()
		if err := lines.Err(); err != nil {
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
	}
	if j.file, err = os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		return nil, err
	}
	return j, nil
}

// Len is the number of items recorded.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.done)
}

// Close closes the journal, keeping it for the next run.
func (j *Journal) Close() error { return j.file.Close() }

// Remove closes and deletes the journal: its execution succeeded, and the
// next one starts afresh.
func (j *Journal) Remove() error {
	return errors.Join(j.file.Close(), os.Remove(j.path))
}

// output returns what the item id output when it succeeded, if it did; a
// nil journal holds nothing.
func (j *Journal) output(id string) (any, bool) {
	if j == nil {
		return nil, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	out, ok := j.done[id]
	return out, ok
}

// record writes that the item id succeeded with out.
func (j *Journal) record(id string, out any) error {
	if j == nil {
		return nil
	}
	line, err := json.Marshal(journalLine{Item: id, Output: out})
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	j.done[id] = out
	return nil
}

// itemID names a Map item by its Map and its input.
func itemID(mapName string, in any) (string, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(mapName+"\x00"), raw...))
	return hex.EncodeToString(sum[:16]), nil
}
