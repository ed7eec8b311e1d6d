package state

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var hashA, hashB = strings.Repeat("a", 64), strings.Repeat("b", 64)

// TestLaunchRegistersOnce: a launch's credential registers one worker; a
// second registration, or one after the launch expired, is refused, and
// nothing of it is written.
func TestLaunchRegistersOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	for _, seq := range []int{1, 2} {
		h := map[int]string{1: hashA, 2: hashB}[seq]
		if err := s.RecordLaunch(ctx, Launch{ApplyID: "ap", Pool: "p", Seq: seq, Provider: "local"}, h, t0); err != nil {
			t.Fatal(err)
		}
	}
	proc := LaunchProcess{Handle: "pid:42", Host: "h", PID: 42, Start: "12345", Argv: []string{"wdc", "agent"}, WorkDir: "/w"}
	if err := s.SetLaunchProcess(ctx, "ap", "p", 1, proc); err != nil {
		t.Fatal(err)
	}
	reg := func(id string, seq int) error {
		_, err := s.RegisterWorker(ctx, Worker{ID: id, Pool: "p", Capacity: 1, HeartbeatInterval: time.Second, TTL: 5 * time.Second,
			ApplyID: "ap", LaunchSeq: seq}, t0.Add(time.Second))
		return err
	}
	if err := reg("w-one", 1); err != nil {
		t.Fatal(err)
	}
	if err := reg("w-again", 1); !errors.Is(err, ErrLaunchUsed) {
		t.Errorf("second registration of launch 1: %v; want ErrLaunchUsed", err)
	}
	if _, err := s.Worker(ctx, "w-again"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused worker was recorded: %v", err)
	}
	if ok, err := s.CloseLaunch(ctx, "ap", "p", 2, LaunchExpired, t0.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("CloseLaunch = %v, %v", ok, err)
	}
	if err := reg("w-late", 2); !errors.Is(err, ErrLaunchUsed) {
		t.Errorf("registration after expiry: %v; want ErrLaunchUsed", err)
	}
	if ok, err := s.CloseLaunch(ctx, "ap", "p", 1, LaunchExpired, t0.Add(time.Minute)); ok || err != nil {
		t.Errorf("closing a registered launch = %v, %v; want false (it registered first)", ok, err)
	}
	if _, err := s.CloseLaunch(ctx, "ap", "p", 1, LaunchRegistered, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("closing as registered: %v", err)
	}
	w, err := s.Worker(ctx, "w-one")
	if err != nil || w.ApplyID != "ap" || w.LaunchSeq != 1 {
		t.Errorf("worker %+v, %v", w, err)
	}
	open, err := s.OpenLaunches(ctx, "other")
	if err != nil || len(open) != 2 {
		t.Fatalf("open launches %+v, %v", open, err)
	}
	want := Launch{ApplyID: "ap", Pool: "p", Seq: 1, Provider: "local", Status: LaunchRegistered, Process: proc, WorkerID: "w-one",
		LaunchedAt: t0, RegisteredAt: t0.Add(time.Second)}
	if d := cmp.Diff(want, open[0]); d != "" {
		t.Errorf("launch 1 (-want +got):\n%s", d)
	}
	if open[1].Status != LaunchExpired {
		t.Errorf("launch 2 is %s", open[1].Status)
	}
	if err := s.EndLaunches(ctx, "ap", "p", []int{1}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if open, _ := s.OpenLaunches(ctx, "other"); len(open) != 1 || open[0].Seq != 2 {
		t.Errorf("after ending launch 1: %+v", open)
	}
	if open, _ := s.OpenLaunches(ctx, "ap"); len(open) != 0 {
		t.Errorf("launches of the excepted apply: %+v", open)
	}
	if err := s.RecordLaunch(ctx, Launch{ApplyID: "ap", Pool: "nope", Seq: 3, Provider: "local"}, strings.Repeat("c", 64), t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("launch of an unknown pool: %v", err)
	}
	if err := s.SetLaunchProcess(ctx, "ap", "p", 9, proc); !errors.Is(err, ErrNotFound) {
		t.Errorf("process of an unknown launch: %v", err)
	}
}

// TestJoinTokensOutsideApply: join tokens are written with no apply
// running, refused beside one (its coordinator writes them), and written
// by the coordinator's guarded store.
func TestJoinTokensOutsideApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	j, err := s.CreateJoinToken(ctx, JoinToken{Pool: "gpu", Labels: map[string]string{"zone": "a"}, ExpiresAt: t0.Add(time.Hour)}, hashA, t0)
	if err != nil || !strings.HasPrefix(j.ID, "jt-") {
		t.Fatalf("CreateJoinToken = %+v, %v", j, err)
	}
	got, err := s.JoinTokenBySecretHash(ctx, hashA)
	if err != nil || got.ID != j.ID || got.Labels["zone"] != "a" || !got.Usable(t0) || got.Usable(t0.Add(time.Hour)) {
		t.Errorf("JoinTokenBySecretHash = %+v, %v", got, err)
	}
	lock, _, err := s.AcquireLock(ctx, LockRequest{Holder: "x", TTL: time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var locked *LockedError
	if _, err := s.CreateJoinToken(ctx, JoinToken{Pool: "gpu", ExpiresAt: t0.Add(time.Hour)}, hashB, t0); !errors.As(err, &locked) || locked.Lock.ID != lock.ID {
		t.Errorf("create beside an apply: %v; want a LockedError naming it", err)
	}
	if _, err := s.RevokeJoinToken(ctx, j.ID, t0); !errors.As(err, &locked) {
		t.Errorf("revoke beside an apply: %v; want a LockedError", err)
	}
	s.GuardWrites(lock.ID) // the apply's own store
	if _, err := s.CreateJoinToken(ctx, JoinToken{Pool: "gpu", ExpiresAt: t0.Add(time.Hour)}, hashB, t0); err != nil {
		t.Errorf("create by the apply holding the lock: %v", err)
	}
	r, err := s.RevokeJoinToken(ctx, j.ID, t0.Add(time.Minute))
	if err != nil || r.Usable(t0.Add(time.Minute)) || !r.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("revoke = %+v, %v", r, err)
	}
	if again, err := s.RevokeJoinToken(ctx, j.ID, t0.Add(2*time.Minute)); err != nil || !again.RevokedAt.Equal(r.RevokedAt) {
		t.Errorf("second revoke = %+v, %v; want it unchanged", again, err)
	}
	if _, err := s.RevokeJoinToken(ctx, "jt-nope", t0); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
	list, err := s.JoinTokens(ctx)
	if err != nil || len(list) != 2 || list[1].Labels != nil {
		t.Errorf("JoinTokens = %+v, %v", list, err)
	}
	for _, bad := range []JoinToken{{ExpiresAt: t0.Add(time.Hour)}, {Pool: "gpu", ExpiresAt: t0}} {
		if _, err := s.CreateJoinToken(ctx, bad, strings.Repeat("c", 64), t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateJoinToken(%+v): %v; want ErrInvalid", bad, err)
		}
	}
}

// TestAppliesRecorded: every lock acquisition records an apply; release,
// force-unlock and takeover end it with their reason; the coordinator's
// address is kept in the lock row.
func TestAppliesRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	a, _, err := s.AcquireLock(ctx, LockRequest{Holder: "one", Host: "h", PID: 1, TTL: time.Minute}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetLockCoordinator(ctx, a.ID, "https://10.0.0.1:7070", hashA); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || snap.Lock.CoordinatorURL != "https://10.0.0.1:7070" || snap.Lock.CASHA256 != hashA {
		t.Errorf("lock %+v, %v", snap.Lock, err)
	}
	b, prev, err := s.AcquireLock(ctx, LockRequest{Holder: "two", TTL: time.Minute, TakeOver: a.ID}, t0.Add(time.Second))
	if err != nil || prev == nil || prev.ID != a.ID {
		t.Fatal(err)
	}
	if err := s.SetLockCoordinator(ctx, a.ID, "x", ""); !errors.Is(err, ErrLockLost) {
		t.Errorf("SetLockCoordinator of a lost lock: %v", err)
	}
	if err := s.ReleaseLock(ctx, b.ID, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	c, _, err := s.AcquireLock(ctx, LockRequest{Holder: "three", TTL: time.Minute}, t0.Add(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForceUnlock(ctx, c.ID, t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	d, _, err := s.AcquireLock(ctx, LockRequest{Holder: "four", TTL: time.Minute}, t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	applies, err := s.Applies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ id, holder, reason string }
	var got []row
	for _, ap := range applies {
		got = append(got, row{ap.ID, ap.Holder, ap.EndReason})
	}
	want := []row{{a.ID, "one", "taken_over"}, {b.ID, "two", "released"}, {c.ID, "three", "forced"}, {d.ID, "four", ""}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(row{})); diff != "" {
		t.Errorf("applies (-want +got):\n%s", diff)
	}
}

// TestResultBindsArtifactsOnlyWhenHeld: a result that would be accepted but
// names blobs the store lacks changes nothing (not even the serial) and
// says which; once they are held it is accepted and binds them; a fenced
// result is rejected before the store is even asked; a result naming
// another definition is not about this lease.
func TestResultBindsArtifactsOnlyWhenHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t)
	seed(t, s)
	l := claim(t, s, "task.a", "w1", t0)
	arts := []Artifact{{Kind: ArtifactLog, Name: "stdout", SHA256: hashA, Size: 3, MediaType: "text/plain"},
		{Kind: ArtifactOutput, Name: "out/r.json", SHA256: hashB, Size: 9}}
	asked := 0
	held := map[string]bool{hashA: true}
	in := ResultInput{Key: "k", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1", DefHash: l.DefHash, Artifacts: arts,
		Held: func(hs []string) ([]string, error) {
			asked++
			var missing []string
			for _, h := range hs {
				if !held[h] {
					missing = append(missing, h)
				}
			}
			return missing, nil
		}}
	before := serial(t, s)
	_, err := s.AcceptResult(ctx, in, nil, t0.Add(time.Second))
	var miss *MissingArtifactsError
	if !errors.As(err, &miss) || len(miss.Missing) != 1 || miss.Missing[0] != hashB {
		t.Fatalf("AcceptResult with a blob missing: %v; want a MissingArtifactsError naming it", err)
	}
	if serial(t, s) != before || taskOf(t, s, "task.a").Status != TaskRunning {
		t.Errorf("a result waiting for its artifacts changed the state")
	}
	if rs, _ := s.Results(ctx, "task.a"); len(rs) != 0 {
		t.Errorf("a result waiting for its artifacts was recorded: %+v", rs)
	}
	held[hashB] = true
	dec, err := s.AcceptResult(ctx, in, nil, t0.Add(2*time.Second))
	if err != nil || dec.Decision != DecisionAccepted {
		t.Fatalf("AcceptResult once held = %+v, %v", dec, err)
	}
	got, err := s.ArtifactsOf(ctx, "task.a", l.Attempt)
	if err != nil || len(got) != 2 || got[0].Name != "stdout" || got[1].Name != "out/r.json" || got[0].MediaType != "text/plain" {
		t.Errorf("ArtifactsOf = %+v, %v", got, err)
	}
	refs, err := s.ReferencedBlobs(ctx)
	if err != nil || !refs[hashA] || !refs[hashB] {
		t.Errorf("ReferencedBlobs = %v, %v", refs, err)
	}
	// A fenced result (the lease is completed now) is rejected without
	// asking the store; a result for another definition is unknown_lease.
	asked = 0
	stale := in
	stale.Key = "k2"
	if dec, err := s.AcceptResult(ctx, stale, nil, t0.Add(3*time.Second)); err != nil || dec.Reason != ReasonLeaseExpired || asked != 0 {
		t.Errorf("fenced result = %+v, %v, store asked %d times", dec, err, asked)
	}
	addTask(t, s, "task.b", TaskQueued, 1, 1)
	lb := claim(t, s, "task.b", "w1", t0)
	other := ResultInput{Key: "k3", Token: lb.Token, WorkerID: "w1", DefHash: "h-other"}
	if dec, err := s.AcceptResult(ctx, other, nil, t0.Add(time.Second)); err != nil || dec.Reason != ReasonUnknownLease {
		t.Errorf("result for another definition = %+v, %v; want unknown_lease", dec, err)
	}
	// Bad artifacts are refused before anything.
	for _, bad := range [][]Artifact{{{Kind: "blob", Name: "x", SHA256: hashA}}, {{Kind: ArtifactLog, Name: "x", SHA256: "ABC"}},
		{{Kind: ArtifactLog, Name: "x", SHA256: hashA}, {Kind: ArtifactLog, Name: "x", SHA256: hashB}}} {
		if _, err := s.AcceptResult(ctx, ResultInput{Key: "k4", Token: lb.Token, WorkerID: "w1", Artifacts: bad}, nil, t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("artifacts %+v: %v; want ErrInvalid", bad, err)
		}
	}
}
