package providers

import (
	"context"
	"sync"
)

// WorkerEnd records how a worker ended, once, for providers that learn of
// it from a watch or a poll (the Kubernetes and Ray providers): the
// watcher calls Finish, and Status and Wait answer from it. Safe for
// concurrent use; make it with NewWorkerEnd.
type WorkerEnd struct {
	once sync.Once
	done chan struct{}
	resp WaitResponse // written once, before done closes
}

// NewWorkerEnd returns the end of a worker that still runs.
func NewWorkerEnd() *WorkerEnd { return &WorkerEnd{done: make(chan struct{})} }

// Finish records r as the worker's end. Only the first call counts; it
// reports whether this call was it.
func (e *WorkerEnd) Finish(r WaitResponse) bool {
	first := false
	e.once.Do(func() {
		e.resp, first = r, true
		close(e.done)
	})
	return first
}

// Done is closed once the worker ended.
func (e *WorkerEnd) Done() <-chan struct{} { return e.done }

// Ended reports whether Finish was called.
func (e *WorkerEnd) Ended() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// Status is the provider's StatusResponse for the worker: running until
// it ended, then its exit code and signal.
func (e *WorkerEnd) Status() StatusResponse {
	if !e.Ended() {
		return StatusResponse{Running: true}
	}
	return StatusResponse{ExitCode: e.resp.ExitCode, Signal: e.resp.Signal}
}

// Wait blocks until the worker ended and returns its end, or returns
// ctx's error when ctx is done first.
func (e *WorkerEnd) Wait(ctx context.Context) (WaitResponse, error) {
	select {
	case <-e.done:
		return e.resp, nil
	case <-ctx.Done():
		return WaitResponse{}, ctx.Err()
	}
}
