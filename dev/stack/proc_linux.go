package stack

import "syscall"

// setParentDeathSignal has Linux kill the emulator if the Go process dies
// without calling Stop (a test binary killed by -timeout, for one).
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
