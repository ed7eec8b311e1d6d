package state

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestGarbageIsWhatNoCurrentDefinitionRefersTo: the blobs an accepted
// attempt bound and the inputs of a task's spec are referenced; once the
// task's definition is replaced, its old attempt's blobs are not; a
// collection changes no content (the serial stays) and never runs beside
// an apply that is not its own, or for an apply that lost its lock.
func TestGarbageIsWhatNoCurrentDefinitionRefersTo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed(t, s)
	hashC, hashD := strings.Repeat("c", 64), strings.Repeat("d", 64)
	l := claim(t, s, "task.a", "w1", t0)
	// Its stderr is empty: no row of attempt_artifacts (migration 012),
	// and still the empty blob is referenced.
	arts := []Artifact{{Kind: ArtifactLog, Name: "stdout", SHA256: hashA, Size: 3}, {Kind: ArtifactOutput, Name: "r.json", SHA256: hashB, Size: 9},
		{Kind: ArtifactLog, Name: "stderr", SHA256: EmptySHA256, Size: 0, MediaType: LogMediaType}}
	if _, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: l.Token, Task: l.Task, Attempt: l.Attempt, WorkerID: "w1", DefHash: l.DefHash,
		Artifacts: arts, Held: func([]string) ([]string, error) { return nil, nil }}, nil, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	spec := `{"command":["cat","x"],"inputs":[{"path":"x","sha256":"` + hashC + `","size":1}]}`
	if err := s.UpsertTask(ctx, TaskDef{Address: "task.c", Name: "c", Index: -1, DefHash: "hc", Spec: []byte(spec),
		Status: TaskQueued, MaxAttempts: 1, MaxLost: 1}, t0); err != nil {
		t.Fatal(err)
	}
	// A spec without inputs, and one whose inputs are not a list, refer
	// to nothing.
	for i, spec := range []string{`{"command":["true"]}`, `{"inputs":{"sha256":"` + hashD + `"}}`} {
		name := []string{"d", "e"}[i]
		if err := s.UpsertTask(ctx, TaskDef{Address: "task." + name, Name: name, Index: -1, DefHash: "h" + name, Spec: []byte(spec),
			Status: TaskQueued, MaxAttempts: 1, MaxLost: 1}, t0); err != nil {
			t.Fatal(err)
		}
	}
	refs := func() map[string]bool {
		t.Helper()
		r, err := s.ReferencedBlobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if diff := cmp.Diff(map[string]bool{hashA: true, hashB: true, hashC: true, EmptySHA256: true}, refs()); diff != "" {
		t.Errorf("referenced (-want +got):\n%s", diff)
	}
	// task.a replaced: its attempt belongs to the old definition.
	if err := s.UpsertTask(ctx, TaskDef{Address: "task.a", Name: "a", Index: -1, DefHash: "h2", Status: TaskQueued, MaxAttempts: 3, MaxLost: 3}, t0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{hashC: true}, refs()); diff != "" {
		t.Errorf("referenced after replacing task.a (-want +got):\n%s", diff)
	}

	before := serial(t, s)
	var got map[string]bool
	if err := s.CollectGarbage(ctx, func(ref map[string]bool) error { got = ref; return nil }); err != nil {
		t.Fatal(err)
	}
	if !got[hashC] || got[hashA] || serial(t, s) != before {
		t.Errorf("CollectGarbage saw %v and moved the serial %d → %d; want {hashC} and no change", got, before, serial(t, s))
	}
	boom := errors.New("boom")
	if err := s.CollectGarbage(ctx, func(map[string]bool) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("CollectGarbage returned %v, want remove's error", err)
	}

	// An apply holds the lock: another store of the file is refused
	// without remove being called; the apply's own store collects.
	lock, _, err := s.AcquireLock(ctx, LockRequest{Holder: "apply", Host: "h", PID: 1, TTL: time.Hour}, t0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	called := false
	var locked *LockedError
	if err := other.CollectGarbage(ctx, func(map[string]bool) error { called = true; return nil }); !errors.As(err, &locked) || called {
		t.Errorf("CollectGarbage beside an apply = %v (remove called: %t), want a *LockedError and no call", err, called)
	}
	s.GuardWrites(lock.ID)
	if err := s.CollectGarbage(ctx, func(map[string]bool) error { called = true; return nil }); err != nil || !called {
		t.Errorf("the apply's own CollectGarbage = %v (remove called: %t)", err, called)
	}
	if _, err := other.ForceUnlock(ctx, lock.ID, t0); err != nil {
		t.Fatal(err)
	}
	called = false
	if err := s.CollectGarbage(ctx, func(map[string]bool) error { called = true; return nil }); !errors.Is(err, ErrLockLost) || called {
		t.Errorf("CollectGarbage after the lock was lost = %v (remove called: %t), want ErrLockLost", err, called)
	}
}
