//go:build unix

package stack

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// tryLock write-locks the whole of f, an fcntl (POSIX) lock, unless another
// process holds a lock on it. Such a lock is the process's: the kernel drops
// it when the process ends, and also when the process closes any descriptor
// of the file, so a process never opens the file of its own claim again.
func tryLock(f *os.File) (bool, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return false, nil
	}
	return err == nil, err
}

// lockHolder returns the pid of the process holding a lock on f, 0 when
// none does, without taking it.
func lockHolder(f *os.File) (int, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0, err
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, nil
	}
	return int(lk.Pid), nil
}
