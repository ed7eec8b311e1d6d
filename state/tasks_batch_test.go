package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// UpsertTasks writes a batch in one transaction: all of it, or nothing of
// it when one task is refused (a definition that is invalid, or a task
// whose lease is active).
func TestUpsertTasksIsAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	def := func(addr, hash string) TaskDef {
		return TaskDef{Address: addr, Name: addr[len("task."):], Index: -1, DefHash: hash, Status: TaskQueued, MaxAttempts: 1}
	}
	tests := []struct {
		name    string
		batch   []TaskDef
		wantErr error
	}{
		{"all new", []TaskDef{def("task.x", "hx"), def("task.y", "hy")}, nil},
		{"an invalid one refuses the batch before writing", []TaskDef{def("task.x", "hx"), def("task.y", "")}, ErrInvalid},
		{"a task with an active lease rolls the batch back", []TaskDef{def("task.x", "hx"), def("task.a", "h2")}, ErrLeaseHeld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			seed(t, s)
			if _, err := s.GrantLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0); err != nil {
				t.Fatal(err)
			}
			_, serialBefore, _ := s.Info(ctx)
			err := s.UpsertTasks(ctx, tt.batch, t0)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("UpsertTasks = %v, want %v", err, tt.wantErr)
			}
			_, serialAfter, _ := s.Info(ctx)
			_, errX := s.Task(ctx, "task.x")
			switch {
			case tt.wantErr == nil && (errX != nil || serialAfter != serialBefore+1):
				t.Errorf("after a batch that succeeded: task.x %v, serial %d → %d (want one commit)", errX, serialBefore, serialAfter)
			case tt.wantErr != nil && (!errors.Is(errX, ErrNotFound) || serialAfter != serialBefore):
				t.Errorf("after a refused batch: task.x %v (want not found), serial %d → %d (want unchanged)", errX, serialBefore, serialAfter)
			}
		})
	}
}

// BenchmarkRecordPhase records 1,000 tasks as apply's record phase does:
// one UpsertTasks transaction ("batch") against the reference of one
// UpsertTask transaction per task ("each") on the same kind of state
// file. docs/PERFORMANCE.md has the ratio.
func BenchmarkRecordPhase(b *testing.B) {
	const n = 1000
	defs := make([]TaskDef, n)
	for i := range defs {
		addr := "task.t[" + itoa(i) + "]"
		defs[i] = TaskDef{Address: addr, Name: "t", Index: i, DefHash: "h", Status: TaskQueued, MaxAttempts: 1, Spec: []byte(`{"command":["true"]}`)}
	}
	for _, mode := range []string{"each", "batch"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				b.StopTimer()
				s := setup(b)
				b.StartTimer()
				if mode == "batch" {
					if err := s.UpsertTasks(ctx, defs, t0); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, d := range defs {
					if err := s.UpsertTask(ctx, d, t0); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/task")
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// UpsertTasks writes a batch larger than one statement carries, in
// order, and redefines tasks already there (their budgets reset), in the
// same transaction.
func TestUpsertTasksManyStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, n := range []int{1, upsertTasksPerStatement, upsertTasksPerStatement + 1, 2*upsertTasksPerStatement + 7} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := setup(t)
			defs := make([]TaskDef, n)
			for i := range defs {
				defs[i] = TaskDef{Address: "task.t[" + itoa(i) + "]", Name: "t", Index: i, DefHash: "h1", Status: TaskQueued, MaxAttempts: 2, Spec: []byte(`{"command":["true"]}`)}
			}
			if err := s.UpsertTasks(ctx, defs, t0); err != nil {
				t.Fatal(err)
			}
			// Redefine every other one, and add one.
			var again []TaskDef
			for i := 0; i < n; i += 2 {
				d := defs[i]
				d.DefHash, d.MaxAttempts = "h2", 3
				again = append(again, d)
			}
			again = append(again, TaskDef{Address: "task.extra", Name: "extra", Index: -1, DefHash: "hx", Status: TaskPending, MaxAttempts: 1})
			_, serialBefore, _ := s.Info(ctx)
			if err := s.UpsertTasks(ctx, again, t0.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, serialAfter, _ := s.Info(ctx); serialAfter != serialBefore+1 {
				t.Errorf("serial %d → %d, want one commit", serialBefore, serialAfter)
			}
			snap, err := s.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tasks := snap.Tasks
			if len(tasks) != n+1 {
				t.Fatalf("%d tasks, want %d", len(tasks), n+1)
			}
			for _, tk := range tasks {
				if tk.Address == "task.extra" {
					continue
				}
				var i int
				if _, err := fmt.Sscanf(tk.Address, "task.t[%d]", &i); err != nil {
					t.Fatal(err)
				}
				wantHash, wantMax := "h1", 2
				if i%2 == 0 {
					wantHash, wantMax = "h2", 3
				}
				if tk.DefHash != wantHash || tk.MaxAttempts != wantMax || tk.Index != i {
					t.Errorf("%s: def_hash %q, max_attempts %d, index %d; want %q, %d, %d", tk.Address, tk.DefHash, tk.MaxAttempts, tk.Index, wantHash, wantMax, i)
				}
			}
		})
	}
}
