package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// buildTarget is a function's build target in the Makefile, which sam build
// calls (BuildMethod: makefile): build-<LogicalId>, then
// $(call lambda_build,<dir>), the directory under functions/ of its main.
var buildTarget = regexp.MustCompile(`(?m)^build-(\w+):\n\t\$\(call lambda_build,(\w+)\)`)

// FunctionDirs maps each function's logical id to the directory under
// functions/ that holds its main package, as the Makefile of the
// repository at root builds it: the one place that says so.
func FunctionDirs(root string) (map[string]string, error) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	for _, m := range buildTarget.FindAllSubmatch(makefile, -1) {
		dirs[string(m[1])] = string(m[2])
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no build-<function> target in %s", filepath.Join(root, "Makefile"))
	}
	return dirs, nil
}
