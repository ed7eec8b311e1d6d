package coordinator

import (
	"context"
	"time"

	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Following a running attempt's output (docs/protocol.md, "Following
// logs"): `wdc logs --follow` long-polls POST /v1/operator/logs
// (FollowLog), which marks the attempt followed; the worker's next
// heartbeat answer lists its token in follow_logs, and the worker then
// sends its stdout and stderr as they grow (POST /v1/leases/{token}/log,
// LogChunk). The coordinator keeps them in memory only while the lease is
// active: the finished log is the blob the result binds, which the
// follower reads from where it stopped. Nobody following costs nothing.

const (
	// liveLogCap is how much of each stream of a followed attempt the
	// coordinator keeps (8 MiB); past it the worker is told to stop and
	// the follower gets the rest from the finished log.
	liveLogCap = 8 << 20
	// followTTL is how long an attempt stays followed after the last poll.
	followTTL = 30 * time.Second
	// followPollInterval is how often a waiting follow request looks again.
	followPollInterval = 100 * time.Millisecond
	// maxFollowAnswer is the most data one follow answer carries (512
	// KiB: in base64 it stays well under a client's answer limit,
	// protocol.MaxResponseBytes).
	maxFollowAnswer = 512 << 10
)

// liveLog is what the coordinator holds of a followed attempt's output.
type liveLog struct {
	streams       map[string][]byte
	followedUntil time.Time
	full          bool // a stream reached liveLogCap
}

// followedLocked reports whether someone follows the attempt of token.
// c.mu must be held.
func (c *Coordinator) followedLocked(token int64, now time.Time) bool {
	l := c.live[token]
	return l != nil && !l.full && now.Before(l.followedUntil)
}

// LogChunk appends a chunk of s's worker to the live log of its lease
// token (req is checked already: its stream, offset and size), and
// answers the offset it holds and whether someone still follows the
// attempt (follow false: the worker stops sending). A chunk for a lease
// that ended, or that nobody follows, is not kept. Errors (*Error): a
// lease of another worker (CodeForbidden).
func (c *Coordinator) LogChunk(s Session, token int64, req protocol.LogChunkRequest) (protocol.LogChunkResponse, error) {
	w := s.w
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.leases[token]
	if l == nil {
		return protocol.LogChunkResponse{Offset: req.Offset, Follow: false}, nil
	}
	if l.worker != w.id {
		return protocol.LogChunkResponse{}, refuse(CodeForbidden, "", "lease %d belongs to another worker, not %s", token, w.id)
	}
	live := c.live[token]
	if live == nil {
		return protocol.LogChunkResponse{Offset: req.Offset, Follow: false}, nil
	}
	buf := live.streams[req.Stream]
	cur := int64(len(buf))
	if req.Offset <= cur && req.Offset+int64(len(req.Data)) > cur {
		add := req.Data[cur-req.Offset:]
		if room := liveLogCap - cur; int64(len(add)) > room {
			add, live.full = add[:room], true
		}
		buf = append(buf, add...)
		live.streams[req.Stream] = buf
	}
	return protocol.LogChunkResponse{Offset: int64(len(buf)), Follow: c.followedLocked(token, now)}, nil
}

// FollowLog answers a follow request (checked already): the live bytes of
// the attempt from the offset on, waiting up to the request's wait
// (capped by MaxClaimWait) for some while it runs (or has not started).
// An attempt that ended is "ended": the follower reads the finished log
// from the state. Errors (*Error): a task the apply does not run, or an
// attempt of a finished task that never was (CodeNotFound); ctx's; the
// state's.
func (c *Coordinator) FollowLog(ctx context.Context, req protocol.LogFollowRequest) (protocol.LogFollowResponse, error) {
	resp := protocol.LogFollowResponse{Task: req.Task, Offset: req.Offset, Data: []byte{}}
	c.mu.Lock()
	ts := c.tasks[req.Task]
	c.mu.Unlock()
	if ts == nil {
		return resp, refuse(CodeNotFound, "", "the running apply has no task %s", req.Task)
	}
	wait := min(time.Duration(min(req.WaitMS, int64(c.maxClaimWait/time.Millisecond)))*time.Millisecond, c.maxClaimWait)
	deadline := time.Now().Add(wait)
	for {
		now := c.now()
		c.mu.Lock()
		var token int64
		var lease *leaseState
		for t, l := range c.leases {
			if l.task == req.Task && (req.Attempt == 0 || l.attempt == req.Attempt) {
				token, lease = t, l
			}
		}
		status := ts.status
		if lease != nil {
			live := c.live[token]
			if live == nil {
				live = &liveLog{streams: map[string][]byte{}}
				c.live[token] = live
			}
			live.followedUntil = now.Add(followTTL)
			resp.Status, resp.Attempt, resp.FencingToken = protocol.FollowRunning, lease.attempt, token
			if buf := live.streams[req.Stream]; req.Offset < int64(len(buf)) {
				end := min(int64(len(buf)), req.Offset+maxFollowAnswer)
				resp.Data = append([]byte(nil), buf[req.Offset:end]...)
				resp.Offset = end
				c.mu.Unlock()
				return resp, nil
			}
			c.mu.Unlock()
		} else {
			c.mu.Unlock()
			resp.Attempt, resp.FencingToken = 0, 0
			ended := status == state.TaskSucceeded || status == state.TaskFailed || status == state.TaskCancelled
			if req.Attempt != 0 {
				t, err := c.store.Task(ctx, req.Task)
				if err != nil {
					return resp, err
				}
				if ended && t.Attempts < req.Attempt {
					// It has ended: that attempt will never be.
					return resp, noAttempt(req.Task, req.Attempt, t.Attempts)
				}
				ended = ended || t.Attempts >= req.Attempt
			}
			if ended {
				resp.Status, resp.Attempt = protocol.FollowEnded, req.Attempt
				return resp, nil
			}
			resp.Status = protocol.FollowWaiting
		}
		if !time.Now().Before(deadline) {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(min(followPollInterval, time.Until(deadline))):
		}
	}
}

// noAttempt is the refusal of a follow request for attempt n of the
// finished task addr, which made only attempts attempts.
func noAttempt(addr string, n, attempts int) *Error {
	if attempts == 0 {
		return refuse(CodeNotFound, "", "%s has finished without an attempt: it has no attempt %d", addr, n)
	}
	return refuse(CodeNotFound, "", "%s has finished after %s, so it has no attempt %d", addr, plural.Count(attempts, "attempt", "attempts"), n)
}
