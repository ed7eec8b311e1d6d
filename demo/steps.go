package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/protocol"
)

// The steps of WorkerLeases. Each acts through worker protocol v1 (the
// workers' calls, and the operator route for the sweep), says what
// happened in st.Happened, reads the state back (observe) and judges it.
// An error means the story cannot go on.

// register issues a launch credential per worker, as apply does before a
// provider launches one, and registers worker A and worker B with them.
func (s *story) register(ctx context.Context, st *Step) error {
	host, _ := os.Hostname()
	name := s.pool.Runtime.Name
	for i, wname := range []string{"A", "B"} {
		seq := i + 1
		cred, err := s.coord.IssueLaunch(ctx, name, seq, s.pool.Provider, s.pool.LaunchTimeout)
		if err != nil {
			return fmt.Errorf("issuing the launch credential of worker %s: %w", wname, err)
		}
		s.launches = append(s.launches, seq)
		cl := protocol.NewClient(s.url, cred, s.client)
		reg, err := call(ctx, func(ctx context.Context) (protocol.RegisterResponse, error) {
			return cl.Register(ctx, protocol.RegisterRequest{Host: host, PID: os.Getpid(), Version: s.version,
				RequestID: fmt.Sprintf("demo-worker-%s", strings.ToLower(wname))})
		})
		if err != nil {
			return fmt.Errorf("registering worker %s: %w", wname, err)
		}
		s.workers = append(s.workers, &worker{name: wname, id: reg.WorkerID, client: cl.WithToken(reg.SessionToken)})
		s.report.Workers = append(s.report.Workers, WorkerInfo{Name: wname, ID: reg.WorkerID})
		st.Happened = append(st.Happened, fmt.Sprintf("worker %s registers with the credential of launch %d: pool %s, heartbeat every %s, ttl %s",
			wname, seq, reg.Pool, time.Duration(reg.HeartbeatIntervalMS)*time.Millisecond, time.Duration(reg.TTLMS)*time.Millisecond))
	}
	_, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.registerChecks(cur)
	return nil
}

// claim makes w claim up to one task without waiting.
func (s *story) claim(ctx context.Context, w *worker) ([]protocol.Assignment, error) {
	resp, err := call(ctx, func(ctx context.Context) (protocol.ClaimResponse, error) {
		return w.client.Claim(ctx, w.id, protocol.ClaimRequest{Max: 1})
	})
	if err != nil {
		return nil, fmt.Errorf("worker %s's claim: %w", w.name, err)
	}
	return resp.Assignments, nil
}

// granted renders what a claim was granted.
func (s *story) granted(w *worker, asg []protocol.Assignment) string {
	if len(asg) == 0 {
		return fmt.Sprintf("worker %s claims: granted nothing", w.name)
	}
	parts := make([]string, len(asg))
	for i, a := range asg {
		parts[i] = fmt.Sprintf("%s, attempt %d, fencing token %d, expires %s", a.Task, a.Attempt, a.FencingToken, s.judge.rel(a.ExpiresAt))
	}
	return fmt.Sprintf("worker %s claims: granted %s", w.name, strings.Join(parts, "; "))
}

// assign: worker A claims and is granted the task; worker B claims too and
// is granted nothing.
func (s *story) assign(ctx context.Context, st *Step) error {
	a, b := s.workers[0], s.workers[1]
	got, err := s.claim(ctx, a)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, s.granted(a, got))
	if len(got) != 1 {
		return fmt.Errorf("worker A's claim was granted %d tasks; the story needs it to hold the task", len(got))
	}
	a.lease = got[0]
	other, err := s.claim(ctx, b)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, s.granted(b, other))
	_, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.assignChecks(cur, a.lease, len(other))
	return nil
}

// heartbeat sends one heartbeat for w, reporting the leases it holds.
func (s *story) heartbeat(ctx context.Context, w *worker, held ...int64) (protocol.HeartbeatResponse, error) {
	if held == nil {
		held = []int64{}
	}
	resp, err := call(ctx, func(ctx context.Context) (protocol.HeartbeatResponse, error) {
		return w.client.Heartbeat(ctx, w.id, protocol.HeartbeatRequest{Leases: held})
	})
	if err != nil {
		return resp, fmt.Errorf("worker %s's heartbeat: %w", w.name, err)
	}
	return resp, nil
}

// heartbeatText renders a heartbeat and its answer.
func heartbeatText(w *worker, held []int64, resp protocol.HeartbeatResponse) string {
	holding := "no lease"
	if len(held) > 0 {
		tokens := make([]string, len(held))
		for i, t := range held {
			tokens[i] = fmt.Sprint(t)
		}
		holding = "lease " + strings.Join(tokens, ", ")
	}
	text := fmt.Sprintf("worker %s heartbeats holding %s: renewed %d, drain %t", w.name, holding, resp.Renewed, resp.Drain)
	if len(resp.CancelLeases) > 0 {
		text += fmt.Sprintf(", cancel %v", resp.CancelLeases)
	}
	return text
}

// renew: at renewAt worker A heartbeats holding its lease, which is
// renewed; worker B heartbeats too.
func (s *story) renew(ctx context.Context, st *Step, renewAt time.Duration) error {
	now := s.at(renewAt)
	a, b := s.workers[0], s.workers[1]
	resp, err := s.heartbeat(ctx, a, a.lease.FencingToken)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, heartbeatText(a, []int64{a.lease.FencingToken}, resp))
	bresp, err := s.heartbeat(ctx, b)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, heartbeatText(b, nil, bresp))
	prev, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.renewChecks(prev, cur, a.lease.FencingToken, resp.Renewed, now)
	return nil
}

// silence: worker A sends nothing more, while worker B heartbeats every
// two intervals, until the clock reaches sweepAt.
func (s *story) silence(ctx context.Context, st *Step, renewAt, sweepAt time.Duration) error {
	b := s.workers[1]
	var times []string
	renewed := 0
	for t := renewAt + 2*s.interval; t < sweepAt; t += 2 * s.interval {
		s.at(t)
		resp, err := s.heartbeat(ctx, b)
		if err != nil {
			return err
		}
		times = append(times, s.judge.rel(s.clock.Now()))
		renewed += resp.Renewed
	}
	st.Happened = append(st.Happened,
		fmt.Sprintf("worker B heartbeats at %s holding no lease (renewed %d)", strings.Join(times, " and "), renewed),
		fmt.Sprintf("worker A sends nothing after %s", s.judge.rel(s.report.Start.Add(renewAt))))
	now := s.at(sweepAt)
	st.Happened = append(st.Happened, fmt.Sprintf("the clock reaches %s", s.judge.rel(now)))
	prev, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.silenceChecks(prev, cur, s.workers[0].lease.FencingToken, now)
	return nil
}

// sweep runs one pass of the coordinator's sweep at sweepAt, through the
// operator route `wdc workers sweep` uses (the pass apply's coordinator
// runs every 500 ms), which answers what it did.
func (s *story) sweep(ctx context.Context, st *Step, sweepAt time.Duration) error {
	now := s.at(sweepAt)
	op := protocol.NewClient(s.url, s.coord.OperatorCredential(), s.client)
	resp, err := call(ctx, func(ctx context.Context) (protocol.SweepResponse, error) { return op.Sweep(ctx) })
	if err != nil {
		return fmt.Errorf("the sweep: %w", err)
	}
	expired := make([]string, len(resp.Expired))
	for i, l := range resp.Expired {
		expired[i] = fmt.Sprintf("lease %d (%s attempt %d)", l.FencingToken, l.Task, l.Attempt)
	}
	stale := make([]string, len(resp.Stale))
	for i, id := range resp.Stale {
		stale[i] = "worker " + orWorkerID(s.nameOf(id), id)
	}
	st.Happened = append(st.Happened, fmt.Sprintf("the coordinator sweeps at %s: expired %s; stale %s",
		s.judge.rel(now), orNone(strings.Join(expired, ", ")), orNone(strings.Join(stale, ", "))))
	prev, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.sweepChecks(prev, cur, s.workers[0].lease.FencingToken, now)
	return nil
}

// reassign: once the retry is due, worker B claims and is granted the next
// attempt.
func (s *story) reassign(ctx context.Context, st *Step, at time.Duration) error {
	now := s.at(at)
	b := s.workers[1]
	got, err := s.claim(ctx, b)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, s.granted(b, got))
	if len(got) != 1 {
		return fmt.Errorf("worker B's claim was granted %d tasks; the story needs it to hold the retry", len(got))
	}
	b.lease = got[0]
	prev, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.reassignChecks(prev, cur, b.lease, s.workers[0].lease.FencingToken, now)
	return nil
}

// post posts a successful result (exit status 0) of w's lease, as the
// agent would: its idempotency key is "<worker id>-<token>".
func (s *story) post(ctx context.Context, w *worker) (protocol.ResultResponse, error) {
	zero := 0
	l := w.lease
	resp, err := call(ctx, func(ctx context.Context) (protocol.ResultResponse, error) {
		return w.client.PostResult(ctx, l.FencingToken, protocol.ResultRequest{
			WorkerID: w.id, Task: l.Task, Attempt: l.Attempt, IdempotencyKey: fmt.Sprintf("%s-%d", w.id, l.FencingToken),
			ExitCode: &zero, StartedAt: s.report.Start, EndedAt: s.clock.Now(), DefHash: l.DefHash,
		})
	})
	if err != nil {
		return resp, fmt.Errorf("worker %s's result: %w", w.name, err)
	}
	return resp, nil
}

func resultText(w *worker, resp protocol.ResultResponse) string {
	text := fmt.Sprintf("worker %s posts its result for lease %d (exit status 0): %s", w.name, w.lease.FencingToken, resp.Decision)
	if resp.Reason != "" {
		text += ", reason " + resp.Reason
	}
	if resp.Duplicate {
		text += " (duplicate)"
	}
	return text
}

// staleResult: worker A, back from its silence, posts the result of its
// superseded lease.
func (s *story) staleResult(ctx context.Context, st *Step, at time.Duration) error {
	s.at(at)
	a := s.workers[0]
	resp, err := s.post(ctx, a)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, resultText(a, resp))
	prev, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.staleResultChecks(prev, cur, resp, a.lease.FencingToken)
	return nil
}

// result: worker B posts the result of the current lease.
func (s *story) result(ctx context.Context, st *Step, at time.Duration) error {
	now := s.at(at)
	b := s.workers[1]
	resp, err := s.post(ctx, b)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, resultText(b, resp))
	_, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.resultChecks(cur, resp, b.lease.FencingToken, now)
	return nil
}

// comeBack: worker A heartbeats again, holding no lease (it posted its
// result).
func (s *story) comeBack(ctx context.Context, st *Step, at time.Duration) error {
	now := s.at(at)
	a := s.workers[0]
	resp, err := s.heartbeat(ctx, a)
	if err != nil {
		return err
	}
	st.Happened = append(st.Happened, heartbeatText(a, nil, resp))
	prev, cur, err := s.observe(ctx, st)
	if err != nil {
		return err
	}
	st.Checks = s.judge.returnChecks(prev, cur, resp, now)
	return nil
}
