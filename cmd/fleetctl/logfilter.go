package main

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fleetops/fleet/client"
)

// logFilter keeps the logs whose file name and task host match globs
// (path.Match), after the API's lookup.
type logFilter struct {
	file, host string
}

func (f *logFilter) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.file, "file", "", "only logs whose file name matches this glob (stdout*, *.gz)")
	fs.StringVar(&f.host, "host", "", "only logs of tasks whose host matches this glob (node1*)")
}

func (f logFilter) check() error {
	for flag, glob := range map[string]string{"--file": f.file, "--host": f.host} {
		if _, err := path.Match(glob, ""); err != nil {
			return usageError("%s %q: %v", flag, glob, err)
		}
	}
	return nil
}

// fileName splits a key's last segment as the default key format writes
// it, <taskId>_<index>-<time>-<filename>, into the task id and the file
// name. Under another format the task id is empty and the file name is
// the whole segment.
var fileName = regexp.MustCompile(`^(.+?)_[0-9]+-[0-9]+-(.+)$`)

// keeps reports whether the filter keeps l. --file matches the file name
// or the key's whole last segment; --host matches the host of the task id
// the key holds, so a key without one matches no --host.
func (f logFilter) keeps(l client.Log) bool {
	base := path.Base(l.Key)
	task, name := "", base
	if m := fileName.FindStringSubmatch(base); m != nil {
		task, name = m[1], m[2]
	}
	if f.file != "" {
		byName, _ := path.Match(f.file, name)
		byBase, _ := path.Match(f.file, base)
		if !byName && !byBase {
			return false
		}
	}
	if f.host != "" {
		host, ok := taskHost(task)
		if !ok {
			return false
		}
		if ok, _ := path.Match(f.host, host); !ok {
			return false
		}
	}
	return true
}

// taskHost returns the host a task id names, as the API's task ids are
// written (docs/behaviour.md "Task logs"): <requestId>-<deployId>-
// <startedAt>-<instanceNo>-<host>-<rackId>, split on '-' from the right,
// with the two numbers in decimal digits. Anything else names no host.
func taskHost(id string) (string, bool) {
	parts := strings.Split(id, "-")
	n := len(parts) - 5
	if n < 1 || strings.Join(parts[:n], "-") == "" || slices.Contains(parts[n:], "") {
		return "", false
	}
	for _, number := range parts[n+1 : n+3] {
		if strings.Trim(number, "0123456789") != "" {
			return "", false
		}
	}
	return parts[n+3], true
}
