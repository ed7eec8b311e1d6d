package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// note is a write that appends one event whose message is msg.
func note(msg string) func(tx *Tx) error {
	return func(tx *Tx) error {
		return appendEvent(context.Background(), tx, Event{Kind: "note", Message: msg}, t0)
	}
}

// notes returns the messages of the note events, in the order written.
func notes(t *testing.T, s *Store) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Kind == "note" {
			out = append(out, e.Message)
		}
	}
	return out
}

// holdCommitter submits a write that blocks the committer until the
// returned function is called, so that writes submitted meanwhile queue
// up and are committed as one group.
func holdCommitter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered, hold := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Write(context.Background(), func(tx *Tx) error {
			close(entered)
			<-hold
			return note("holder")(tx)
		}, nil)
	}()
	<-entered
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("holder: %v", err)
		}
	}
}

// submitQueued submits each write from its own goroutine, one after the
// other (each waits until the previous one is queued), and returns a
// function that waits for all of them and returns their errors in order.
func submitQueued(t *testing.T, s *Store, ctxs []context.Context, fns []func(tx *Tx) error, order *[]int, mu *sync.Mutex) func() []error {
	t.Helper()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		ctx := context.Background()
		if ctxs != nil && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		before := queued(s)
		wg.Go(func() {
			errs[i] = s.Write(ctx, fn, func(error) {
				mu.Lock()
				*order = append(*order, i)
				mu.Unlock()
			})
		})
		for queued(s) == before { // wait until it is in the queue
			time.Sleep(100 * time.Microsecond)
		}
	}
	return func() []error {
		wg.Wait()
		return errs
	}
}

func queued(s *Store) int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue)
}

// TestGroupCommit: writes submitted while the committer is busy are
// committed together, in one transaction that bumps the serial once; they
// run in the order submitted and their after functions are called in that
// order; a failing write rolls back only its own changes; a write whose
// context ended while it waited is not run.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	tests := []struct {
		name      string
		fns       []func(tx *Tx) error
		ctxs      []context.Context
		cancelAt  int // cancel the context of this write once queued (-1: none)
		wantErrs  []error
		wantNotes []string
	}{
		{
			name:      "all succeed",
			fns:       []func(tx *Tx) error{note("a"), note("b"), note("c")},
			cancelAt:  -1,
			wantErrs:  []error{nil, nil, nil},
			wantNotes: []string{"holder", "a", "b", "c"},
		},
		{
			name: "one fails after writing",
			fns: []func(tx *Tx) error{note("a"), func(tx *Tx) error {
				if err := note("b")(tx); err != nil {
					return err
				}
				return boom
			}, note("c")},
			cancelAt:  -1,
			wantErrs:  []error{nil, boom, nil},
			wantNotes: []string{"holder", "a", "c"},
		},
		{
			name:      "one cancelled while queued",
			fns:       []func(tx *Tx) error{note("a"), note("b"), note("c")},
			ctxs:      []context.Context{nil, cancelled, nil},
			cancelAt:  1,
			wantErrs:  []error{nil, context.Canceled, nil},
			wantNotes: []string{"holder", "a", "c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			before := serial(t, s)
			release := holdCommitter(t, s)
			var order []int
			var mu sync.Mutex
			wait := submitQueued(t, s, tt.ctxs, tt.fns, &order, &mu)
			if tt.cancelAt >= 0 {
				cancel()
			}
			release()
			errs := wait()
			for i, err := range errs {
				if !errors.Is(err, tt.wantErrs[i]) || (err == nil) != (tt.wantErrs[i] == nil) {
					t.Errorf("write %d: err %v; want %v", i, err, tt.wantErrs[i])
				}
			}
			if !slices.Equal(order, []int{0, 1, 2}) {
				t.Errorf("after functions ran in order %v; want 0 1 2", order)
			}
			if got := notes(t, s); !slices.Equal(got, tt.wantNotes) {
				t.Errorf("notes %q; want %q", got, tt.wantNotes)
			}
			// The holder's group, then one group for the three.
			if got := serial(t, s) - before; got != 2 {
				t.Errorf("serial moved by %d; want 2 (two commits)", got)
			}
		})
	}
}

// TestGroupCommitBrokenTransaction: a write that ends the shared
// transaction and fails with an error of SQLite (here by ROLLBACK and a
// statement that cannot run; in life SQLite rolls back itself on disk
// full or I/O errors) fails alone, and the writes of its group that had
// already run are run again in a new transaction: each lands exactly once.
func TestGroupCommitBrokenTransaction(t *testing.T) {
	t.Parallel()
	s := setup(t)
	release := holdCommitter(t, s)
	var order []int
	var mu sync.Mutex
	runs := map[string]int{}
	counted := func(msg string) func(tx *Tx) error {
		return func(tx *Tx) error {
			runs[msg]++ // the committer runs one write at a time
			return note(msg)(tx)
		}
	}
	wait := submitQueued(t, s, nil, []func(tx *Tx) error{
		counted("a"),
		func(tx *Tx) error {
			if _, err := tx.tx.ExecContext(context.Background(), `ROLLBACK`); err != nil {
				return err
			}
			// The error SQLite gives the next statement of a transaction
			// it ended itself.
			_, err := tx.ExecContext(context.Background(), `RELEASE no_such_savepoint`)
			return err
		},
		counted("c"),
	}, &order, &mu)
	release()
	errs := wait()
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("errors %v; want only the second write's", errs)
	}
	if got := notes(t, s); !slices.Equal(got, []string{"holder", "a", "c"}) {
		t.Errorf("notes %q; want holder a c", got)
	}
	if runs["a"] != 2 || runs["c"] != 1 {
		t.Errorf("runs %v; want a run twice (its first transaction ended), c once", runs)
	}
	if len(order) != 3 {
		t.Errorf("after functions called %v; want each once", order)
	}
}

// TestGroupCommitPart: a Part that fails before changing anything is left
// out and the write goes on; one that fails after changing rows makes the
// whole write run again once (its first run's changes are rolled back),
// and fail if it does so again.
func TestGroupCommitPart(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	s := setup(t)
	runs := 0
	err := s.Write(context.Background(), func(tx *Tx) error {
		runs++
		if err := tx.Part(func() error { return note("kept")(tx) }); err != nil {
			return err
		}
		if err := tx.Part(func() error { return boom }); !errors.Is(err, boom) {
			return fmt.Errorf("part: %v; want boom", err)
		}
		return note("after")(tx)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := notes(t, s); !slices.Equal(got, []string{"kept", "after"}) || runs != 1 {
		t.Errorf("notes %q after %d runs; want kept after, one run", got, runs)
	}

	s = setup(t)
	runs = 0
	err = s.Write(context.Background(), func(tx *Tx) error {
		runs++
		if err := note("first")(tx); err != nil {
			return err
		}
		return tx.Part(func() error {
			if err := note("undone")(tx); err != nil {
				return err
			}
			return boom
		})
	}, nil)
	if !errors.Is(err, boom) {
		t.Errorf("write whose part failed after writing: %v; want boom", err)
	}
	if got := notes(t, s); len(got) != 0 || runs != 2 {
		t.Errorf("notes %q after %d runs; want none, two runs", got, runs)
	}
}

// TestGroupCommitClose: Close commits what was submitted before it, and a
// write after Close fails with ErrClosed.
func TestGroupCommitClose(t *testing.T) {
	t.Parallel()
	s := setup(t)
	release := holdCommitter(t, s)
	var order []int
	var mu sync.Mutex
	wait := submitQueued(t, s, nil, []func(tx *Tx) error{note("a"), note("b")}, &order, &mu)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release()
	for _, err := range wait() {
		if err != nil {
			t.Errorf("write queued before Close: %v", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), note("late"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v; want ErrClosed", err)
	}
	s2, err := Open(context.Background(), s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := notes(t, s2); !slices.Equal(got, []string{"holder", "a", "b"}) {
		t.Errorf("notes %q; want holder a b", got)
	}
}

// TestGroupCommitReplayLeavesSerial: a group whose writes change no row
// (a result replayed under its key) does not bump the serial.
func TestGroupCommitReplayLeavesSerial(t *testing.T) {
	t.Parallel()
	s := setup(t)
	before := serial(t, s)
	if err := s.Write(context.Background(), func(tx *Tx) error {
		var n int
		return tx.QueryRowContext(context.Background(), `SELECT count(*) FROM tasks`).Scan(&n)
	}, nil); err != nil {
		t.Fatal(err)
	}
	if got := serial(t, s); got != before {
		t.Errorf("serial %d after a write that changed nothing; want %d", got, before)
	}
}

// TestGroupCommitLockLost: under GuardWrites, a group of writes that
// changes rows while the apply lock is not held commits nothing (its
// events neither), and every write of it fails with ErrLockLost; a write
// that changes nothing needs no lock. The check is the group's last
// statement, with the serial's bump.
func TestGroupCommitLockLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	lock, _, err := s.AcquireLock(ctx, LockRequest{Holder: "a", Host: "h", PID: 1, TTL: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	s.GuardWrites(lock.ID)
	if err := s.Write(ctx, note("held"), nil); err != nil {
		t.Fatalf("a write under the held lock: %v", err)
	}
	s.GuardWrites("another-lock")
	_, serialBefore, _ := s.Info(ctx)
	// A held committer makes the writes queued meanwhile one group.
	entered, hold := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- s.Write(ctx, func(tx *Tx) error {
			close(entered)
			<-hold
			return note("holder")(tx)
		}, nil)
	}()
	<-entered
	var mu sync.Mutex
	var order []int
	readOnly := func(tx *Tx) error {
		var n int
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n)
	}
	wait := submitQueued(t, s, nil, []func(tx *Tx) error{note("a"), note("b"), readOnly}, &order, &mu)
	close(hold)
	errs := append(wait(), <-holder)
	for i, err := range []error{errs[0], errs[1], errs[3]} {
		if !errors.Is(err, ErrLockLost) {
			t.Errorf("write %d: %v, want ErrLockLost", i, err)
		}
	}
	if got := notes(t, s); !slices.Equal(got, []string{"held"}) {
		t.Errorf("notes %v, want only the one written under the held lock", got)
	}
	if _, serialAfter, _ := s.Info(ctx); serialAfter != serialBefore {
		t.Errorf("serial %d → %d, want unchanged", serialBefore, serialAfter)
	}
	if err := s.Write(ctx, readOnly, nil); err != nil {
		t.Errorf("a write that changes nothing, alone: %v", err)
	}
}

// A write group's events are written at its end, in the order they were
// appended, however many there are.
func TestGroupEventsInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	var want []string
	err := s.Write(ctx, func(tx *Tx) error {
		for i := range 3*eventsPerStatement + 5 {
			msg := fmt.Sprint(i)
			want = append(want, msg)
			if err := note(msg)(tx); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := notes(t, s); !slices.Equal(got, want) {
		t.Errorf("notes %v, want %v", got, want)
	}
}
