package apply

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/state"
)

func openStore(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestAcquireApplyLock(t *testing.T) {
	ctx := context.Background()
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	alive := map[int]bool{100: true, 200: false}
	opts := func(host string, pid int, wait time.Duration) LockOptions {
		return LockOptions{Holder: "h" + host, Host: host, PID: pid, TTL: 30 * time.Second, Wait: wait, Poll: time.Millisecond,
			Now: now, ProcessAlive: func(p int) bool { return alive[p] }}
	}
	tests := []struct {
		name         string
		holder       LockOptions
		advance      time.Duration
		next         LockOptions
		wantErr      string
		wantTakeover bool
	}{
		{name: "live holder on this host: refused, naming it", holder: opts("a", 100, 0), next: opts("a", 300, 0), wantErr: "locked by ha (host a, pid 100)"},
		{name: "live holder, waiting gives up naming it", holder: opts("a", 100, 0), next: opts("a", 300, 20*time.Millisecond), wantErr: "gave up after waiting 20ms"},
		{name: "dead holder on this host: taken over", holder: opts("a", 200, 0), next: opts("a", 300, 0), wantTakeover: true},
		{name: "holder on another host is not probed", holder: opts("b", 200, 0), next: opts("a", 300, 0), wantErr: "locked by hb"},
		{name: "expired lock: taken over", holder: opts("b", 100, 0), advance: 31 * time.Second, next: opts("a", 300, 0), wantTakeover: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			st := openStore(t)
			first, err := AcquireLock(ctx, st, tt.holder)
			if err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(tt.advance)
			second, err := AcquireLock(ctx, st, tt.next)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, state.ErrLocked) {
					t.Fatalf("err = %v, want ErrLocked containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantTakeover && (second.Previous == nil || second.Previous.ID != first.ID()) {
				t.Fatalf("Previous = %+v, want the first lock %s", second.Previous, first.ID())
			}
			if err := second.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// released: anyone may take it now
			third, err := AcquireLock(ctx, st, opts("c", 400, 0))
			if err != nil || third.Previous != nil {
				t.Fatalf("after release: lock %v, previous %v, err %v", third, third.Previous, err)
			}
		})
	}
}

func TestApplyLockKeepAliveAndLost(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	l, err := AcquireLock(ctx, st, LockOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.KeepAlive(ctx)
	// Wait until the lock was renewed (its expiry moved), then well past its
	// first expiry: renewals keep it held.
	first := l.Lock().ExpiresAt
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := st.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Lock != nil && snap.Lock.ExpiresAt.After(first) && time.Now().After(first.Add(100*time.Millisecond)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock was not renewed past its first expiry within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := AcquireLock(ctx, st, LockOptions{PID: 1}); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("a renewed lock must still be held; got %v", err)
	}
	if _, err := st.ForceUnlock(ctx, l.ID(), time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost was not closed after the lock was forced away")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("releasing a lost lock: %v", err)
	}
}

func TestForceUnlock(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	alive := func(p int) bool { return p == 100 }
	tests := []struct {
		name    string
		host    string // the holder's host (ForceUnlock runs on host "a")
		pid     int
		force   bool
		refused bool
	}{
		{name: "holder alive on this host: refused", host: "a", pid: 100, refused: true},
		{name: "holder alive on this host, --force: removed", host: "a", pid: 100, force: true},
		{name: "holder dead on this host: removed", host: "a", pid: 200},
		{name: "holder on another host: removed", host: "b", pid: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			l, err := AcquireLock(ctx, st, LockOptions{Holder: "me@" + tt.host, Host: tt.host, PID: tt.pid, TTL: time.Minute,
				Now: func() time.Time { return now }, ProcessAlive: alive})
			if err != nil {
				t.Fatal(err)
			}
			_, err = ForceUnlock(ctx, st, l.ID(), "a", tt.force, now, alive)
			snap, serr := st.Snapshot(ctx)
			if serr != nil {
				t.Fatal(serr)
			}
			var refusal *HolderAliveError
			if tt.refused {
				if !errors.As(err, &refusal) || !strings.Contains(err.Error(), "alive (me@a, host a, pid 100") ||
					!strings.Contains(err.Error(), "kill -INT 100") || !strings.Contains(err.Error(), "--force") {
					t.Fatalf("err = %v, want a HolderAliveError naming host, pid, how to stop it and --force", err)
				}
				if snap.Lock == nil || snap.Lock.ID != l.ID() {
					t.Fatal("a refused force-unlock removed the lock")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if snap.Lock != nil {
				t.Fatal("the lock is still there")
			}
		})
	}
}

// TestFenceLock: when the outer lock (a backend's) is lost, the apply's
// own lock is lost at once and the state refuses its next write.
func TestFenceLock(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		fence     bool // the outer lock is lost
		wantWrite error
	}{
		{"outer lock held", false, nil},
		{"outer lock lost", true, state.ErrLockLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			lock, err := AcquireLock(ctx, st, LockOptions{Holder: "h", Host: "h", PID: 1, ProcessAlive: func(int) bool { return true }})
			if err != nil {
				t.Fatal(err)
			}
			st.GuardWrites(lock.ID())
			fence := make(chan struct{})
			done := make(chan struct{})
			go func() { FenceLock(st, lock, fence, time.Now); close(done) }()
			if tc.fence {
				close(fence)
				<-done
				select {
				case <-lock.Lost():
				default:
					t.Fatal("Lost not closed")
				}
			}
			err = st.AppendEvent(ctx, state.Event{Kind: "probe"}, time.Now())
			if !errors.Is(err, tc.wantWrite) {
				t.Fatalf("write = %v, want %v", err, tc.wantWrite)
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
		})
	}
}

func TestEndedState(t *testing.T) {
	for _, c := range []struct {
		stat  string
		ended bool
	}{
		{"1234 (wdc) S 1 1234 1234 0 -1", false},
		{"1234 (wdc) R 1 1234", false},
		{"1234 (wdc) Z 1 1234", true},
		{"1234 (wdc) X 1 1234", true},
		{"1234 (a) Z (b) S 1 1", false}, // the name is "a) Z (b": the last ')' ends it
		{"1234 (a) b) Z 1 1", true},
		{"1234 (wdc)", false},
		{"", false},
		{"garbage", false},
	} {
		if got := endedState([]byte(c.stat)); got != c.ended {
			t.Errorf("endedState(%q) = %v; want %v", c.stat, got, c.ended)
		}
	}
}

// TestProcessAliveZombie: a child that exited and was not waited for
// (a zombie, as an apply killed with SIGKILL is until its parent waits) is
// not alive; a running one is, and a waited-for one is not.
func TestProcessAliveZombie(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep here:", err)
	}
	pid := cmd.Process.Pid
	if !ProcessAlive(pid) {
		t.Fatalf("running child %d judged dead", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not waited for: a zombie once the kill landed.
	deadline := time.Now().Add(10 * time.Second)
	for ProcessAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("killed child %d (a zombie) still judged alive after 10s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("kill(%d, 0): %v; the child should be a zombie until waited for", pid, err)
	}
	cmd.Wait()
	if ProcessAlive(pid) {
		t.Errorf("waited-for child %d judged alive", pid)
	}
}
