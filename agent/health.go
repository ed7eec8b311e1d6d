package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/protocol/tlsca"
)

// health tracks how long the agent has failed to reach its coordinator.
//
// Every call reports its outcome: a success (any answer from the
// coordinator other than a 5xx) resets the tracker; a failure (a network
// error, a timeout, a 5xx) starts the clock if it is not running. The time
// the process spent paused (SIGSTOP, a suspended VM) does not count: the
// heartbeat loop notices a gap between two of its own timer ticks and
// moves the start of the failing period forward by it.
type health struct {
	mu           sync.Mutex
	failingSince time.Time // zero while the last call succeeded
	lastErr      error
}

// ok records a call that reached the coordinator.
func (h *health) ok() {
	h.mu.Lock()
	h.failingSince = time.Time{}
	h.lastErr = nil
	h.mu.Unlock()
}

// fail records a call that did not reach the coordinator at now.
func (h *health) fail(now time.Time, err error) {
	h.mu.Lock()
	if h.failingSince.IsZero() {
		h.failingSince = now
	}
	h.lastErr = err
	h.mu.Unlock()
}

// paused discounts d, a stretch of time the process did not run, from the
// current failing period. It never moves the start past now.
func (h *health) paused(now time.Time, d time.Duration) {
	h.mu.Lock()
	if !h.failingSince.IsZero() {
		h.failingSince = h.failingSince.Add(d)
		if h.failingSince.After(now) {
			h.failingSince = now
		}
	}
	h.mu.Unlock()
}

// failingFor returns how long calls have been failing at now (0 when the
// last call succeeded) and the last error.
func (h *health) failingFor(now time.Time) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failingSince.IsZero() {
		return 0, nil
	}
	return now.Sub(h.failingSince), h.lastErr
}

// backoff is a capped exponential backoff with ±20 % jitter.
type backoff struct {
	base, max time.Duration
}

// delay returns the wait before retry n (0 for the first retry):
// base·2ⁿ, capped at max, jittered.
func (b backoff) delay(n int) time.Duration {
	d := b.base
	for i := 0; i < n && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) * 2
	return d - d/5 + jitter
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reachFailure reports whether err means the coordinator was not reached
// (a network error, a timeout, a 5xx, 408 or 429), as opposed to an answer
// that a retry would not change. A cancelled context is neither: the caller
// gave up.
func reachFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ae *protocol.APIError
	if errors.As(err, &ae) {
		return ae.Temporary()
	}
	if tlsRefused(err) {
		return false
	}
	return true
}

// tlsRefused reports whether err is the coordinator's certificate failing
// verification (the pin, the roots or the host name): no retry can fix it.
func tlsRefused(err error) bool {
	var pin *tlsca.VerifyError
	var roots *tls.CertificateVerificationError
	return errors.As(err, &pin) || errors.As(err, &roots)
}
