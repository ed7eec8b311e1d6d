package state

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// Write transactions of several processes (or of several Stores) on one
// state file take turns through a side file, <state file>-writers, beside
// SQLite's own -wal and -shm. SQLite alone does not share its write lock
// fairly: a process that waits for it retries after growing sleeps (up to
// 100 ms each), and a committer that begins its next group the moment it
// committed the last one holds the lock almost all the time, so the
// waiter can starve until its busy timeout (5 s) fails it.
//
// So a writer holds a shared flock(2) on the side file while it waits to
// begin its transaction (BEGIN IMMEDIATE), and drops it once it has begun.
// A committer about to begin another group at once first tries the lock
// exclusively without blocking: if that fails, another writer is waiting,
// and the committer steps aside (polls every millisecond, for at most
// maxStepAside) until that writer has begun.
type writerTurns struct {
	f *os.File // nil: no side file (it could not be made); no turns
}

// maxStepAside bounds how long a committer waits for another writer to
// begin (a writer that stopped while waiting must not stop this one).
const maxStepAside = 200 * time.Millisecond

// openTurns opens (creating) the side file of the state file abs. On any
// error it returns turns that do nothing: SQLite's locking still keeps
// writes correct, only fairness is lost.
func openTurns(abs string) *writerTurns {
	f, err := os.OpenFile(abs+"-writers", os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return &writerTurns{}
	}
	return &writerTurns{f: f}
}

func (w *writerTurns) flock(how int) error {
	for {
		err := syscall.Flock(int(w.f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// waiting marks this writer as waiting to begin; call the returned
// function once the transaction has begun (or failed to).
func (w *writerTurns) waiting() func() {
	if w == nil || w.f == nil {
		return func() {}
	}
	if w.flock(syscall.LOCK_SH) != nil {
		return func() {}
	}
	return func() { _ = w.flock(syscall.LOCK_UN) }
}

// stepAside returns once no other writer waits to begin, or after
// maxStepAside.
func (w *writerTurns) stepAside() {
	if w == nil || w.f == nil {
		return
	}
	deadline := time.Now().Add(maxStepAside)
	for {
		if w.flock(syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = w.flock(syscall.LOCK_UN)
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (w *writerTurns) close() {
	if w != nil && w.f != nil {
		w.f.Close()
	}
}
