package agent

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// streamInterval is how often a followed attempt's logs are looked at
// for new bytes.
const streamInterval = 250 * time.Millisecond

// streamLogs sends an attempt's stdout and stderr to the coordinator as
// they grow, while someone follows them (a heartbeat answer listed the
// lease in follow_logs): every streamInterval, and a last time when the
// command ends. It stops when an answer says nobody follows any more, the
// coordinator refuses (the lease is another's), or the agent stops. The
// finished logs travel with the result in any case; this only lets a
// follower see them sooner.
func (a *Agent) streamLogs(ctx context.Context, at *attempt) {
	defer func() {
		a.mu.Lock()
		at.streaming = false
		a.mu.Unlock()
	}()
	log := a.log.With("task", at.asg.Task, "attempt", at.asg.Attempt, "token", at.asg.FencingToken)
	log.Debug("streaming the attempt's output to a follower")
	streams := []struct{ name, path string }{{protocol.StreamStdout, at.paths.stdout}, {protocol.StreamStderr, at.paths.stderr}}
	sent := map[string]int64{protocol.StreamStdout: -1, protocol.StreamStderr: -1} // -1: ask the coordinator first
	buf := make([]byte, protocol.MaxLogChunkBytes)
	tick := time.NewTicker(streamInterval)
	defer tick.Stop()
	for {
		last := false
		select {
		case <-ctx.Done():
			return
		case <-at.ended:
			last = true
		case <-tick.C:
		}
		for _, s := range streams {
			off, follow, err := a.sendLog(ctx, at, s.name, s.path, sent[s.name], buf)
			sent[s.name] = off
			var ae *protocol.APIError
			if errors.As(err, &ae) && ae.Status < 500 {
				log.Warn("the coordinator refused the attempt's output", "err", err)
				return
			}
			if err != nil {
				log.Debug("sending the attempt's output failed; trying again", "err", err)
			}
			if !follow {
				log.Debug("nobody follows the attempt's output any more")
				return
			}
		}
		if last {
			return
		}
	}
}

// sendLog posts what the file at path holds past off, in chunks of at
// most len(buf) bytes, and returns the coordinator's new offset and
// whether it still wants more. An off of -1 first asks the coordinator
// how much it holds (an empty chunk), so a restarted stream resends
// nothing.
func (a *Agent) sendLog(ctx context.Context, at *attempt, stream, path string, off int64, buf []byte) (int64, bool, error) {
	post := func(off int64, data []byte) (protocol.LogChunkResponse, error) {
		cctx, cancel := context.WithTimeout(ctx, a.callTimeout())
		defer cancel()
		return a.client.PostLogChunk(cctx, at.asg.FencingToken, protocol.LogChunkRequest{
			WorkerID: a.reg.WorkerID, Stream: stream, Offset: off, Data: data})
	}
	if off < 0 {
		resp, err := post(0, nil)
		if err != nil {
			return off, true, err
		}
		if off = resp.Offset; !resp.Follow {
			return off, false, nil
		}
	}
	f, _, err := regularfile.Open(path) // the task may have put a FIFO in its log's place
	if errors.Is(err, fs.ErrNotExist) {
		return off, true, nil // the command has not started yet
	}
	if err != nil {
		return off, true, err
	}
	defer f.Close()
	for {
		n, err := f.ReadAt(buf, off)
		if n == 0 {
			if err == io.EOF {
				err = nil
			}
			return off, true, err
		}
		resp, perr := post(off, buf[:n])
		if perr != nil {
			return off, true, perr
		}
		off = resp.Offset
		if !resp.Follow || n < len(buf) {
			return off, resp.Follow, nil
		}
	}
}
