package tlsca

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) lock on path, creating the file (mode
// 0600) if needed, and returns the function that releases it. It blocks
// until the lock is free. The lock belongs to this open of the file, so two
// goroutines of one process exclude each other as two processes do, and the
// kernel releases it when its holder exits, however it exits: a crash
// leaves no stale lock behind.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tlsca: locking %s: %w", path, err)
	}
	var lockErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lockErr = syscall.Flock(int(fd), syscall.LOCK_EX)
			if !errors.Is(lockErr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		lockErr = err
	}
	if lockErr != nil {
		f.Close()
		return nil, fmt.Errorf("tlsca: locking %s: %w", path, lockErr)
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}
