package coordinator_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

const (
	coordHelperPathEnv  = "WDC_COORD_TEST_HELPER_PATH"
	coordHelperStartEnv = "WDC_COORD_TEST_HELPER_START"
	procTasks           = 200
)

// procSetup is the pool and tasks both processes serve: every fourth task
// fails its first attempt and is retried.
func procSetup() ([]coordinator.PoolRuntime, []coordinator.TaskRuntime) {
	p := rtPool("p", 2)
	p.HeartbeatInterval, p.TTL = time.Minute, 10*time.Minute
	var tasks []coordinator.TaskRuntime
	for i := range procTasks {
		tasks = append(tasks, withRetry(rtTask(fmt.Sprintf("t%03d", i)), 3, 3, time.Millisecond))
	}
	return []coordinator.PoolRuntime{p}, tasks
}

// raceCounter counts the coordinator's "claim lost a race" log records.
type raceCounter struct{ n atomic.Int64 }

func (r *raceCounter) Enabled(context.Context, slog.Level) bool { return true }
func (r *raceCounter) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == "claim lost a race" {
		r.n.Add(1)
	}
	return nil
}
func (r *raceCounter) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *raceCounter) WithGroup(string) slog.Handler      { return r }

// TestHelperCoordinatorProcess is not a test: TestTwoProcessesOneStateFile
// runs the test binary with -test.run=^TestHelperCoordinatorProcess$ twice
// at once. Each process runs its own coordinator on the shared state file
// with four workers claiming through its handler, until every task in the
// state is finished.
func TestHelperCoordinatorProcess(t *testing.T) {
	path := os.Getenv(coordHelperPathEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pools, tasks := procSetup()
	races := &raceCounter{}
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks, MaxClaimWait: 50 * time.Millisecond,
		Logger: slog.New(races)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c))
	defer srv.Close()
	var granted, accepted atomic.Int64
	type wk struct {
		cl *protocol.Client
		id string
	}
	var wks []wk
	for range 4 {
		cl, reg := registerOn(t, c, srv.URL, "p", protocol.RegisterRequest{Host: "helper", PID: os.Getpid()})
		wks = append(wks, wk{cl, reg.WorkerID})
	}
	if start, err := strconv.ParseInt(os.Getenv(coordHelperStartEnv), 10, 64); err == nil {
		time.Sleep(time.Until(time.Unix(0, start))) // line the processes up
	}
	go func() { // stop when the state says every task is finished
		for ctx.Err() == nil {
			snap, err := s.Snapshot(ctx)
			if err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "SNAPSHOT ERROR:", err) // why a helper would never see the end
			}
			if err == nil {
				done := 0
				for _, tk := range snap.Tasks {
					if tk.Status.Finished() {
						done++
					}
				}
				if done == procTasks {
					cancel()
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for _, w := range wks {
		cl, reg := w.cl, struct{ WorkerID string }{w.id}
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := cl.Claim(ctx, reg.WorkerID, protocol.ClaimRequest{Max: 2, WaitMS: 20})
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintln(os.Stderr, "CLAIM ERROR:", err) // e.g. the other process held the write lock past busy_timeout
						time.Sleep(10 * time.Millisecond)
						continue
					}
					return
				}
				for _, a := range resp.Assignments {
					granted.Add(1)
					idx, _ := strconv.Atoi(strings.TrimPrefix(a.Task, "task.t"))
					class := ""
					if idx%4 == 0 && a.Attempt == 1 {
						class = "failure"
					}
					r, err := cl.PostResult(context.WithoutCancel(ctx), a.FencingToken, protocol.ResultRequest{WorkerID: reg.WorkerID,
						Task: a.Task, Attempt: a.Attempt, IdempotencyKey: fmt.Sprintf("%s-%d", reg.WorkerID, a.FencingToken), FailureClass: class})
					if err != nil || r.Decision != "accepted" {
						fmt.Fprintf(os.Stderr, "RESULT NOT ACCEPTED: %+v %+v %v\n", a, r, err)
						os.Exit(3)
					}
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err == context.DeadlineExceeded {
		if snap, err := s.Snapshot(context.Background()); err == nil {
			for _, tk := range snap.Tasks {
				if !tk.Status.Finished() {
					fmt.Fprintf(os.Stderr, "UNFINISHED: %s %s attempts=%d\n", tk.Address, tk.Status, tk.Attempts)
				}
			}
		}
		fmt.Fprintln(os.Stderr, "HELPER TIMED OUT; goroutines:")
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2) // where it is stuck
		os.Exit(4)
	}
	fmt.Printf("STATS granted=%d accepted=%d lost_races=%d\n", granted.Load(), accepted.Load(), races.n.Load())
}

// TestTwoProcessesOneStateFile runs two coordinators, in two processes, on
// one state file, granting and settling leases concurrently: no task ever
// has two active leases or overlapping leases, tokens never repeat, every
// task succeeds after its retries, and each lost race (the other process
// took the task) is skipped, not an error.
func TestTwoProcessesOneStateFile(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	pools, tasks := procSetup()
	upsertAll(t, s, pools, tasks, time.Now())
	s.Close()

	start := time.Now().Add(3 * time.Second).UnixNano() // after both processes started and registered
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCoordinatorProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), coordHelperPathEnv+"="+path, coordHelperStartEnv+"="+strconv.FormatInt(start, 10))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
		for _, line := range strings.Split(outs[i].String(), "\n") {
			if strings.HasPrefix(line, "STATS") {
				t.Logf("process %d: %s", i, line)
			}
		}
	}
	s, err = state.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, rt := range tasks {
		tk, err := s.Task(context.Background(), rt.Address)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if idx, _ := strconv.Atoi(strings.TrimPrefix(rt.Address, "task.t")); idx%4 == 0 {
			want = 2
		}
		if tk.Status != state.TaskSucceeded || tk.Attempts != want {
			t.Errorf("%s: %s after %d attempts; want succeeded after %d", rt.Address, tk.Status, tk.Attempts, want)
		}
	}
	checkLeaseHistory(t, s)
}

// TestClaimSkipsTaskTakenByAnotherWriter: another store on the same file
// leases task.a behind the coordinator's back; a claim skips it (the state
// refuses it), refreshes it, and grants task.b instead.
func TestClaimSkipsTaskTakenByAnotherWriter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 1)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b")}, harnessOpts{})
	other, err := state.Open(context.Background(), h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.RegisterWorker(context.Background(), state.Worker{ID: "intruder", Pool: "p", Capacity: 1,
		HeartbeatInterval: time.Second, TTL: time.Minute}, ct0); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ClaimLease(context.Background(), state.GrantRequest{Task: "task.a", WorkerID: "intruder", Timeout: time.Hour}, ct0); err != nil {
		t.Fatal(err)
	}
	w := h.register("p")
	if a := w.claimOne(); a.Task != "task.b" {
		t.Fatalf("claimed %s; want task.b", a.Task)
	}
	if p := h.c.Progress(); p.Tasks[state.TaskRunning] != 2 {
		t.Errorf("coordinator did not learn task.a is running: %+v", p.Tasks)
	}
	checkLeaseHistory(t, h.store)
}

const crashHelperEnv = "WDC_COORD_TEST_CRASH_PATH"

// TestHelperCoordinatorCrash is not a test: TestKillDuringLoadKeepsTokens
// runs it and kills it with SIGKILL. It serves the tasks of procSetup to
// eight concurrent claimers through the coordinator's Go API and prints,
// for every claim answered, "GRANTED <claimer> <token>", and for every
// result answered accepted, "ACCEPTED <token>", the moment the answer is
// back (an unbuffered write each), until it is killed.
func TestHelperCoordinatorCrash(t *testing.T) {
	path := os.Getenv(crashHelperEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	s, err := state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	pools, tasks := procSetup()
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c))
	var wg sync.WaitGroup
	for i := range 8 {
		_, reg := registerOn(t, c, srv.URL, "p", protocol.RegisterRequest{Host: "crash"})
		w := session(t, c, reg)
		wg.Go(func() {
			for {
				resp, err := c.Claim(ctx, w, 1, time.Second)
				if err != nil || len(resp.Assignments) == 0 {
					continue
				}
				a := resp.Assignments[0]
				fmt.Fprintf(os.Stdout, "GRANTED %d %d\n", i, a.FencingToken)
				r, err := c.Result(ctx, w, a.FencingToken, protocol.ResultRequest{WorkerID: w.WorkerID(), Task: a.Task, Attempt: a.Attempt,
					IdempotencyKey: fmt.Sprintf("k%d", a.FencingToken)}, nil)
				if err == nil && r.Decision == state.DecisionAccepted {
					fmt.Fprintf(os.Stdout, "ACCEPTED %d\n", a.FencingToken)
				}
			}
		})
	}
	wg.Wait() // never: the parent kills this process
}

// TestKillDuringLoadKeepsTokens: a coordinator killed with SIGKILL in the
// middle of a load of concurrent claims and results (group commit,
// synchronous=FULL) lost nothing it answered. Every fencing token it
// handed out is a lease in the state, each claimer's tokens increase,
// every result it answered accepted is a completed lease, the fencing
// counter is at least the highest token answered, and the next
// coordinator's first token is greater than all of them.
func TestKillDuringLoadKeepsTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	pools, tasks := procSetup()
	upsertAll(t, s, pools, tasks, time.Now())
	s.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCoordinatorCrash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	granted := map[int64]bool{}
	accepted := map[int64]bool{}
	last := map[string]int64{} // claimer → its last token
	var highest int64
	killed := false
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		switch {
		case len(f) == 3 && f[0] == "GRANTED":
			tok, _ := strconv.ParseInt(f[2], 10, 64)
			if granted[tok] {
				t.Errorf("token %d answered twice", tok)
			}
			if tok <= last[f[1]] {
				t.Errorf("claimer %s got token %d after %d", f[1], tok, last[f[1]])
			}
			granted[tok], last[f[1]] = true, tok
			highest = max(highest, tok)
		case len(f) == 2 && f[0] == "ACCEPTED":
			tok, _ := strconv.ParseInt(f[1], 10, 64)
			accepted[tok] = true
		}
		if !killed && len(granted) >= 120 { // in the middle of the load (procSetup has 200 tasks, 250 attempts)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatalf("the helper ended before it was killed, after %d claims:\n%s", len(granted), stderr.String())
	}

	s, err = state.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for tok := range granted {
		l, err := s.Lease(ctx, tok)
		if err != nil {
			t.Errorf("answered token %d: %v", tok, err)
			continue
		}
		if accepted[tok] && l.Status != state.LeaseCompleted {
			t.Errorf("lease %d was answered accepted but is %s", tok, l.Status)
		}
	}
	lastToken, err := s.LastToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lastToken < highest {
		t.Errorf("fencing counter %d after the crash; %d was answered", lastToken, highest)
	}
	// The next coordinator (after the crashed one's leases are revoked, as
	// apply's takeover does) grants above every answered token.
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: unfinished(t, s, tasks)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RevokeLeases(ctx, "the coordinator was killed"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c))
	defer srv.Close()
	_, reg := registerOn(t, c, srv.URL, "p", protocol.RegisterRequest{Host: "next"})
	resp, err := c.Claim(ctx, session(t, c, reg), 1, 0)
	if err != nil || len(resp.Assignments) != 1 {
		t.Fatalf("claim after the crash: %+v, %v", resp, err)
	}
	if tok := resp.Assignments[0].FencingToken; tok <= highest {
		t.Errorf("first token after the crash %d; want > %d", tok, highest)
	}
	t.Logf("killed after %d answered claims (%d results accepted); highest token %d, counter %d", len(granted), len(accepted), highest, lastToken)
	checkLeaseHistory(t, s)
}

// unfinished returns the tasks of rts that the state has not finished.
func unfinished(t *testing.T, s *state.Store, rts []coordinator.TaskRuntime) []coordinator.TaskRuntime {
	t.Helper()
	var out []coordinator.TaskRuntime
	for _, rt := range rts {
		tk, err := s.Task(context.Background(), rt.Address)
		if err != nil {
			t.Fatal(err)
		}
		if !tk.Status.Finished() {
			out = append(out, rt)
		}
	}
	return out
}
