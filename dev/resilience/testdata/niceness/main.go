//go:build linux

// Command niceness prints its own nice value: the runner's test of its
// builds' CPU priority runs it with go run, as it runs go test -c.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(20 - prio) // the kernel's value, 20 - nice
}
