package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/engine/testclock"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

// Operation is one `wdc apply` from the state file to the summary, as
// Terraform's local backend runs an apply operation: open and check the
// state, take the lock (taking over a dead apply's), check a saved plan
// against the state, stop what an earlier apply left running and recover
// its leases, plan (or take the saved plan), confirm, carry the plan out
// (Run), and give the lock back. The caller parses flags, renders what
// the View is told, and reads the configuration; the Operation decides
// nothing from flags it was not given and writes to no terminal.
type Operation struct {
	// Config is the validated configuration.
	Config *wdchcl.Config
	// StatePath is the state file; it is created when missing (but not
	// for a saved plan made against a state that exists).
	StatePath string
	// Serve says where the coordinator listens (see Listen).
	Serve httpapi.ListenSettings
	// Saved, when set, is a saved plan rebuilt against Config (Lineage and
	// Serial those of the state it was made from): it is carried out
	// exactly, without confirmation, and refused when the state moved on.
	// SavedName names its file in refusals.
	Saved     *plan.Plan
	SavedName string
	// Replace lists the addresses to run again (PlanOptions.Replace);
	// unused with Saved.
	Replace []string
	// LockTimeout is how long to wait for a lock another live apply holds
	// (0: fail at once). The lock is taken, renewed and judged on the wall
	// clock, never on Now.
	LockTimeout time.Duration
	// Confirm, when set, is asked once the plan is shown and has changes
	// (never for a saved plan); false cancels with ErrApplyCancelled.
	Confirm func(*plan.Plan) (bool, error)
	// View is told what happens, in order; required.
	View OperationView
	// Now is the clock of every decision (default time.Now).
	Now func() time.Time
	// SkipWaits, when set, is the clock of every decision instead of Now,
	// jumped over the waits that only wait (Options.SkipWaits): `wdc
	// test`'s clock.
	SkipWaits *testclock.Clock
	// Faults injects faults (Options.Faults): `wdc test`'s.
	Faults Faults
	// Redact rewrites error texts workers report (Options.Redact).
	Redact func(string) string
	// Abort, when closed, stops at once (a second interrupt): workers are
	// killed instead of drained. Cancelling Run's ctx stops cleanly.
	Abort <-chan struct{}
	// Fence, when closed, says that a lock held outside this state (a
	// backend's lock over this working copy of its state) was lost: the
	// apply stops as for the loss of its own lock, at once. Its own lock
	// row is removed, so that the state refuses every later write of
	// this apply (the next grant of a lease included), its workers are
	// killed, and View.LockLost is told. Nil for no outer lock.
	Fence <-chan struct{}
	// Checkpoints, when set, receives checkpoints of the state while the
	// apply runs (a backend's store): consistent copies, at most every
	// CheckpointInterval while the state changes, early when half of the
	// reserved fencing tokens are used, and one at the end once the lock
	// is given back. Before the first grant, the counter skips past the
	// tokens the state had reserved (a dead apply may have granted them
	// after the checkpoint it came from), and every checkpoint reserves
	// TokenBlock more: the apply grants only tokens a checkpoint it put
	// had reserved. Any lock the state holds is taken over at once (the
	// caller holds the outer lock). Nil: no checkpoints (a local state).
	Checkpoints        Checkpointer
	CheckpointInterval time.Duration // default DefaultCheckpointInterval
	TokenBlock         int64         // default DefaultTokenBlock

	cps *checkpoints
}

// OperationView is told what an Operation does, in order, from Run's
// goroutine (coordinator.Event and Serving also from the apply's own goroutines, one
// call at a time).
type OperationView interface {
	// LockWaiting: another live apply holds the lock; Run waits up to
	// LockTimeout for it.
	LockWaiting(holder state.Lock, wait time.Duration)
	// LockLost: the lock was removed or taken over while applying; Run
	// stops its workers and writes nothing more.
	LockLost()
	// TookOver: the lock was a dead apply's (dead: its pid is gone on this
	// host; else it stopped renewing it).
	TookOver(previous state.Lock, dead bool)
	// Reclaimed: what an earlier apply left running was stopped (err: it
	// could not be, which does not stop the apply).
	Reclaimed(r ReclaimResult, err error)
	// Recovered: the leases an earlier apply left were ended (lost +
	// unstarted > 0): lost of them revoked, their attempts lost, and
	// unstarted prefetched ones whose start no worker reported, handed
	// back at no cost.
	Recovered(lost, unstarted int)
	// Planned: the plan to carry out, with the diagnostics of planning
	// (nil for a saved plan). An error of the view stops Run.
	Planned(p *plan.Plan, diags hcl.Diagnostics) error
	// Started: confirmed; the apply begins (an interrupt from now on
	// drains its workers; before, it cancels).
	Started()
	// Serving: the coordinator listens (Options.OnServing).
	Serving(ep *httpapi.Endpoint)
	// Event: progress (Options.OnEvent).
	Event(e coordinator.Event)
}

var (
	// ErrApplyCancelled: Confirm said no; nothing was carried out.
	ErrApplyCancelled = errors.New("apply cancelled")
	// ErrPlanFailed: planning found errors (given to View.Planned);
	// nothing was carried out.
	ErrPlanFailed = errors.New("the plan has errors")
	// ErrInterruptedLocking: Run's ctx ended while it took the lock;
	// nothing was changed.
	ErrInterruptedLocking = errors.New("interrupted while taking the state lock: nothing was changed")
	// ErrInterruptedRecovering: Run's ctx ended while it recovered what an
	// earlier apply left (after a lock takeover); what it stopped stays
	// stopped, and the next apply recovers the rest.
	ErrInterruptedRecovering = errors.New("interrupted while recovering what an earlier apply left: no task was run; the next apply recovers the rest")
)

// SavedPlanError refuses a saved plan: the state it was made for moved on
// or is not there.
type SavedPlanError struct {
	Name string // the plan file
	Err  error
}

func (e *SavedPlanError) Error() string {
	return fmt.Sprintf("refusing the saved plan %s: %v", e.Name, e.Err)
}

func (e *SavedPlanError) Unwrap() error { return e.Err }

// Run carries the operation out. It returns the apply's result (NoChanges
// set when the plan had none) or an error: ErrApplyCancelled,
// ErrPlanFailed, ErrInterruptedLocking, ErrInterruptedRecovering, a *LockWaitInterruptedError, a
// *SavedPlanError, the state's errors, or those of Run.
func (op *Operation) Run(ctx context.Context) (res *Result, err error) {
	if op.SkipWaits != nil {
		op.Now = op.SkipWaits.Now
	}
	if op.Now == nil {
		op.Now = time.Now
	}
	if op.Saved != nil && op.Saved.Lineage != "" {
		if _, err := os.Stat(op.StatePath); errors.Is(err, fs.ErrNotExist) {
			return nil, op.refuse(fmt.Errorf("it was made for the state with lineage %s, and there is no state file at %s (check --state)",
				op.Saved.Lineage, op.StatePath))
		}
	}
	// A state file that is not there yet is made only once its plan is
	// confirmed: answering no leaves nothing behind.
	early, err := op.planBeforeCreating()
	if err != nil {
		return nil, err
	}
	if early != nil {
		if !early.HasChanges() {
			return &Result{NoChanges: true}, nil
		}
		if err := op.confirm(early); err != nil {
			return nil, err
		}
	}
	store, err := state.Open(context.Background(), op.StatePath)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	// A damaged state is refused before anything is written (the lock
	// included); a read or write that finds damage later says the same.
	if err := store.QuickCheck(ctx); err != nil {
		return nil, err
	}
	if err := op.checkSaved(ctx, store); err != nil {
		return nil, err
	}
	_, startSerial, err := store.Info(ctx)
	if err != nil {
		return nil, err
	}
	lock, err := op.lock(ctx, store)
	if err != nil {
		return nil, err
	}
	if op.Faults != nil {
		op.Faults.StateLocked(store)
	}
	if op.Checkpoints != nil {
		op.cps = op.newCheckpoints(store, lock)
	}
	defer func() {
		lock.Release(context.Background()) //nolint:errcheck // reported by the next apply if it failed
		if op.cps != nil {
			// The last checkpoint, without the lock row: the next apply
			// finds the state as this one left it.
			if ferr := op.cps.final(startSerial); ferr != nil && err == nil {
				err = ferr
			}
		}
	}()
	// The view hears of a lost lock once: from the lock's renewal, or
	// from the run that found it lost first (a write the state refused).
	var lostOnce sync.Once
	lockLost := func() { lostOnce.Do(op.View.LockLost) }
	go func() {
		select {
		case <-lock.Lost():
			// Run sees LockLost too: it kills the workers and writes
			// nothing more.
			lockLost()
		case <-ctx.Done():
		}
	}()
	if err := op.recover(ctx, store, lock); err != nil {
		return nil, err
	}
	planned := early
	if planned != nil {
		// Made against no state and confirmed: it holds while the state
		// this apply made (or found made meanwhile, by an apply that has
		// not written to it) is empty. Made with no hash key, as a saved
		// plan made with no state (checkSaved).
		snap, err := op.stillEmpty(ctx, store)
		if err != nil {
			return nil, err
		}
		plan.Rekey(planned, op.Config, snap.HashKey)
	} else {
		if planned, err = op.plan(ctx, store); err != nil || !planned.HasChanges() {
			return &Result{NoChanges: err == nil}, err
		}
		if err := op.confirm(planned); err != nil {
			return nil, err
		}
	}
	op.View.Started()
	res, err = op.apply(ctx, store, lock, planned)
	if errors.Is(err, state.ErrLockLost) {
		lockLost()
	}
	return res, err
}

// planBeforeCreating plans against no state (showing the plan) when there
// is no state file at StatePath yet and a plan that is not saved is to be
// confirmed; otherwise it returns nil, and Run plans against the state as
// it finds it.
func (op *Operation) planBeforeCreating() (*plan.Plan, error) {
	if op.Confirm == nil || op.Saved != nil {
		return nil, nil
	}
	if _, err := os.Lstat(op.StatePath); !errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return op.planAgainst(state.EmptySnapshot())
}

// confirm asks Confirm, when set, about planned unless it is a saved plan
// (saving it was the review): ErrApplyCancelled when the answer is no.
func (op *Operation) confirm(planned *plan.Plan) error {
	if op.Confirm == nil || op.Saved != nil {
		return nil
	}
	ok, err := op.Confirm(planned)
	if err != nil {
		return err
	}
	if !ok {
		return ErrApplyCancelled
	}
	return nil
}

// ErrStateMadeMeanwhile refuses a plan confirmed against no state when,
// by the time this apply held the lock of the state it made, another
// apply had made that state and written to it.
var ErrStateMadeMeanwhile = errors.New("another apply made the state and wrote to it while this one waited for confirmation; nothing was carried out: run wdc apply again to plan against it")

// stillEmpty returns store's snapshot, or ErrStateMadeMeanwhile when it
// holds a pool, worker, task, lease, proposal or dependency record.
func (op *Operation) stillEmpty(ctx context.Context, store *state.Store) (*state.Snapshot, error) {
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if len(snap.Pools)+len(snap.Workers)+len(snap.Tasks)+len(snap.LatestLeases)+len(snap.Proposals)+len(snap.EdgeRecords) > 0 {
		return nil, ErrStateMadeMeanwhile
	}
	return snap, nil
}

func (op *Operation) refuse(err error) error {
	return &SavedPlanError{Name: op.SavedName, Err: err}
}

// checkSaved refuses a saved plan whose state moved: another lineage
// (another state file) or another serial (something wrote it since), and
// attaches the approved proposals it runs, read from that state.
func (op *Operation) checkSaved(ctx context.Context, store *state.Store) error {
	if op.Saved == nil {
		return nil
	}
	lineage, serial, err := store.Info(ctx)
	if err != nil {
		return err
	}
	if err := CheckStateFresh(op.Saved, lineage, serial); err != nil {
		return op.refuse(err)
	}
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return err
	}
	if op.Saved.Lineage == "" {
		// Made with no state, so with no hash key: this state is new,
		// and its own key is the one its records are keyed with.
		plan.Rekey(op.Saved, op.Config, snap.HashKey)
	}
	if err := plan.AttachProposals(op.Saved, snap); err != nil {
		return op.refuse(err)
	}
	return nil
}

// CheckStateFresh refuses a saved plan p whose state moved: another
// lineage (another state file) or another serial (something wrote it
// since the plan was made).
func CheckStateFresh(p *plan.Plan, lineage string, serial int64) error {
	switch {
	case p.Lineage == "" && serial == 0:
		return nil // planned against an absent state; this one is new and untouched
	case p.Lineage == "":
		return fmt.Errorf("the plan was made when there was no state, but the state now exists (lineage %s, serial %d): save a new plan (wdc plan --out FILE)", lineage, serial)
	case p.Lineage != lineage:
		return fmt.Errorf("the plan was made for another state (lineage %s; this state is %s): check --state, or save a new plan", p.Lineage, lineage)
	case p.Serial != serial:
		return fmt.Errorf("the state changed since the plan was made (serial %d, now %d): save a new plan (wdc plan --out FILE) and review it", p.Serial, serial)
	}
	return nil
}

// lock takes the apply lock, keeps it alive and guards every later write
// with it. A ctx that ends before the lock is held (the first interrupt)
// gives it back untouched: ErrInterruptedLocking.
func (op *Operation) lock(ctx context.Context, store *state.Store) (*HeldLock, error) {
	lock, err := AcquireLock(ctx, store, LockOptions{Wait: op.LockTimeout, TakeOverAny: op.Checkpoints != nil, OnWait: func(l state.Lock) {
		op.View.LockWaiting(l, op.LockTimeout)
	}})
	var waitErr *LockWaitInterruptedError
	switch {
	case errors.As(err, &waitErr):
		return nil, waitErr
	case err != nil && ctx.Err() != nil:
		return nil, ErrInterruptedLocking
	case err != nil:
		return nil, fmt.Errorf("acquiring the state lock: %w", err)
	}
	if ctx.Err() != nil {
		// The lock came as the interrupt did: give it back untouched.
		lock.Release(context.Background()) //nolint:errcheck // the next apply takes it over if this failed
		return nil, ErrInterruptedLocking
	}
	lock.KeepAlive(context.Background())
	// From here on every write of this apply checks, in its own
	// transaction, that the lock is still ours.
	store.GuardWrites(lock.ID())
	if op.Fence != nil {
		go FenceLock(store, lock, op.Fence, op.Now)
	}
	if op.Saved != nil {
		// Taking the lock does not move the serial; anything that did
		// means another apply ran between the check and the lock.
		_, serial, err := store.Info(ctx)
		if err == nil && serial != op.Saved.Serial {
			err = op.refuse(fmt.Errorf("the state changed while taking the lock (serial %d, now %d): save a new plan", op.Saved.Serial, serial))
		}
		if err != nil {
			lock.Release(context.Background()) //nolint:errcheck // as above
			return nil, err
		}
	}
	return lock, nil
}

// recover ends what an earlier apply left: the launches it left running
// are stopped by their providers (under this lock no other apply's worker
// is legitimate), and its active leases are revoked and retried as lost.
func (op *Operation) recover(ctx context.Context, store *state.Store, lock *HeldLock) error {
	now := op.Now()
	if prev := lock.Previous; prev != nil {
		h, _ := os.Hostname()
		op.View.TookOver(*prev, JudgeHolder(*prev, h, os.Getpid(), now, nil) == HolderDead)
	}
	rec, err := ReclaimStrays(ctx, store, filepath.Dir(op.StatePath), lock.ID(), ProviderSettings(op.Config), now)
	if ctx.Err() != nil {
		op.View.Reclaimed(rec, nil) // what it stopped before the interrupt
		return ErrInterruptedRecovering
	}
	op.View.Reclaimed(rec, err)
	lost, unstarted, err := RecoverState(ctx, store, "the apply that granted the lease is gone", now)
	if err != nil {
		if ctx.Err() != nil {
			return ErrInterruptedRecovering // its one write was not made
		}
		return err
	}
	if lost+unstarted > 0 {
		op.View.Recovered(lost, unstarted)
	}
	return nil
}

// plan computes the plan against the state as it now is, under the lock
// (or takes the saved one), and shows it.
func (op *Operation) plan(ctx context.Context, store *state.Store) (*plan.Plan, error) {
	if op.Saved != nil {
		return op.Saved, op.View.Planned(op.Saved, nil)
	}
	snap, err := store.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return op.planAgainst(snap)
}

// planAgainst plans against snap and shows the plan: ErrPlanFailed when
// planning found errors.
func (op *Operation) planAgainst(snap *state.Snapshot) (*plan.Plan, error) {
	planned, diags := plan.New(op.Config, snap, op.Now(), plan.Options{Replace: op.Replace})
	if err := op.View.Planned(planned, diags); err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, ErrPlanFailed
	}
	return planned, nil
}

// apply carries plan out (Run) with the lock held.
func (op *Operation) apply(ctx context.Context, store *state.Store, lock *HeldLock, planned *plan.Plan) (*Result, error) {
	lineage, _, err := store.Info(ctx)
	if err != nil {
		return nil, err
	}
	pools, tasks := Inputs(op.Config, planned)
	if op.cps != nil {
		if err := op.startCheckpoints(ctx); err != nil {
			return nil, err
		}
		defer op.cps.halt()
	}
	return Run(ctx, Options{
		Store:           store,
		Plan:            planned,
		Pools:           pools,
		Tasks:           tasks,
		Serve:           op.Serve,
		MaxArtifactSize: op.Config.Settings.MaxArtifactSize,
		ApplyID:         lock.ID(),
		Lineage:         lineage,
		OnServing:       op.View.Serving,
		LockLost:        lock.Lost(),
		WorkDir:         filepath.Dir(op.StatePath),
		Now:             op.Now,
		SkipWaits:       op.SkipWaits,
		Faults:          op.Faults,
		OnEvent:         op.View.Event,
		Redact:          op.Redact,
		Abort:           op.Abort,
		Config:          op.Config,
		SavedPlan:       op.Saved != nil,
	})
}

// FenceLock ties lock, this apply's lock of store, to an outer lock: when
// fence is closed (the outer lock was lost) before lock is released, the
// lock row is removed, so that the state refuses every later write of
// this apply (GuardWrites: the next grant of a lease included), and Lost
// is closed, which stops the apply as for the loss of its own lock. It
// returns when either happened.
func FenceLock(store *state.Store, lock *HeldLock, fence <-chan struct{}, now func() time.Time) {
	select {
	case <-fence:
	case <-lock.stop:
		return
	}
	store.ForceUnlock(context.Background(), lock.ID(), now()) //nolint:errcheck // the lock may be released already
	lock.markLost()
}

// newCheckpoints makes the checkpoints of this apply (Checkpoints).
func (op *Operation) newCheckpoints(store *state.Store, lock *HeldLock) *checkpoints {
	c := &checkpoints{store: store, put: op.Checkpoints, interval: op.CheckpointInterval, block: op.TokenBlock,
		lost: lock.Lost(), stop: make(chan struct{}), done: make(chan struct{})}
	if c.interval <= 0 {
		c.interval = DefaultCheckpointInterval
	}
	if c.block <= 0 {
		c.block = DefaultTokenBlock
	}
	c.onFail = func(err error) { op.View.Event(checkpointFailedEvent(err, op.Now())) }
	return c
}

// startCheckpoints moves the fencing counter past the tokens the state
// had reserved, makes the first checkpoint (which reserves the first
// block; tried three times: without it nothing can be granted), and
// starts the periodic ones.
func (op *Operation) startCheckpoints(ctx context.Context) error {
	if _, _, err := op.cps.store.SkipReservedTokens(ctx); err != nil {
		return err
	}
	var err error
	for try := range 3 {
		if err = op.cps.checkpoint(ctx); err == nil {
			break
		}
		select {
		case <-op.cps.lost:
			return err
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try+1) * time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("the first checkpoint, which reserves the fencing tokens, failed: %w", err)
	}
	go op.cps.run()
	return nil
}
