package coordinator_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Statements a claim (one lease granted) and an accept (its successful
// result) run, each alone in its write group, counted with
// state.TraceStatements. The test fails when either runs more statements
// than it does now; -v lists each statement with its mean time
// (docs/PERFORMANCE.md, "Statements per claim and accept").
//
// The third operation, "accept+claim", is what a busy worker of an apply
// sends: a successful result naming its two empty logs, that asks for its
// next lease (eager dispatch), under the apply lock's guard (state.Store.GuardWrites), so
// the accept and the grant share one write.
//
// None of them may use RETURNING: SQLite gathers a RETURNING clause's rows
// in a temporary table, which opens a pager and maps memory for it, and a
// read plus a plain write cost less (docs/PERFORMANCE.md, "No RETURNING on
// the claim's path"). A claim's checks are the WHERE of the UPDATE that
// counts its attempt, against what the coordinator holds the task and
// worker to be (state.GrantRequest.Expected), and an accept's the WHERE of
// the UPDATE that completes its lease (state.Tx.AcceptResult): neither
// reads before it writes.
const (
	maxClaimStatements       = 7 // BEGIN, the claim's statements, COMMIT
	maxAcceptStatements      = 8
	maxAcceptClaimStatements = 11
)

func TestStatementsPerClaimAndAccept(t *testing.T) {
	const n = 200 // claims and accepts; as many accept+claims again
	ctx := context.Background()
	pools := []coordinator.PoolRuntime{{Name: "p", Capacity: 1, HeartbeatInterval: time.Hour, TTL: 10 * time.Hour}}
	tasks := make([]coordinator.TaskRuntime, n)
	for i := range tasks {
		tasks[i] = rtTask(fmt.Sprintf("s%04d", i))
	}
	for i := range n + 1 {
		tasks = append(tasks, rtTask(fmt.Sprintf("e%04d", i)))
	}
	s, err := state.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	upsertAll(t, s, pools, tasks, time.Now())
	lock, _, err := s.AcquireLock(ctx, state.LockRequest{Holder: "stmts", Host: "h", PID: 1, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.GuardWrites(lock.ID)
	blobs, err := artifact.Open(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(coordinator.Options{Store: s, Pools: pools, Tasks: tasks, Artifacts: blobs})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c))
	defer srv.Close()
	_, reg := registerOn(t, c, srv.URL, "p", protocol.RegisterRequest{Host: "stmts"})
	sess := session(t, c, reg)

	type stat struct {
		order int
		count int
		total time.Duration
	}
	var mu sync.Mutex
	phase := ""
	stats := map[string]map[string]*stat{"claim": {}, "accept": {}, "accept+claim": {}}
	stop := state.TraceStatements(func(q string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		m := stats[phase]
		if m == nil {
			return
		}
		q = strings.Join(strings.Fields(q), " ")
		st := m[q]
		if st == nil {
			st = &stat{order: len(m)}
			m[q] = st
		}
		st.count++
		st.total += d
	})
	defer stop()
	setPhase := func(p string) {
		mu.Lock()
		phase = p
		mu.Unlock()
	}
	zero := 0
	for i := range n {
		setPhase("claim")
		resp, err := c.Claim(ctx, sess, 1, time.Second)
		if err != nil || len(resp.Assignments) != 1 {
			t.Fatalf("claim %d: %+v, %v", i, resp, err)
		}
		a := resp.Assignments[0]
		setPhase("accept")
		req := protocol.ResultRequest{WorkerID: sess.WorkerID(), ExitCode: &zero, IdempotencyKey: fmt.Sprintf("k%d", i),
			Task: a.Task, Attempt: a.Attempt}
		if r, err := c.Result(ctx, sess, a.FencingToken, req, nil); err != nil || r.Decision != "accepted" {
			t.Fatalf("result %d: %+v, %v", i, r, err)
		}
		setPhase("")
	}
	resp, err := c.Claim(ctx, sess, 1, time.Second)
	if err != nil || len(resp.Assignments) != 1 {
		t.Fatalf("claim: %+v, %v", resp, err)
	}
	a := resp.Assignments[0]
	// what an agent names for an attempt that printed nothing
	emptyLogs := []protocol.ArtifactRef{
		{Kind: "log", Name: "stdout", SHA256: artifact.EmptyHash, MediaType: state.LogMediaType},
		{Kind: "log", Name: "stderr", SHA256: artifact.EmptyHash, MediaType: state.LogMediaType},
	}
	for i := range n {
		setPhase("accept+claim")
		req := protocol.ResultRequest{WorkerID: sess.WorkerID(), ExitCode: &zero, IdempotencyKey: fmt.Sprintf("e%d", i),
			Task: a.Task, Attempt: a.Attempt, Next: 1, Artifacts: emptyLogs}
		r, err := c.Result(ctx, sess, a.FencingToken, req, nil)
		if err != nil || r.Decision != "accepted" || len(r.Assignments) != 1 {
			t.Fatalf("result %d with next: %+v, %v", i, r, err)
		}
		setPhase("")
		a = r.Assignments[0]
	}
	stop()
	for _, op := range []string{"claim", "accept", "accept+claim"} {
		m := stats[op]
		qs := make([]string, 0, len(m))
		for q := range m {
			qs = append(qs, q)
		}
		sort.Slice(qs, func(i, j int) bool { return m[qs[i]].order < m[qs[j]].order })
		var per float64
		var total time.Duration
		for _, q := range qs {
			st := m[q]
			per += float64(st.count) / n
			total += st.total
			t.Logf("%s: %5.2f per op, %7.1f µs  %s", op, float64(st.count)/n, float64(st.total.Microseconds())/float64(st.count), q)
			if strings.Contains(q, "RETURNING") {
				t.Errorf("%s runs a statement with RETURNING, which gathers its rows in a temporary table: %s", op, q)
			}
		}
		t.Logf("%s: %.2f statements per op, %.1f µs per op", op, per, float64(total.Microseconds())/n)
		limit := map[string]int{"claim": maxClaimStatements, "accept": maxAcceptStatements, "accept+claim": maxAcceptClaimStatements}[op]
		if per > float64(limit) {
			t.Errorf("%s runs %.2f statements, more than %d", op, per, limit)
		}
	}
}
