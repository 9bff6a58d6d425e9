//go:build unix

package stack

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes cmd lead its own process group, so that stopping it
// also stops whatever it started (a pyenv shim execs, a wrapper may fork).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends SIGTERM (or SIGKILL when kill) to cmd's process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
