package backend

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

// LockFormatVersion is the format_version of the lock object this wdc
// writes; it reads any 1.x.
const LockFormatVersion = "1.0"

// maxLockSize bounds the lock object wdc reads.
const maxLockSize = 64 << 10

// Lock is the lock object (KEY.lock): who holds the state and until when
// (docs/json.md, "Backend lock object").
type Lock struct {
	FormatVersion string `json:"format_version"`
	// ID is the random ID of this acquisition: the apply's id, what
	// force-unlock takes.
	ID string `json:"id"`
	// Operation is what holds it: "apply", "state push", or the command
	// that writes without an apply ("wdc approve").
	Operation string    `json:"operation"`
	Holder    string    `json:"holder"` // user@host
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// RenewedAt is the last renewal (StartedAt at first); ExpiresAt is
	// RenewedAt + the lock's TTL: past it (on the reader's wall clock)
	// the lock may be taken over.
	RenewedAt time.Time `json:"renewed_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Released is set when its holder gave it back (or force-unlock
	// removed it): the object stays, and the next taker replaces it.
	Released   bool      `json:"released,omitempty"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
	// ForcedBy names who ran force-unlock, when that released it.
	ForcedBy string `json:"forced_by,omitempty"`
}

var lockIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ParseLock decodes and checks a lock object. Unknown fields are ignored;
// a format_version other than 1.x, a missing or malformed field, or
// times out of order is an error saying which.
func ParseLock(data []byte) (Lock, error) {
	if len(data) > maxLockSize {
		return Lock{}, fmt.Errorf("the lock object is %d bytes, more than a lock (%d at most)", len(data), maxLockSize)
	}
	var l Lock
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&l); err != nil {
		return Lock{}, fmt.Errorf("the lock object is not JSON of a wdc lock: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Lock{}, errors.New("the lock object has data after its JSON object")
	}
	major, _, _ := strings.Cut(l.FormatVersion, ".")
	switch {
	case major != "1":
		return Lock{}, fmt.Errorf("the lock object has format_version %q; this wdc reads 1.x", l.FormatVersion)
	case !lockIDPattern.MatchString(l.ID):
		return Lock{}, fmt.Errorf("the lock object's id %q is not 32 lowercase hex digits", l.ID)
	case l.Holder == "" || len(l.Holder) > 1024 || len(l.Host) > 1024 || len(l.Operation) > 64 || len(l.ForcedBy) > 1024:
		return Lock{}, errors.New("the lock object's holder is missing, or a name in it is too long")
	case l.PID < 0:
		return Lock{}, fmt.Errorf("the lock object's pid %d is negative", l.PID)
	case l.StartedAt.IsZero() || l.RenewedAt.IsZero() || l.ExpiresAt.IsZero():
		return Lock{}, errors.New("the lock object lacks started_at, renewed_at or expires_at")
	case l.RenewedAt.Before(l.StartedAt) || l.ExpiresAt.Before(l.RenewedAt):
		return Lock{}, errors.New("the lock object's times are out of order (started_at <= renewed_at <= expires_at)")
	}
	return l, nil
}

// Free reports whether the lock may be taken at now: released, or
// expired.
func (l Lock) Free(now time.Time) bool { return l.Released || !l.ExpiresAt.After(now) }

// Encode returns the lock object as wdc writes it: indented JSON with
// format_version LockFormatVersion.
func (l Lock) Encode() []byte {
	l.FormatVersion = LockFormatVersion
	b, _ := json.MarshalIndent(l, "", "  ")
	return append(b, '\n')
}

// ReadLock returns the lock object and its ETag; nil when there is none.
// An object that is not a lock is an *Error saying what to do.
func (b *S3) ReadLock(ctx context.Context) (*Lock, string, error) {
	key := b.cfg.Key + LockSuffix
	var buf bytes.Buffer
	obj, found, err := b.fetch(ctx, "read the lock", key, &buf, maxLockSize+1, func() error { buf.Reset(); return nil })
	if err != nil || !found {
		return nil, "", err
	}
	l, err := ParseLock(buf.Bytes())
	if err != nil {
		return nil, "", &Error{Backend: b.Name(), Object: key, Op: "read the lock", Err: err,
			Hint: "if no apply is running on this state, remove the object by hand (wdc never overwrites what it cannot read)"}
	}
	return &l, obj.ETag, nil
}

// writeLock writes l as the lock object: on the ETag ifMatch, or only
// when there is none ("").
func (b *S3) writeLock(ctx context.Context, op string, l Lock, ifMatch string) (string, error) {
	data := l.Encode()
	obj, err := b.put(ctx, op, b.cfg.Key+LockSuffix, bytes.NewReader(data), int64(len(data)), "application/json", ifMatch)
	return obj.ETag, err
}

// CheckConditionalWrites makes sure the store refuses a conditional
// create of an object that exists (a store that ignores If-None-Match
// would let two applies hold the lock): it creates KEY.lock.probe if
// missing, then creates it again, which must fail. Errors wrap
// ErrNoConditionalWrites, or are the store's.
func (b *S3) CheckConditionalWrites(ctx context.Context) error {
	key := b.cfg.Key + LockSuffix + ".probe"
	data := []byte("wdc checks that this store refuses a second conditional create of this object\n")
	for i := range 2 {
		_, err := b.put(ctx, "check conditional writes", key, bytes.NewReader(data), int64(len(data)), "text/plain", "")
		switch {
		case errors.Is(err, ErrConflict):
			return nil
		case err != nil:
			return err
		case i == 1:
			return &Error{Backend: b.Name(), Object: key, Op: "check conditional writes", Err: ErrNoConditionalWrites,
				Hint: "it accepted If-None-Match: * over an object that exists, so it cannot hold a lock; use a store that refuses it (AWS S3, MinIO, Ceph RGW, SeaweedFS, …)"}
		}
	}
	return nil
}

// LockRequest asks for the backend's lock.
type LockRequest struct {
	Operation string // "apply", "state push"
	Holder    string
	Host      string
	PID       int
	// Wait is how long to wait for a lock another holder renews
	// (--lock-timeout; 0 fails at once).
	Wait time.Duration
	// Poll is the interval between tries while waiting (default 1 s).
	Poll time.Duration
	// TakeOver names the ID of a lock found dead (its pid is gone on
	// this host): it is taken even before it expires.
	TakeOver func(Lock) bool
	// OnWait is called once, before the first wait, with the holder.
	OnWait func(Lock)
}

// LockedError is AcquireLock's error when another holder has the lock.
type LockedError struct {
	Backend string
	Lock    Lock
	Waited  time.Duration
	// Hint, when set, says what to do in place of the default (wait
	// with --lock-timeout, or force-unlock), for a command that cannot
	// wait.
	Hint string
}

func (e *LockedError) Error() string {
	l := e.Lock
	s := fmt.Sprintf("backend %s is locked by %s (%s, host %s, pid %d) since %s, until %s unless renewed; lock ID %s",
		e.Backend, l.Holder, l.Operation, l.Host, l.PID, l.StartedAt.UTC().Format(time.RFC3339), l.ExpiresAt.UTC().Format(time.RFC3339), l.ID)
	switch {
	case e.Waited > 0:
		return fmt.Sprintf("gave up after waiting %s: %s", e.Waited, s)
	case e.Hint != "":
		return s + ": " + e.Hint
	}
	return s + " (another apply is running; wait with --lock-timeout, or if it is gone for good, run wdc force-unlock " + l.ID + ")"
}

// ErrLocked is wrapped by a *LockedError.
var ErrLocked = errors.New("the backend is locked")

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// HeldLock is the backend's lock, held. KeepAlive renews it; Release
// gives it back.
type HeldLock struct {
	b    *S3
	mu   sync.Mutex
	lock Lock
	etag string
	// Previous is the lock this one replaced when it had not been
	// released: its holder died (or stopped renewing) without giving it
	// back. Nil otherwise.
	Previous *Lock

	lostOnce sync.Once
	lost     chan struct{}
	lostWhy  error
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	kept     bool
}

// AcquireLock takes the backend's lock for req, on the wall clock: with
// a conditional create when there is no lock object, else with a
// conditional write on the ETag of a lock that is free (released or
// expired) or that req.TakeOver finds dead. A lock another holder keeps
// makes it wait up to req.Wait, then fail with a *LockedError. The store
// is checked first to refuse a conditional write that should fail
// (CheckConditionalWrites).
func (b *S3) AcquireLock(ctx context.Context, req LockRequest) (*HeldLock, error) {
	if req.Poll <= 0 {
		req.Poll = time.Second
	}
	if err := b.CheckConditionalWrites(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(req.Wait)
	waited := false
	for {
		cur, etag, err := b.ReadLock(ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if cur == nil || cur.Free(now) || (req.TakeOver != nil && req.TakeOver(*cur)) {
			l := Lock{ID: newID(), Operation: req.Operation, Holder: req.Holder, Host: req.Host, PID: req.PID,
				StartedAt: now.UTC(), RenewedAt: now.UTC(), ExpiresAt: now.Add(b.cfg.LockTTL).UTC()}
			op := "take the lock"
			newTag, err := b.writeLock(ctx, op, l, etag)
			if errors.Is(err, ErrConflict) {
				continue // someone else moved first: look again
			}
			if err != nil {
				return nil, err
			}
			h := &HeldLock{b: b, lock: l, etag: newTag, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
			if cur != nil && !cur.Released {
				prev := *cur
				h.Previous = &prev
			}
			return h, nil
		}
		if !time.Now().Before(deadline) {
			e := &LockedError{Backend: b.Name(), Lock: *cur}
			if req.Wait > 0 {
				e.Waited = req.Wait
			}
			return nil, e
		}
		if req.OnWait != nil && !waited {
			req.OnWait(*cur)
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(req.Poll, time.Until(deadline)+time.Millisecond)):
		}
	}
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Lock returns the lock as last written.
func (h *HeldLock) Lock() Lock {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lock
}

// ID is the lock's ID.
func (h *HeldLock) ID() string { return h.Lock().ID }

// Renew moves the lock's expiry to now + the TTL with a conditional write
// on its ETag. A lock that changed (forced, taken over) is lost: Lost is
// closed and the error wraps ErrLockLost.
func (h *HeldLock) Renew(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.lost:
		return h.lostWhy
	default:
	}
	now := time.Now()
	// (a margin of one renewal: a taker's clock may run ahead of ours)
	if !h.lock.ExpiresAt.Add(-h.RenewInterval()).After(now) {
		h.markLost(fmt.Errorf("%w: it expired at %s before it could be renewed", ErrLockLost, h.lock.ExpiresAt.UTC().Format(time.RFC3339)))
		return h.lostWhy
	}
	l := h.lock
	l.RenewedAt, l.ExpiresAt = now.UTC(), now.Add(h.b.cfg.LockTTL).UTC()
	etag, err := h.b.writeLock(ctx, "renew the lock", l, h.etag)
	if errors.Is(err, ErrConflict) {
		h.markLost(fmt.Errorf("%w: it was removed (wdc force-unlock) or taken over", ErrLockLost))
		return h.lostWhy
	}
	if err != nil {
		return err
	}
	h.lock, h.etag = l, etag
	return nil
}

// ErrLockLost: the lock is no longer this holder's.
var ErrLockLost = errors.New("the backend lock was lost")

// markLost closes Lost once, with why. h.mu is held.
func (h *HeldLock) markLost(why error) {
	h.lostOnce.Do(func() {
		h.lostWhy = &Error{Backend: h.b.Name(), Object: h.b.cfg.Key + LockSuffix, Err: why,
			Hint: "this apply stopped granting leases; what it did since its last checkpoint is not in the backend"}
		close(h.lost)
	})
}

// Abandon gives the lock up as lost, for why (a write of the state found
// that another writer replaced it): Lost is closed. The lock object is
// left as it is.
func (h *HeldLock) Abandon(why error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.markLost(why)
}

// Lost is closed when the lock is lost: a renewal found it replaced, or
// it could not be renewed before it expired.
func (h *HeldLock) Lost() <-chan struct{} { return h.lost }

// LostError says why the lock was lost (nil while it is held).
func (h *HeldLock) LostError() error {
	select {
	case <-h.lost:
		return h.lostWhy
	default:
		return nil
	}
}

// RenewInterval is how often KeepAlive renews: a sixth of the TTL, at
// most every 10 s and at least every 100 ms.
func (h *HeldLock) RenewInterval() time.Duration {
	return max(min(h.b.cfg.LockTTL/6, 10*time.Second), 100*time.Millisecond)
}

// KeepAlive renews the lock every RenewInterval, on the wall clock, until
// Release or until it is lost. A renewal that fails for another reason
// (the network) is tried again at the next tick; when none succeeded
// before the lock expires, the lock is lost.
func (h *HeldLock) KeepAlive() {
	h.mu.Lock()
	if h.kept {
		h.mu.Unlock()
		return
	}
	h.kept = true
	h.mu.Unlock()
	go func() {
		defer close(h.done)
		t := time.NewTicker(h.RenewInterval())
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-h.lost:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), h.RenewInterval()*2)
				h.Renew(ctx) //nolint:errcheck // a lost lock closes Lost; other errors are tried again
				cancel()
			}
		}
	}()
}

// Release stops renewing and gives the lock back: a conditional write on
// its ETag marks it released. A lock that was lost is not an error.
func (h *HeldLock) Release(ctx context.Context) error {
	h.stopOnce.Do(func() { close(h.stop) })
	h.mu.Lock()
	kept := h.kept
	h.mu.Unlock()
	if kept {
		<-h.done
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.LostErrorLocked() != nil {
		return nil
	}
	l := h.lock
	now := time.Now().UTC()
	l.Released, l.ReleasedAt = true, now
	if l.RenewedAt.After(now) {
		now = l.RenewedAt
	}
	l.ExpiresAt = now
	_, err := h.b.writeLock(ctx, "release the lock", l, h.etag)
	if errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// LostErrorLocked is LostError with h.mu held.
func (h *HeldLock) LostErrorLocked() error {
	select {
	case <-h.lost:
		return h.lostWhy
	default:
		return nil
	}
}

// ForceUnlock marks the lock with the given ID released, whoever holds
// it (wdc force-unlock), after check (when not nil) accepts it, and
// returns it. The holder finds out at its next renewal and stops. Errors:
// one wrapping ErrNoLock when the lock object has another ID or none.
func (b *S3) ForceUnlock(ctx context.Context, id, by string, check func(Lock) error) (Lock, error) {
	for {
		cur, etag, err := b.ReadLock(ctx)
		if err != nil {
			return Lock{}, err
		}
		if cur == nil || cur.ID != id || cur.Released {
			return Lock{}, &Error{Backend: b.Name(), Object: b.cfg.Key + LockSuffix, Op: "force-unlock",
				Err: fmt.Errorf("%w: no lock with ID %s is held", ErrNoLock, id)}
		}
		if check != nil {
			if err := check(*cur); err != nil {
				return Lock{}, err
			}
		}
		l := *cur
		now := time.Now().UTC()
		l.Released, l.ReleasedAt, l.ForcedBy = true, now, by
		if l.RenewedAt.After(now) {
			now = l.RenewedAt
		}
		l.ExpiresAt = now
		_, err = b.writeLock(ctx, "force-unlock", l, etag)
		if errors.Is(err, ErrConflict) {
			continue // renewed meanwhile: look again
		}
		if err != nil {
			return Lock{}, err
		}
		return *cur, nil
	}
}

// ErrNoLock: force-unlock named a lock that is not held.
var ErrNoLock = errors.New("no such lock")
