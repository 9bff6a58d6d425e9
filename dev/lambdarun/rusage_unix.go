//go:build unix

package lambdarun

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// peakMemory is the peak resident memory of a running process, in bytes,
// or 0 when this system cannot tell. On Linux it is VmHWM, the high-water
// mark of the memory the process's program has mapped since it started.
// The wait status's maxrss would not do: Linux carries over into it the
// resident size of the process that started it (here, a test binary that
// may hold hundreds of megabytes), which says nothing of the function.
func peakMemory(pid int) int64 {
	if runtime.GOOS != "linux" {
		return 0
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// maxRSS is the peak resident memory of an ended process, in bytes, where
// the system reports it for that process alone (macOS counts it in bytes).
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || runtime.GOOS == "linux" {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
