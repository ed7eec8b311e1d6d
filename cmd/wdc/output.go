package main

import (
	"io"
	"os"
	"sync"
)

// keepGoingWriter is one of apply's output streams: a write that fails (a
// reader that went away, as `wdc apply | head` does, a full disk) is
// remembered, every later write is dropped, and each reports success, so
// that no output error stops an apply half-way: its workers, leases and
// lock are in the middle of something only the apply can finish.
type keepGoingWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error
}

// keepGoing wraps w (once).
func keepGoing(w io.Writer) *keepGoingWriter {
	if k, ok := w.(*keepGoingWriter); ok {
		return k
	}
	return &keepGoingWriter{w: w}
}

func (k *keepGoingWriter) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		if _, err := k.w.Write(p); err != nil {
			k.err = err
		}
	}
	return len(p), nil
}

// Err is the first write that failed, or nil.
func (k *keepGoingWriter) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// fileOf returns the file under w (through a keepGoingWriter), for
// terminal checks.
func fileOf(w io.Writer) (*os.File, bool) {
	if k, ok := w.(*keepGoingWriter); ok {
		w = k.w
	}
	f, ok := w.(*os.File)
	return f, ok
}
