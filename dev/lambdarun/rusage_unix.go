//go:build unix

package lambdarun

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSS is the peak resident memory of an ended process, in bytes. Linux
// counts it in kilobytes, macOS in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
