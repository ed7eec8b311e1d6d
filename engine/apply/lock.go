package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// DefaultLockTTL is how long the apply lock lives without renewal; the
// holder renews it every third of that.
const DefaultLockTTL = 30 * time.Second

// LockOptions shape how an apply takes the state lock (docs/design.md §3 invariant 9).
type LockOptions struct {
	// Holder names who holds the lock, e.g. "alice@build-7"; default
	// user@host.
	Holder string
	// Host and PID identify this process; defaults os.Hostname() and
	// os.Getpid().
	Host string
	PID  int
	// TTL is the lock's life without renewal (default DefaultLockTTL).
	TTL time.Duration
	// Wait is how long to wait for a lock held by a live apply before
	// failing (--lock-timeout; 0 fails at once).
	Wait time.Duration
	// Poll is the interval between tries while waiting (default 500 ms).
	Poll time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ProcessAlive reports whether pid is alive on this host (default: a
	// signal-0 probe).
	ProcessAlive func(pid int) bool
	// OnWait, when set, is called once, before the first wait, with the
	// lock of the live apply that holds it (only when Wait > 0).
	OnWait func(holder state.Lock)
	// TakeOverAny: the caller holds an outer lock over this state (a
	// backend's), so any lock the state holds is that of an apply that
	// died with the outer lock: it is taken over at once, as a dead one.
	TakeOverAny bool
}

// LockWaitInterruptedError is AcquireLock's error when ctx ended
// while it waited for a lock another apply holds: nothing was changed.
type LockWaitInterruptedError struct {
	Holder state.Lock // the lock it waited for
	Err    error      // ctx's error
}

func (e *LockWaitInterruptedError) Error() string {
	return fmt.Sprintf("interrupted while waiting for the state lock held by %s (host %s, pid %d, lock %s): nothing was changed",
		e.Holder.Holder, e.Holder.Host, e.Holder.PID, e.Holder.ID)
}

// Unwrap returns ctx's error.
func (e *LockWaitInterruptedError) Unwrap() error { return e.Err }

// HeldLock is a held apply lock. Keep it alive with KeepAlive and give it
// back with Release.
type HeldLock struct {
	store *state.Store
	opts  LockOptions
	lock  state.Lock
	// Previous is the lock of a dead apply this one took over, or nil. Its
	// workers' leases must be revoked and retried as lost.
	Previous *state.Lock

	kept     atomic.Bool
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	lost     chan struct{}
	lostOnce sync.Once
}

// markLost closes Lost, once.
func (l *HeldLock) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// ID returns the lock's ID (what `wdc force-unlock` takes).
func (l *HeldLock) ID() string { return l.lock.ID }

// Lock returns the lock row as taken.
func (l *HeldLock) Lock() state.Lock { return l.lock }

// AcquireLock takes the state's apply lock. A lock held by a live
// apply makes it wait up to opts.Wait and then fail with an error naming
// the holder (wrapping state.ErrLocked). A lock whose holder is dead — its
// pid is gone on this host, or its expiry passed — is taken over; the
// returned lock's Previous is then set.
func AcquireLock(ctx context.Context, store *state.Store, opts LockOptions) (*HeldLock, error) {
	opts = opts.withDefaults()
	deadline := time.Now().Add(opts.Wait) // real waiting, whatever opts.Now says
	takeOver := ""
	waited := false // OnWait was called
	for {
		lock, prev, err := store.AcquireLock(ctx, state.LockRequest{
			Holder: opts.Holder, Host: opts.Host, PID: opts.PID, TTL: opts.TTL, TakeOver: takeOver,
		}, opts.Now())
		if err == nil {
			return &HeldLock{store: store, opts: opts, lock: lock, Previous: prev,
				stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}, nil
		}
		var locked *state.LockedError
		if !errors.As(err, &locked) {
			return nil, err
		}
		cur := locked.Lock
		if opts.TakeOverAny && takeOver != cur.ID {
			takeOver = cur.ID
			continue
		}
		if JudgeHolder(cur, opts.Host, opts.PID, opts.Now(), opts.ProcessAlive) == HolderDead {
			takeOver = cur.ID // its holder is dead: take it over on the next try
			continue
		}
		takeOver = ""
		if !time.Now().Before(deadline) {
			if opts.Wait > 0 {
				return nil, fmt.Errorf("gave up after waiting %s: %w", opts.Wait, err)
			}
			return nil, fmt.Errorf("%w (another apply is running; wait with --lock-timeout, or if it is gone for good, run wdc force-unlock %s)", err, cur.ID)
		}
		if opts.OnWait != nil && !waited {
			opts.OnWait(cur)
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, &LockWaitInterruptedError{Holder: cur, Err: ctx.Err()}
		case <-time.After(opts.Poll):
		}
	}
}

// HolderState says whether the apply that holds a lock still runs, as far
// as this host can tell.
type HolderState int

// Holder states (JudgeHolder).
const (
	// HolderLive: the holder runs, or is on another host and renews the
	// lock (its expiry has not passed): wdc trusts the expiry there.
	HolderLive HolderState = iota
	// HolderDead: the lock names this host and a pid that no longer runs.
	HolderDead
	// HolderStalled: the lock's expiry passed: its holder stopped renewing
	// it (paused, hung, or dead on another host).
	HolderStalled
)

// String returns "live", "dead" or "stalled".
func (h HolderState) String() string {
	switch h {
	case HolderDead:
		return "dead"
	case HolderStalled:
		return "stalled"
	default:
		return "live"
	}
}

// JudgeHolder tells whether the holder of lock l is alive, as
// AcquireLock judges it before taking the lock over (docs/design.md §3
// invariant 9): a lock of this host (host) whose pid is not self and does
// not run (alive; nil means ProcessAlive) is dead; one whose expiry is not
// after now is stalled; any other is live. self is the caller's own pid (0
// when it holds no lock).
func JudgeHolder(l state.Lock, host string, self int, now time.Time, alive func(pid int) bool) HolderState {
	if alive == nil {
		alive = ProcessAlive
	}
	if l.Host == host && l.PID != self && !alive(l.PID) {
		return HolderDead
	}
	if !l.ExpiresAt.After(now) {
		return HolderStalled
	}
	return HolderLive
}

// KeepAlive renews the lock every third of its TTL (at most every 2 s)
// until Release. If the
// lock is lost (forced or taken over), Lost is closed.
func (l *HeldLock) KeepAlive(ctx context.Context) {
	if l.kept.Swap(true) {
		return
	}
	go func() {
		defer close(l.done)
		// Renew often enough that a lost lock is noticed within seconds
		// (writes are fenced by the lock anyway: state.GuardWrites).
		t := time.NewTicker(min(l.opts.TTL/3, 2*time.Second))
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := l.store.RenewLock(ctx, l.lock.ID, l.opts.TTL, l.opts.Now()); errors.Is(err, state.ErrLockLost) {
					l.markLost()
					return
				}
			}
		}
	}()
}

// Lost is closed when a renewal found the lock no longer held.
func (l *HeldLock) Lost() <-chan struct{} { return l.lost }

// Release stops renewing and removes the lock. Releasing a lock that was
// lost is not an error.
func (l *HeldLock) Release(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	if l.kept.Load() {
		<-l.done
	}
	err := l.store.ReleaseLock(ctx, l.lock.ID, l.opts.Now())
	if errors.Is(err, state.ErrLockLost) {
		return nil
	}
	return err
}

func (o LockOptions) withDefaults() LockOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTL <= 0 {
		o.TTL = DefaultLockTTL
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.PID == 0 {
		o.PID = os.Getpid()
	}
	if o.Holder == "" {
		name := "unknown"
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		o.Holder = name + "@" + o.Host
	}
	if o.ProcessAlive == nil {
		o.ProcessAlive = ProcessAlive
	}
	return o
}

// HolderAliveError is ForceUnlock's refusal: the apply holding the lock
// runs on this host.
type HolderAliveError struct {
	Lock state.Lock
}

func (e *HolderAliveError) Error() string {
	return fmt.Sprintf("refusing to remove lock %s: the apply holding it is alive (%s, host %s, pid %d, started %s); "+
		"stop it instead (Ctrl-C in its terminal, or kill -INT %d: it drains its workers and releases the lock), "+
		"or pass --force to remove the lock anyway (the apply then stops at its next renewal)",
		e.Lock.ID, e.Lock.Holder, e.Lock.Host, e.Lock.PID, e.Lock.StartedAt.UTC().Format(time.RFC3339), e.Lock.PID)
}

// ForceUnlock removes the state's apply lock lockID by hand (wdc
// force-unlock). A lock whose holder runs on this host (host; its pid is
// alive by alive, nil meaning ProcessAlive) is refused with a
// *HolderAliveError unless force: that apply is there to be stopped, not
// unlocked. A holder on another host cannot be judged from here.
func ForceUnlock(ctx context.Context, store *state.Store, lockID, host string, force bool, now time.Time, alive func(pid int) bool) (state.Lock, error) {
	if alive == nil {
		alive = ProcessAlive
	}
	return store.ForceUnlockIf(ctx, lockID, now, func(l state.Lock) error {
		if !force && l.Host == host && alive(l.PID) {
			return &HolderAliveError{Lock: l}
		}
		return nil
	})
}

// ProcessAlive reports whether a process with pid runs on this host:
// kill(pid, 0) succeeds or is refused for permission, and (where /proc
// tells) the process is not a zombie. An apply killed with SIGKILL stays
// a zombie until its parent waits for it; it runs nothing and holds no
// lock, so it is not alive.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc here, or it went meanwhile: kill said alive
	}
	return !endedState(stat)
}

// endedState reports whether stat, the contents of /proc/PID/stat, gives
// the state of a process that ended: Z (zombie) or X (dead). The state is
// the first field after the command name, which is in parentheses and may
// itself hold spaces and parentheses (proc_pid_stat(5)).
func endedState(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X', 'x':
		return true
	}
	return false
}
