package stack

import (
	"context"
	"fmt"
	"os"
)

// Main is the body of an integration package's TestMain: it starts a local
// stack of the package's own on a free port, so that its tests never depend
// on something already running, calls run with it (m.Run and whatever the
// package does around it), stops the stack and returns run's exit code, or
// 1 when the stack does not start.
func Main(run func(*Local) int) int {
	local, err := Up(context.Background(), "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer local.Close()
	return run(local)
}
