package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/agent"
	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// LogsCmd prints an attempt's stdout or stderr from the work folder's
// artifact store, or follows a running attempt's output.
type LogsCmd struct {
	Address string `arg:"" name:"address" predictor:"address" help:"Task address (task.NAME, task.NAME[INDEX]) or bare name."`
	Attempt int    `name:"attempt" placeholder:"N" help:"Which attempt (default: the latest; with --follow, the running one or the next)."`
	Stderr  bool   `name:"stderr" help:"Print stderr instead of stdout."`
	Follow  bool   `name:"follow" short:"f" help:"While an apply runs, print the attempt's output as it comes, until the attempt ends (then the rest of its finished log)."`
}

// followWait is how long one follow request may wait for new output.
const followWait = 15 * time.Second

// Run prints the log exactly as the attempt wrote it (the bytes its
// accepted result bound), never redacted: a log is whatever the command
// printed. With --follow and an apply running, it streams the attempt's
// output through the apply's coordinator first.
func (c *LogsCmd) Run(e *env) error {
	addr := normalizeAddress(c.Address)
	if c.Attempt < 0 {
		return fmt.Errorf("--attempt must be 1 or more, have %d", c.Attempt)
	}
	if c.Follow {
		_, err := e.findApply("wdc logs --follow", false)
		var none errNoApply
		switch {
		case errors.As(err, &none):
			// Nothing runs: the finished log is all there is.
		case err != nil:
			return err
		default:
			return c.follow(e, addr)
		}
	}
	return c.printFinished(e, addr, c.Attempt, 0)
}

func (c *LogsCmd) stream() string {
	if c.Stderr {
		return protocol.StreamStderr
	}
	return protocol.StreamStdout
}

// follow long-polls the coordinator for the attempt's output, then prints
// the rest of its finished log from where the live output stopped.
func (c *LogsCmd) follow(e *env, addr string) error {
	cl, _, err := e.operatorClient("wdc logs --follow")
	if err != nil {
		return err
	}
	attempt, offset := c.Attempt, int64(0)
	announced := false
	for n := 0; ; n++ {
		wait := followWait
		if n == 0 {
			wait = 0 // the first answer says at once whether the attempt runs yet
		}
		ctx, cancel := callContext(wait)
		resp, err := cl.FollowLog(ctx, protocol.LogFollowRequest{Task: addr, Attempt: attempt, Stream: c.stream(), Offset: offset,
			WaitMS: wait.Milliseconds()})
		cancel()
		var ae *protocol.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == 404:
			// Not a task of this apply: what the state holds is final.
			return c.printFinished(e, addr, attempt, offset)
		case errors.As(err, &ae):
			return describeAPIError(err)
		case isUnreachable(err):
			// The apply ended (or went away) meanwhile: the state has
			// what it recorded.
			fmt.Fprintf(e.stderr, "wdc logs: the apply's coordinator cannot be reached any more (%v); printing what the state recorded.\n", err)
			return c.printFinished(e, addr, attempt, offset)
		case err != nil:
			return fmt.Errorf("following %s: %w", addr, err)
		}
		if _, err := e.stdout.Write(resp.Data); err != nil {
			return err
		}
		offset = resp.Offset
		switch resp.Status {
		case protocol.FollowWaiting:
			if !announced {
				fmt.Fprintf(e.stderr, "Waiting for %s to start an attempt…\n", addr)
				announced = true
			}
		case protocol.FollowRunning:
			attempt = resp.Attempt // stay with this attempt
		case protocol.FollowEnded:
			return c.printFinished(e, addr, attempt, offset)
		}
	}
}

// printFinished prints the attempt's finished log (attempt 0: the latest)
// from byte offset on.
func (c *LogsCmd) printFinished(e *env, addr string, number int, offset int64) error {
	ctx := context.Background()
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	st, err := openForReading(ctx, path)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("no task %s: there is no state file at %s", addr, path)
	}
	defer st.Close()
	if _, err := st.Task(ctx, addr); err != nil {
		if snap, serr := st.Snapshot(ctx); serr == nil {
			return unknownTask(snap, path, addr, "wdc logs")
		}
		return fmt.Errorf("no task %s in the state %s (see wdc tasks list)", addr, path)
	}
	attempts, err := st.Attempts(ctx, addr)
	if err != nil {
		return err
	}
	if len(attempts) == 0 {
		return fmt.Errorf("%s has no attempt yet", addr)
	}
	a := attempts[len(attempts)-1]
	if number != 0 {
		if a, err = attemptNumbered(addr, attempts, number); err != nil {
			return err
		}
	}
	name := c.stream()
	for _, x := range a.Artifacts {
		if x.Kind == state.ArtifactLog && x.Name == name {
			// An attempt that printed nothing names the empty blob: no
			// file holds it (its worker removed the empty log), and no
			// store or bucket is asked for it.
			var f io.ReadSeeker = strings.NewReader("")
			size := int64(0)
			if x.SHA256 != artifact.EmptyHash {
				store, err := e.blobStore(ctx, path, x.SHA256)
				if err != nil {
					return err
				}
				bf, n, err := store.Open(x.SHA256)
				if err != nil {
					return fmt.Errorf("the %s of %s attempt %d (blob %s) is not in the work folder's artifact store (wdc gc removes the blobs of replaced definitions): %w", name, addr, a.Number, x.SHA256, err)
				}
				defer bf.Close()
				f, size = bf, n
			}
			if offset > size {
				return fmt.Errorf("the finished %s of %s attempt %d is %d bytes, shorter than the %d printed while it ran", name, addr, a.Number, size, offset)
			}
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				return err
			}
			_, err = io.Copy(e.stdout, f)
			return err
		}
	}
	legacy := map[string]string{"stdout": a.StdoutPath, "stderr": a.StderrPath}[name]
	switch {
	case legacy != "" && offset == 0:
		f, _, err := regularfile.Open(legacy)
		if err != nil {
			return fmt.Errorf("%s attempt %d was recorded by an earlier version with its %s at %s: %w", addr, a.Number, name, legacy, err)
		}
		defer f.Close()
		_, err = io.Copy(e.stdout, f)
		return err
	case a.EndedAt.IsZero() && c.Follow:
		return fmt.Errorf("%s attempt %d is still recorded as running, but the apply that runs it is gone: no more output will come (the next apply retries it)", addr, a.Number)
	case a.EndedAt.IsZero():
		return fmt.Errorf("%s attempt %d is still running: its logs arrive with its result (wdc logs --follow prints them as they come)", addr, a.Number)
	case offset > 0:
		return fmt.Errorf("%s attempt %d ended without delivering its %s (%s): the lines above are what its worker sent while it ran", addr, a.Number, name, views.OrDash(a.Error))
	}
	if ok, err := e.printWorkerLog(path, addr, a, name); ok || err != nil {
		return err
	}
	switch {
	case a.FailureClass == state.FailureClassLost:
		return fmt.Errorf("%s attempt %d has no %s: its result never arrived (lost: %s)", addr, a.Number, name, views.OrDash(a.Error))
	case a.FailureClass == "":
		return fmt.Errorf("%s attempt %d has no %s: it was handed back before its result arrived (%s)", addr, a.Number, name, views.OrDash(a.Error))
	default:
		return fmt.Errorf("%s attempt %d has no %s: it ended without running its command (%s)", addr, a.Number, name, views.OrDash(a.Error))
	}
}

// printWorkerLog prints the log a local worker left in the work folder
// (<work>/logs/<task>/<attempt>/<name>) for an attempt whose result never
// arrived (lost, or handed back when an apply was interrupted), saying so
// on stderr. ok is false when there is no such file, or the attempt was
// refused (it never ran).
func (e *env) printWorkerLog(statePath, addr string, a state.Attempt, name string) (ok bool, err error) {
	if a.FailureClass == state.FailureClassRefused || a.FailureClass == state.FailureClassFailure {
		return false, nil
	}
	p := filepath.Join(filepath.Dir(statePath), "logs", agent.SanitizeTask(addr), strconv.Itoa(a.Number), name)
	f, _, err := regularfile.Open(p)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	fmt.Fprintf(e.stderr, "Note: the result of %s attempt %d never arrived (%s): this is the %s its worker left at %s.\n",
		addr, a.Number, views.OrDash(a.Error), name, p)
	_, err = io.Copy(e.stdout, f)
	return true, err
}

// isUnreachable reports whether err is a failure to reach the coordinator
// at all (refused, reset, timed out), not an answer.
func isUnreachable(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

// attemptNumbered returns the attempt of attempts (a task's, in order)
// whose number is n. Numbers can have gaps: a prefetched lease that was
// handed back before its attempt started used a number and recorded no
// attempt. The error lists the numbers there are.
func attemptNumbered(addr string, attempts []state.Attempt, n int) (state.Attempt, error) {
	numbers := make([]string, 0, len(attempts))
	for _, a := range attempts {
		if a.Number == n {
			return a, nil
		}
		numbers = append(numbers, strconv.Itoa(a.Number))
	}
	return state.Attempt{}, fmt.Errorf("%s has no attempt %d; its attempts: %s", addr, n, strings.Join(numbers, ", "))
}
