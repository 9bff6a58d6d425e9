package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// listen takes the server's port before anything else starts, so that a
// second make run says at once who holds the port instead of starting an
// emulator and then failing.
func listen(host string, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err == nil {
		return ln, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, err
	}
	who := "already in use"
	if holder := portHolder(port); holder != "" {
		who = "in use by " + holder
	}
	return nil, fmt.Errorf("port %d is %s: is make run already running? Stop it, or serve on another port with PORT=%d make run", port, who, port+1)
}

// portHolder names the process listening on TCP port, as "pid 1234 (run)",
// from Linux's /proc: the listening socket's inode in /proc/net/tcp and tcp6,
// then the process holding a descriptor of it. It returns "" when it cannot
// tell (another system, or another user's process).
func portHolder(port int) string {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			// sl local_address rem_address st ... inode: the local address
			// is HEXIP:HEXPORT, state 0A is LISTEN.
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if n, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(n) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return ""
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name())
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && inodes[target] {
				comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
				return fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return ""
}
