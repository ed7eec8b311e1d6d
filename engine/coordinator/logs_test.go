package coordinator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
)

// TestFollowLogs: nobody following costs the worker nothing (no
// follow_logs); a follow request marks the running attempt followed, the
// holder's heartbeat answer then lists it, and the holder's chunks are
// kept in order (a gap is dropped, an overlap adds only its new part) and
// served from any offset; another worker cannot write to the lease; once
// the result is accepted the attempt is "ended" and chunks are told to
// stop. A task that has not started is "waiting"; an unknown one is 404.
func TestFollowLogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []coordinator.PoolRuntime{rtPool("p", 2)}, []coordinator.TaskRuntime{rtTask("a"), rtTask("b", "task.a")}, harnessOpts{})
	ctx := context.Background()
	ops := protocol.NewClient(h.srv.URL, h.c.OperatorCredential(), nil)
	w, other := h.register("p"), h.register("p")
	a := w.claimOne()
	beat := func() protocol.HeartbeatResponse {
		t.Helper()
		r, err := w.cl.Heartbeat(ctx, w.id, protocol.HeartbeatRequest{Leases: []int64{a.FencingToken}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	follow := func(task string, attempt int, offset int64) protocol.LogFollowResponse {
		t.Helper()
		r, err := ops.FollowLog(ctx, protocol.LogFollowRequest{Task: task, Attempt: attempt, Stream: protocol.StreamStdout, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	chunk := func(off int64, data string) protocol.LogChunkResponse {
		t.Helper()
		r, err := w.cl.PostLogChunk(ctx, a.FencingToken, protocol.LogChunkRequest{WorkerID: w.id, Stream: protocol.StreamStdout, Offset: off, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := beat(); len(r.FollowLogs) != 0 {
		t.Errorf("follow_logs with nobody following: %v", r.FollowLogs)
	}
	if r := chunk(0, "early"); r.Follow || r.Offset != 0 {
		t.Errorf("a chunk nobody asked for = %+v; want follow false", r)
	}
	if r := follow("task.b", 0, 0); r.Status != protocol.FollowWaiting {
		t.Errorf("follow of a pending task = %+v; want waiting", r)
	}
	if r := follow("task.a", 0, 0); r.Status != protocol.FollowRunning || r.Attempt != 1 || r.FencingToken != a.FencingToken || len(r.Data) != 0 {
		t.Errorf("first follow = %+v; want running attempt 1, no data yet", r)
	}
	if r := beat(); len(r.FollowLogs) != 1 || r.FollowLogs[0] != a.FencingToken {
		t.Errorf("follow_logs once followed = %v; want [%d]", r.FollowLogs, a.FencingToken)
	}
	for _, c := range []struct {
		off  int64
		data string
		want int64
	}{
		{0, "hello ", 6},
		{10, "gap", 6},      // starts past the end: dropped
		{3, "lo world", 11}, // overlaps: only "world" is new
		{0, "hello", 11},    // already held
		{11, "\nbye\n", 16}, // continues
	} {
		if r := chunk(c.off, c.data); r.Offset != c.want || !r.Follow {
			t.Errorf("chunk %q at %d = %+v; want offset %d, follow", c.data, c.off, r, c.want)
		}
	}
	if _, err := other.cl.PostLogChunk(ctx, a.FencingToken, protocol.LogChunkRequest{WorkerID: other.id, Stream: protocol.StreamStdout, Data: []byte("x")}); protocol.StatusOf(err) != 403 {
		t.Errorf("a chunk from another worker: %v; want 403", err)
	}
	if r := follow("task.a", 0, 0); string(r.Data) != "hello world\nbye\n" || r.Offset != 16 {
		t.Errorf("follow from 0 = %q (next %d)", r.Data, r.Offset)
	}
	if r := follow("task.a", 1, 6); string(r.Data) != "world\nbye\n" || r.Offset != 16 {
		t.Errorf("follow from 6 = %q (next %d)", r.Data, r.Offset)
	}
	if _, err := ops.FollowLog(ctx, protocol.LogFollowRequest{Task: "task.zz", Stream: protocol.StreamStdout}); protocol.StatusOf(err) != 404 {
		t.Errorf("follow of an unknown task: %v; want 404", err)
	}
	if _, err := ops.FollowLog(ctx, protocol.LogFollowRequest{Task: "task.a", Stream: "stdin"}); protocol.StatusOf(err) != 400 {
		t.Errorf("follow of stream stdin: %v; want 400", err)
	}
	if _, err := w.cl.FollowLog(ctx, protocol.LogFollowRequest{Task: "task.a", Stream: protocol.StreamStdout}); protocol.StatusOf(err) != 401 {
		t.Errorf("follow with a session: %v; want 401", err)
	}

	zero := 0
	if r, err := w.cl.PostResult(ctx, a.FencingToken, protocol.ResultRequest{WorkerID: w.id, Task: a.Task, Attempt: a.Attempt, IdempotencyKey: "k",
		ExitCode: &zero, DefHash: a.DefHash}); err != nil || r.Decision != protocol.DecisionAccepted {
		t.Fatalf("result = %+v, %v", r, err)
	}
	if r := follow("task.a", 1, 16); r.Status != protocol.FollowEnded || r.Attempt != 1 {
		t.Errorf("follow after the result = %+v; want ended", r)
	}
	if r := chunk(16, "late"); r.Follow {
		t.Errorf("a chunk after the lease ended = %+v; want follow false", r)
	}
	if r := follow("task.a", 0, 0); r.Status != protocol.FollowEnded {
		t.Errorf("follow of the succeeded task = %+v; want ended", r)
	}
	// An attempt a finished task never made is not there: a typed 404,
	// not "ended".
	var pe *protocol.APIError
	if r, err := ops.FollowLog(ctx, protocol.LogFollowRequest{Task: "task.a", Attempt: 7, Stream: protocol.StreamStdout}); protocol.StatusOf(err) != 404 ||
		!errors.As(err, &pe) || pe.Code != "not_found" || pe.Message != "task.a has finished after 1 attempt, so it has no attempt 7" {
		t.Errorf("follow of attempt 7 of the succeeded task = %+v, %v; want 404 not_found", r, err)
	}
}
