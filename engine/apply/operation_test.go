package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

// recordingView is an OperationView that records what recover reports.
type recordingView struct {
	tookOver, reclaimed bool
	reclaimErr          error
}

func (v *recordingView) LockWaiting(state.Lock, time.Duration) {}
func (v *recordingView) LockLost()                             {}
func (v *recordingView) TookOver(state.Lock, bool)             { v.tookOver = true }
func (v *recordingView) Reclaimed(_ ReclaimResult, err error)  { v.reclaimed, v.reclaimErr = true, err }
func (v *recordingView) Recovered(int, int)                    {}
func (v *recordingView) Planned(*plan.Plan, hcl.Diagnostics) error {
	return nil
}
func (v *recordingView) Started()                  {}
func (v *recordingView) Serving(*httpapi.Endpoint) {}
func (v *recordingView) Event(coordinator.Event)   {}

// TestRecoverInterrupted: an interrupt while an apply recovers what the
// apply whose lock it took over left ends it with ErrInterruptedRecovering
// (not the state's "context canceled"), having said what it stopped and
// reported no error of its own for it.
func TestRecoverInterrupted(t *testing.T) {
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	st := openStore(t)
	opts := LockOptions{Holder: "h", Host: "a", PID: 300, TTL: 30 * time.Second, Poll: time.Millisecond,
		Now: now, ProcessAlive: func(int) bool { return false }}
	if _, err := AcquireLock(context.Background(), st, LockOptions{Holder: "dead", Host: "a", PID: 200, TTL: 30 * time.Second,
		Poll: time.Millisecond, Now: now, ProcessAlive: func(int) bool { return false }}); err != nil {
		t.Fatal(err)
	}
	lock, err := AcquireLock(context.Background(), st, opts)
	if err != nil || lock.Previous == nil {
		t.Fatalf("takeover: %v (previous %v)", err, lock.Previous)
	}
	defer lock.Release(context.Background()) //nolint:errcheck // a test's lock
	v := &recordingView{}
	op := &Operation{View: v, Now: now, StatePath: t.TempDir() + "/state.db", Config: &wdchcl.Config{}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = op.recover(ctx, st, lock)
	if !errors.Is(err, ErrInterruptedRecovering) {
		t.Fatalf("recover after an interrupt: %v; want ErrInterruptedRecovering", err)
	}
	if !v.tookOver || !v.reclaimed || v.reclaimErr != nil {
		t.Errorf("view: took over %v, reclaimed %v (error %v); want both told, no error", v.tookOver, v.reclaimed, v.reclaimErr)
	}
}
