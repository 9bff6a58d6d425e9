//go:build unix && !linux

package stack

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
