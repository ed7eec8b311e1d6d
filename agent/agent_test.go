package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
)

func TestHeartbeatsArriveWhileATaskRuns(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	f := newFakeCoord(1, interval, 3*time.Second)
	s := startFake(t, f)
	startAgent(t, s.URL(), nil)
	// The task lasts well over three heartbeat intervals.
	asg := f.add(assignment(t, "task.long", "sleep", "1"))[0]

	var res resultRec
	waitFor(t, 20*time.Second, "the result", func() (ok bool) { res, ok = f.result(asg.FencingToken); return })
	if res.req.FailureClass != "" || res.req.ExitCode == nil || *res.req.ExitCode != 0 {
		t.Fatalf("result = %+v, want success", res.req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	during := 0
	for _, hb := range f.heartbeats {
		if slices.Contains(hb.leases, asg.FencingToken) && hb.at.Before(res.at) {
			during++
		}
	}
	if during < 3 {
		t.Errorf("%d heartbeats listed the lease while its 1 s task ran (interval %s), want at least 3", during, interval)
	}
}

func TestCapacityIsRespected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ignoreMax bool // the coordinator grants more than max
	}{
		{"coordinator honours max", false},
		{"coordinator ignores max", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(2, 100*time.Millisecond, 3*time.Second)
			f.ignoreMax = tt.ignoreMax
			s := startFake(t, f)
			var asgs []protocol.Assignment
			for _, name := range []string{"task.a", "task.b", "task.c", "task.d"} {
				asgs = append(asgs, assignment(t, name, "sleep", "0.3"))
			}
			f.add(asgs...)
			startAgent(t, s.URL(), nil)
			waitFor(t, 20*time.Second, "4 results", func() bool { return len(f.resultsCopy()) >= 4 })

			// Intervals during which commands ran, as the agent measured them.
			type event struct {
				at    time.Time
				delta int
			}
			var events []event
			ran, lost := 0, 0
			for _, r := range f.resultsCopy() {
				switch r.req.FailureClass {
				case "":
					ran++
					events = append(events, event{r.req.StartedAt, +1}, event{r.req.EndedAt, -1})
				case ClassLost:
					lost++
					if !strings.Contains(r.req.Error, "free slots") {
						t.Errorf("lost result error = %q", r.req.Error)
					}
				default:
					t.Errorf("unexpected result %+v", r.req)
				}
			}
			sort.Slice(events, func(i, j int) bool {
				if events[i].at.Equal(events[j].at) {
					return events[i].delta < events[j].delta // an end before a start at the same instant
				}
				return events[i].at.Before(events[j].at)
			})
			cur, peak := 0, 0
			for _, e := range events {
				cur += e.delta
				peak = max(peak, cur)
			}
			if peak > 2 {
				t.Errorf("%d attempts ran at once, capacity is 2", peak)
			}
			if tt.ignoreMax {
				if ran != 2 || lost != 2 {
					t.Errorf("ran %d, lost %d; want 2 run and 2 returned as lost", ran, lost)
				}
			} else if ran != 4 {
				t.Errorf("ran %d attempts, want 4", ran)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, c := range f.claims {
				if c.req.Max < 1 || c.req.Max > 2 {
					t.Errorf("claim asked for max %d, want 1..2", c.req.Max)
				}
			}
		})
	}
}

func TestAttemptEnvironmentAndLogs(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	a := startAgent(t, s.URL(), nil)
	asg := assignment(t, "task.env[2]", "sh", "-c", `env; echo "pwd=$(pwd)"; ls -A "$WDC_ATTEMPT_DIR" | wc -l | sed 's/ //g;s/^/scratch_entries=/'; wc -c | sed 's/ //g;s/^/stdin_bytes=/'; [ -e /proc/self/fd/0 ] && echo "stdin=$(readlink /proc/self/fd/0)"; echo to-stderr >&2`)
	asg.Definition.Env = map[string]string{"FOO": "bar", "WDC_TASK": "spoofed"}
	asg.Attempt = 3
	asg = f.add(asg)[0]

	var res resultRec
	waitFor(t, 20*time.Second, "the result", func() (ok bool) { res, ok = f.result(asg.FencingToken); return })
	if res.req.FailureClass != "" {
		t.Fatalf("result = %+v", res.req)
	}
	// The logs travel by hash: the result names them, no path.
	wantLogDir := filepath.Join(a.opts.WorkDir, "logs", "task.env.2", "3")
	if res.req.StdoutPath != "" || res.req.StderrPath != "" {
		t.Errorf("the result names log paths %q, %q", res.req.StdoutPath, res.req.StderrPath)
	}
	logs := map[string]protocol.ArtifactRef{}
	for _, ar := range res.req.Artifacts {
		logs[ar.Name] = ar
	}
	for _, name := range []string{"stdout", "stderr"} {
		h, size, err := artifact.HashFile(filepath.Join(wantLogDir, name))
		if ar := logs[name]; err != nil || ar.Kind != protocol.ArtifactLog || ar.SHA256 != h || ar.Size != size {
			t.Errorf("artifact %s = %+v; want the hash %s and size %d of %s (%v)", name, ar, h, size, filepath.Join(wantLogDir, name), err)
		}
	}
	if res.req.DefHash != asg.DefHash {
		t.Errorf("result def_hash %q; want the assignment's %q", res.req.DefHash, asg.DefHash)
	}
	if res.req.WorkerID != "w-1" || res.req.Task != "task.env[2]" || res.req.Attempt != 3 || res.req.IdempotencyKey != "w-1-101" {
		t.Errorf("result identity = %+v", res.req)
	}
	if !res.req.EndedAt.After(res.req.StartedAt) {
		t.Errorf("ended %v not after started %v", res.req.EndedAt, res.req.StartedAt)
	}
	out, err := os.ReadFile(filepath.Join(wantLogDir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	stdout := string(out)
	scratch := filepath.Join(a.opts.WorkDir, "scratch", "task.env.2", "3")
	for _, want := range []string{
		"\nWDC_TASK=task.env[2]\n",
		"\nWDC_ATTEMPT=3\n",
		"\nWDC_WORKER_ID=w-1\n",
		"\nWDC_FENCING_TOKEN=101\n",
		"\nWDC_ATTEMPT_DIR=" + scratch + "\n",
		"\nFOO=bar\n",
		"\nBASE_VAR=from-agent\n",
		"\npwd=" + asg.WorkDir + "\n",
		"\nscratch_entries=0\n",
		"\nstdin_bytes=0\n",
	} {
		if !strings.Contains("\n"+stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", strings.TrimSpace(want), stdout)
		}
	}
	if strings.Contains(stdout, protocol.LaunchCredentialEnv) || strings.Contains(stdout, protocol.SessionTokenEnv) ||
		strings.Contains(stdout, "=tok\n") || strings.Contains(stdout, "leaked-session") {
		t.Errorf("a credential leaked into the task's environment:\n%s", stdout)
	}
	if _, err := os.Stat("/proc/self/fd/0"); err == nil && !strings.Contains(stdout, "\nstdin=/dev/null\n") {
		t.Errorf("stdin is not /dev/null:\n%s", stdout)
	}
	if strings.Contains(stdout, "spoofed") {
		t.Errorf("the task's env overrode WDC_TASK:\n%s", stdout)
	}
	// The scratch folder of an attempt that succeeded goes once its result
	// is accepted; logs that hold something stay.
	waitFor(t, 20*time.Second, "the scratch folder removed", func() bool {
		_, err := os.Lstat(scratch)
		return errors.Is(err, fs.ErrNotExist)
	})
	errOut, _ := os.ReadFile(filepath.Join(wantLogDir, "stderr"))
	if string(errOut) != "to-stderr\n" {
		t.Errorf("stderr log = %q", errOut)
	}
	// The folder name needs no quoting; the address itself is kept beside it.
	if addr, err := os.ReadFile(filepath.Join(a.opts.WorkDir, "logs", "task.env.2", "address")); err != nil || string(addr) != "task.env[2]\n" {
		t.Errorf("address file = %q, %v; want \"task.env[2]\\n\"", addr, err)
	}
}

func TestAttemptOutcomes(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(8, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	startAgent(t, s.URL(), nil)
	notADir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notADir, nil, 0o644)
	tests := []struct {
		name      string
		asg       protocol.Assignment
		class     string
		errPrefix string
		exitCode  int // -1: no exit code
		signal    string
	}{
		{"success", assignment(t, "task.ok", "true"), "", "", 0, ""},
		{"non-zero exit", assignment(t, "task.exit3", "sh", "-c", "exit 3"), ClassFailure, "exit status 3", 3, ""},
		{"killed by a signal it caused", assignment(t, "task.sig", "sh", "-c", "kill -KILL $$"), ClassFailure, "killed by SIGKILL", -1, "SIGKILL"},
		{"command not found", assignment(t, "task.nf", "wdc-no-such-command-xyz"), ClassRefused, "refused: command:", -1, ""},
		{"empty command", assignment(t, "task.empty"), ClassRefused, "refused: the task has no command", -1, ""},
		{"NUL in an argument", assignment(t, "task.nul", "echo", "a\x00b"), ClassRefused, "refused: element 1 of the command holds a NUL character", -1, ""},
		{"env name with =", func() protocol.Assignment {
			a := assignment(t, "task.eqenv", "true")
			a.Definition.Env["A=B"] = "x"
			return a
		}(), ClassRefused, `refused: an env name holds "="`, -1, ""},
		{"empty env name", func() protocol.Assignment {
			a := assignment(t, "task.emptyenv", "true")
			a.Definition.Env[""] = "x"
			return a
		}(), ClassRefused, "refused: an env name is empty", -1, ""},
		{"NUL in an env value", func() protocol.Assignment {
			a := assignment(t, "task.nulenv", "true")
			a.Definition.Env["A"] = "x\x00y"
			return a
		}(), ClassRefused, "refused: an env value holds a NUL character", -1, ""},
		{"missing directory", func() protocol.Assignment {
			a := assignment(t, "task.nodir", "true")
			a.WorkDir = filepath.Join(a.WorkDir, "missing")
			return a
		}(), ClassRefused, "refused: working directory", -1, ""},
		{"directory is a file", func() protocol.Assignment {
			a := assignment(t, "task.filedir", "true")
			a.WorkDir = notADir
			return a
		}(), ClassRefused, "refused: working directory", -1, ""},
		{"relative command path resolves against the work dir", func() protocol.Assignment {
			a := assignment(t, "task.rel", "./run.sh")
			os.WriteFile(filepath.Join(a.WorkDir, "run.sh"), []byte("#!/bin/sh\nexit 4\n"), 0o755)
			return a
		}(), ClassFailure, "exit status 4", 4, ""},
	}
	for i := range tests {
		tests[i].asg = f.add(tests[i].asg)[0]
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res resultRec
			waitFor(t, 20*time.Second, "the result", func() (ok bool) { res, ok = f.result(tt.asg.FencingToken); return })
			r := res.req
			if r.FailureClass != tt.class || !strings.HasPrefix(r.Error, tt.errPrefix) || r.Signal != tt.signal {
				t.Errorf("result = class %q error %q signal %q; want %q, %q…, %q", r.FailureClass, r.Error, r.Signal, tt.class, tt.errPrefix, tt.signal)
			}
			if ran := tt.class != ClassRefused; ran != (len(r.Artifacts) == 2) {
				t.Errorf("log artifacts %+v for a command that ran: %v", r.Artifacts, ran)
			}
			switch {
			case tt.exitCode < 0 && r.ExitCode != nil:
				t.Errorf("exit code = %d, want none", *r.ExitCode)
			case tt.exitCode >= 0 && (r.ExitCode == nil || *r.ExitCode != tt.exitCode):
				t.Errorf("exit code = %v, want %d", r.ExitCode, tt.exitCode)
			}
		})
	}
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		{"group obeys SIGTERM", `sleep 60 & echo $! > "$WDC_ATTEMPT_DIR/child.pid"; wait`},
		{"group ignores SIGTERM", `trap "" TERM; sleep 60 & echo $! > "$WDC_ATTEMPT_DIR/child.pid"; wait; wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
			s := startFake(t, f)
			a := startAgent(t, s.URL(), nil)
			asg := assignment(t, "task.slow", "sh", "-c", tt.script)
			asg.TimeoutMS = 500
			asg = f.add(asg)[0]
			child := readPID(t, filepath.Join(a.opts.WorkDir, "scratch", "task.slow", "1", "child.pid"))

			var res resultRec
			waitFor(t, 20*time.Second, "the result", func() (ok bool) { res, ok = f.result(asg.FencingToken); return })
			if res.req.FailureClass != ClassFailure || res.req.Error != "timed out after 500ms" {
				t.Errorf("result = class %q error %q, want failure, timed out after 500ms", res.req.FailureClass, res.req.Error)
			}
			waitFor(t, 5*time.Second, "the grandchild sleep to be gone", func() bool { return processGone(child) })
		})
	}
}

func TestResultIsRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 10*time.Second)
	s := startFake(t, f)
	var refusedResultPosts atomic.Int32
	// The first post is answered 503 and the server goes down; the next
	// one is refused; once the agent has seen that, the server comes back.
	f.resultHook = func(n int, r *http.Request) int {
		if n == 1 {
			s.down()
			return http.StatusServiceUnavailable
		}
		return 0
	}
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil && strings.HasSuffix(r.URL.Path, "/result") && errors.Is(err, syscall.ECONNREFUSED) {
			refusedResultPosts.Add(1)
			s.up(t)
		}
		return resp, err
	})}
	startAgent(t, s.URL(), func(o *Options) { o.HTTPClient = hc })
	asg := f.add(assignment(t, "task.r", "true"))[0]

	waitFor(t, 20*time.Second, "two result posts", func() bool { return len(f.resultsCopy()) >= 2 })
	results := f.resultsCopy()
	if refusedResultPosts.Load() < 1 {
		t.Errorf("no result post was refused a connection; the test did not test what it means to")
	}
	for _, r := range results {
		if r.token != asg.FencingToken || r.req.IdempotencyKey != "w-1-101" {
			t.Errorf("post for token %d with key %q, want token %d and key w-1-101", r.token, r.req.IdempotencyKey, asg.FencingToken)
		}
	}
	if results[0].req.StartedAt != results[1].req.StartedAt {
		t.Errorf("retried post differs from the first: %+v vs %+v", results[0].req, results[1].req)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCancelLeasesStopsTheAttemptAndStillPostsItsResult(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	startAgent(t, s.URL(), nil)
	asg := f.add(assignment(t, "task.c", "sleep", "60"))[0]
	waitFor(t, 10*time.Second, "a heartbeat listing the lease", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.heartbeats) > 0 && slices.Contains(f.heartbeats[len(f.heartbeats)-1].leases, asg.FencingToken)
	})
	f.set(func(f *fakeCoord) { f.cancelLeases = []int64{asg.FencingToken, 999} })

	var res resultRec
	waitFor(t, 10*time.Second, "the result", func() (ok bool) { res, ok = f.result(asg.FencingToken); return })
	if res.req.FailureClass != ClassLost || !strings.Contains(res.req.Error, "cancelled the lease") || res.req.Signal != "SIGTERM" {
		t.Errorf("result = class %q error %q signal %q; want lost, cancelled, SIGTERM", res.req.FailureClass, res.req.Error, res.req.Signal)
	}
	// The worker stops listing the lease once its result is posted.
	waitFor(t, 10*time.Second, "a heartbeat without the lease", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		hb := f.heartbeats[len(f.heartbeats)-1]
		return hb.at.After(res.at) && !slices.Contains(hb.leases, asg.FencingToken)
	})
}

func TestDrainOnContextCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		command      []string
		drainTimeout time.Duration
		class        string
		errContains  string
	}{
		// each prints first: its stdout log is made at the first byte
		{"attempt finishes within the drain timeout", []string{"sh", "-c", "echo started; exec sleep 0.5"}, 30 * time.Second, "", ""},
		{"attempt outlives the drain timeout", []string{"sh", "-c", "echo started; exec sleep 60"}, 300 * time.Millisecond, ClassLost, "still running 300ms after the worker began to drain (its drain timeout)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
			s := startFake(t, f)
			a := startAgent(t, s.URL(), func(o *Options) { o.DrainTimeout = tt.drainTimeout })
			asg := assignment(t, "task.d", tt.command[0])
			asg.Definition.Command = tt.command
			asg = f.add(asg)[0]
			waitFor(t, 10*time.Second, "the attempt to start", func() bool {
				// Its empty log goes once its result is accepted.
				_, err := os.Stat(filepath.Join(a.opts.WorkDir, "logs", "task.d", "1", "stdout"))
				_, posted := f.result(asg.FencingToken)
				return err == nil || posted
			})
			cancelled := time.Now()
			a.cancel()
			if err := a.wait(t, 20*time.Second); err != nil {
				t.Fatalf("Run = %v, want nil after a drain", err)
			}
			res, ok := f.result(asg.FencingToken)
			if !ok {
				t.Fatal("Run returned before posting the result")
			}
			if res.req.FailureClass != tt.class || !strings.Contains(res.req.Error, tt.errContains) {
				t.Errorf("result = class %q error %q; want %q containing %q", res.req.FailureClass, res.req.Error, tt.class, tt.errContains)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, c := range f.claims {
				if c.at.After(cancelled.Add(100 * time.Millisecond)) {
					t.Errorf("claim at +%s after the drain began", c.at.Sub(cancelled))
				}
			}
		})
	}
}

func TestCoordinatorAsksToDrain(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 50*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	a := startAgent(t, s.URL(), nil)
	asg := f.add(assignment(t, "task.x", "sleep", "0.3"))[0]
	waitFor(t, 10*time.Second, "a heartbeat listing the lease", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.heartbeats) > 0 && slices.Contains(f.heartbeats[len(f.heartbeats)-1].leases, asg.FencingToken)
	})
	f.set(func(f *fakeCoord) { f.drain = true })
	if err := a.wait(t, 20*time.Second); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if res, ok := f.result(asg.FencingToken); !ok || res.req.FailureClass != "" {
		t.Errorf("result = %+v, %v; want the attempt to finish and succeed", res.req, ok)
	}
	// A clean exit deregisters the worker, once, after its last result.
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaves != 1 {
		t.Errorf("the drained agent left %d times, want 1", f.leaves)
	}
}

func TestUnreachableCoordinatorStopsTheAgent(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond
	f := newFakeCoord(1, 100*time.Millisecond, ttl)
	s := startFake(t, f)
	a := startAgent(t, s.URL(), nil)
	f.add(assignment(t, "task.u", "sh", "-c", `echo $$ > "$WDC_ATTEMPT_DIR/pid"; exec sleep 60`))
	pid := readPID(t, filepath.Join(a.opts.WorkDir, "scratch", "task.u", "1", "pid"))

	s.down()
	downAt := time.Now()
	err := a.wait(t, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "longer than the worker's ttl") {
		t.Fatalf("Run = %v, want an unreachable-coordinator error", err)
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("Run = %v, want it to wrap ErrUnreachable", err)
	}
	if took := time.Since(downAt); took < ttl {
		t.Errorf("gave up after %s, before the ttl of %s", took, ttl)
	}
	if !processGone(pid) {
		t.Errorf("attempt process %d still runs after the agent exited", pid)
	}
	if !strings.Contains(a.logs.String(), "abandoned leases") {
		t.Errorf("logs do not report the abandoned lease:\n%s", a.logs.String())
	}
}

func TestFatalAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		set     func(f *fakeCoord)
		opts    func(o *Options)
		wantErr string
	}{
		{"401 at registration", func(f *fakeCoord) { f.registerError = 401 }, nil, "refused the credential"},
		{"wrong credential", nil, func(o *Options) { o.Environ = []string{protocol.LaunchCredentialEnv + "=wrong"} }, "refused the credential"},
		{"credential of another pool", nil, func(o *Options) { o.Pool = "other" }, `belongs to pool "builders", not "other"`},
		{"401 on heartbeat and claim", func(f *fakeCoord) { f.workerError = 401 }, nil, "refused the worker's session"},
		{"404 unknown worker", func(f *fakeCoord) { f.workerError = 404 }, nil, "does not know worker w-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(1, 50*time.Millisecond, 3*time.Second)
			if tt.set != nil {
				tt.set(f)
			}
			s := startFake(t, f)
			a := startAgent(t, s.URL(), tt.opts)
			err := a.wait(t, 10*time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewRejectsIncompleteOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no server", Options{WorkDir: "/tmp", Credential: "t"}, "coordinator URL is required"},
		{"no work dir", Options{ServerURL: "http://x", Credential: "t"}, "work folder is required"},
		{"no credential", Options{ServerURL: "http://x", WorkDir: "/tmp", Environ: []string{}}, "no credential: set " + protocol.LaunchCredentialEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestHealthDiscountsPauses(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var h health
	if d, _ := h.failingFor(t0); d != 0 {
		t.Fatalf("fresh tracker failing for %s", d)
	}
	h.fail(t0, errors.New("refused"))
	h.fail(t0.Add(2*time.Second), errors.New("refused again"))
	if d, err := h.failingFor(t0.Add(3 * time.Second)); d != 3*time.Second || err.Error() != "refused again" {
		t.Errorf("failing for %s (%v), want 3s since the first failure", d, err)
	}
	// Paused for 60 s, resumed at t0+64s: only 4 s of running time failed.
	h.paused(t0.Add(64*time.Second), 60*time.Second)
	if d, _ := h.failingFor(t0.Add(64 * time.Second)); d != 4*time.Second {
		t.Errorf("after a pause: failing for %s, want 4s", d)
	}
	// A pause longer than the failing period cannot move its start past now.
	h.paused(t0.Add(65*time.Second), time.Hour)
	if d, _ := h.failingFor(t0.Add(65 * time.Second)); d != 0 {
		t.Errorf("failing for %s, want 0", d)
	}
	h.ok()
	h.paused(t0.Add(70*time.Second), time.Second)
	if d, _ := h.failingFor(t0.Add(70 * time.Second)); d != 0 {
		t.Errorf("after success: failing for %s", d)
	}
}

func TestBackoffIsCappedAndGrows(t *testing.T) {
	t.Parallel()
	b := backoff{base: 100 * time.Millisecond, max: time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000, 1000} {
		want *= time.Millisecond
		for range 20 {
			if d := b.delay(n); d < want*8/10 || d > want*12/10 {
				t.Fatalf("delay(%d) = %s, want %s ± 20%%", n, d, want)
			}
		}
	}
}

func TestSanitizeTask(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"task.x[2]":     "task.x.2",
		"task.shard-a":  "task.shard-a",
		"task.a[10]":    "task.a.10",
		"task.a/b":      "task.a_b",
		"task.../../x":  "task..._.._x",
		"":              "_",
		".":             "_.",
		"..":            "_..",
		"task.\x00null": "task._null",
	} {
		if got := SanitizeTask(in); got != want {
			t.Errorf("SanitizeTask(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookPathUsesTheTaskPath(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(bin, "notexec"), []byte("x"), 0o644)
	if p, err := lookPath("mytool", "/", "relative:"+bin); err != nil || p != filepath.Join(bin, "mytool") {
		t.Errorf("lookPath = %q, %v", p, err)
	}
	if _, err := lookPath("notexec", "/", bin); err == nil {
		t.Error("found a file that is not executable")
	}
	if _, err := lookPath("mytool", "/", "relative"); err == nil {
		t.Error("searched a relative PATH entry")
	}
	if p, err := lookPath("./mytool", bin, ""); err != nil || p != filepath.Join(bin, "mytool") {
		t.Errorf("relative path: %q, %v", p, err)
	}
}

func TestDuplicateGrantRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(2, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	asg := f.add(assignment(t, "task.dup", "sleep", "0.2"))[0]
	f.set(func(f *fakeCoord) { f.queue = append(f.queue, asg) }) // the same lease again
	a := startAgent(t, s.URL(), nil)
	waitFor(t, 20*time.Second, "the result", func() bool { _, ok := f.result(asg.FencingToken); return ok })
	a.cancel()
	if err := a.wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(f.resultsCopy()); n != 1 {
		t.Errorf("%d results posted for one lease granted twice, want 1", n)
	}
}

// TestResultUploadsWhatTheCoordinatorLacks: a result answered
// missing_artifacts uploads exactly the blobs named, from the attempt's
// log files, then posts again; a blob the coordinator holds already is
// not sent.
func TestResultUploadsWhatTheCoordinatorLacks(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	empty := sha256.Sum256(nil)
	f.blobs = map[string][]byte{hex.EncodeToString(empty[:]): nil} // it holds the empty log
	s := startFake(t, f)
	startAgent(t, s.URL(), nil)
	asg := f.add(assignment(t, "task.up", "sh", "-c", "echo some output"))[0]
	var res resultRec
	waitFor(t, 20*time.Second, "the result", func() (ok bool) { res, ok = f.result(asg.FencingToken); return })
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.puts != 1 {
		t.Errorf("%d uploads; want 1 (stdout; the empty stderr is held already)", f.puts)
	}
	sum := sha256.Sum256([]byte("some output\n"))
	if got := f.blobs[hex.EncodeToString(sum[:])]; string(got) != "some output\n" {
		t.Errorf("uploaded stdout %q", got)
	}
	if res.req.FailureClass != "" || len(res.req.Artifacts) != 2 {
		t.Errorf("result = %+v", res.req)
	}
}

// TestQuietAttemptsLeaveNothing: an attempt that prints nothing names
// both its logs as the empty blob, which a coordinator that lacks it gets
// from memory (there is no file to send), and once its result is accepted
// nothing of it is left in the work folder: no log, no log or scratch
// folder, no address file; a failed attempt keeps what it left in its
// scratch folder, and its logs that hold something.
func TestQuietAttemptsLeaveNothing(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	f.blobs = map[string][]byte{} // it lacks even the empty blob
	s := startFake(t, f)
	a := startAgent(t, s.URL(), nil)
	quiet := assignment(t, "task.quiet[0]", "true")
	quiet.WorkDir, quiet.Definition.Dir = "", ""
	failed := assignment(t, "task.failed", "sh", "-c", `echo kept > "$WDC_ATTEMPT_DIR/left.txt"; echo why >&2; exit 3`)
	asgs := f.add(quiet, failed)
	var rq resultRec
	waitFor(t, 20*time.Second, "the results", func() bool {
		var ok bool
		rq, ok = f.result(asgs[0].FencingToken)
		_, ok2 := f.result(asgs[1].FencingToken)
		return ok && ok2
	})
	if rq.req.FailureClass != "" || len(rq.req.Artifacts) != 2 {
		t.Fatalf("quiet result %+v", rq.req)
	}
	for _, ar := range rq.req.Artifacts {
		if ar.Kind != protocol.ArtifactLog || ar.SHA256 != artifact.EmptyHash || ar.Size != 0 {
			t.Errorf("log %+v; want the empty blob", ar)
		}
	}
	f.mu.Lock()
	got, held := f.blobs[artifact.EmptyHash]
	f.mu.Unlock()
	if !held || len(got) != 0 {
		t.Errorf("the coordinator got the empty blob: %v (%q)", held, got)
	}
	work := a.opts.WorkDir
	want := []string{"logs/task.failed/", "logs/task.failed/1/", "logs/task.failed/1/stderr", "logs/task.failed/address",
		"scratch/task.failed/", "scratch/task.failed/1/", "scratch/task.failed/1/left.txt"}
	left := func() string {
		var out []string
		for _, d := range []string{"logs", "scratch", "staging"} {
			for _, e := range entriesBelow(t, filepath.Join(work, d)) {
				out = append(out, d+"/"+e)
			}
		}
		return strings.Join(out, " ")
	}
	deadline := time.Now().Add(20 * time.Second)
	for left() != strings.Join(want, " ") {
		if time.Now().After(deadline) {
			t.Fatalf("the work folder holds\n  %s\nwant\n  %s", left(), strings.Join(want, " "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDefinitionCheckAndAttemptDirectory: the agent recomputes the hash of
// the definition it was handed and refuses a mismatch
// (definition_mismatch) without running it; a task that runs in its
// attempt's directory gets its inputs there, checked by hash, and its
// declared outputs are named in the result; a declared output that is not
// produced fails the attempt.
func TestDefinitionCheckAndAttemptDirectory(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	input := []byte("the input\n")
	sum := sha256.Sum256(input)
	inHash := hex.EncodeToString(sum[:])
	f.blobs = map[string][]byte{inHash: input}
	s := startFake(t, f)
	startAgent(t, s.URL(), nil)

	bad := assignment(t, "task.tampered", "touch", "ran")
	bad.DefHash = strings.Repeat("0", 64)
	good := assignment(t, "task.io", "sh", "-c", "mkdir -p out && tr a-z A-Z < in/data.txt > out/up.txt && pwd > out/pwd.txt")
	good.WorkDir = ""
	good.Definition.Dir = ""
	good.Definition.Outputs = []string{"out/*.txt"}
	good.Definition.Inputs = []protocol.InputFile{{Path: "in/data.txt", SHA256: inHash, Size: int64(len(input))}}
	good.Inputs = good.Definition.Inputs
	lazy := assignment(t, "task.lazy", "true")
	lazy.WorkDir = ""
	lazy.Definition.Dir = ""
	lazy.Definition.Outputs = []string{"report.html"}
	asgs := f.add(bad, good, lazy)

	var rb, rg, rl resultRec
	waitFor(t, 20*time.Second, "the results", func() bool {
		var ok1, ok2, ok3 bool
		rb, ok1 = f.result(asgs[0].FencingToken)
		rg, ok2 = f.result(asgs[1].FencingToken)
		rl, ok3 = f.result(asgs[2].FencingToken)
		return ok1 && ok2 && ok3
	})
	if rb.req.FailureClass != ClassRefused || !strings.Contains(rb.req.Error, "definition_mismatch") {
		t.Errorf("tampered assignment: %+v; want refused definition_mismatch", rb.req)
	}
	if _, err := os.Stat(filepath.Join(bad.WorkDir, "ran")); err == nil {
		t.Errorf("the tampered command ran")
	}
	if rg.req.FailureClass != "" {
		t.Fatalf("io task: %+v", rg.req)
	}
	outs := map[string]protocol.ArtifactRef{}
	for _, a := range rg.req.Artifacts {
		if a.Kind == protocol.ArtifactOutput {
			outs[a.Name] = a
		}
	}
	f.mu.Lock()
	up, pwd := string(f.blobs[outs["out/up.txt"].SHA256]), string(f.blobs[outs["out/pwd.txt"].SHA256])
	f.mu.Unlock()
	if up != "THE INPUT\n" || !strings.Contains(pwd, filepath.Join("scratch", "task.io", "1")) {
		t.Errorf("outputs %q, %q (from %+v); want the input upper-cased, made in the attempt's directory", up, pwd, outs)
	}
	if outs["out/up.txt"].MediaType != "text/plain; charset=utf-8" {
		t.Errorf("media type %q", outs["out/up.txt"].MediaType)
	}
	if rl.req.FailureClass != ClassFailure || !strings.Contains(rl.req.Error, `declared output "report.html" matched no file`) {
		t.Errorf("lazy task: %+v; want a failure naming the missing output", rl.req)
	}
}

// TestSpool: a result waits in the spool until the coordinator decides;
// accepted, it is removed; rejected, it goes to quarantine with why. An
// agent that starts delivers what a stopped agent left, with that agent's
// session and idempotency key, once; a result whose session no longer
// works goes to quarantine.
func TestSpool(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	work := t.TempDir()
	spoolDir := filepath.Join(work, "spool")

	// What a stopped agent left: one result with its session ("sess",
	// which the fake takes) and one with a session nobody knows.
	leave := func(worker, session string, token int64) string {
		dir := filepath.Join(spoolDir, worker)
		entry := filepath.Join(dir, strconv.FormatInt(token, 10))
		if err := os.MkdirAll(filepath.Join(entry, "blobs"), 0o700); err != nil {
			t.Fatal(err)
		}
		sb, _ := json.Marshal(spoolSession{ServerURL: s.URL(), WorkerID: worker, SessionToken: session})
		os.WriteFile(filepath.Join(dir, "session.json"), sb, 0o600)
		zero := 0
		eb, _ := json.Marshal(spoolEntry{Token: token, Result: protocol.ResultRequest{WorkerID: worker, Task: "task.old", Attempt: 1,
			IdempotencyKey: worker + "-" + strconv.FormatInt(token, 10), ExitCode: &zero}})
		os.WriteFile(filepath.Join(entry, "result.json"), eb, 0o600)
		return entry
	}
	kept := leave("w-old", "sess", 555)
	stale := leave("w-gone", "expired-session", 556)

	startAgent(t, s.URL(), func(o *Options) { o.WorkDir = work })
	waitFor(t, 20*time.Second, "the stopped agent's result", func() bool { _, ok := f.result(555); return ok })
	r, _ := f.result(555)
	if r.req.IdempotencyKey != "w-old-555" || r.req.WorkerID != "w-old" {
		t.Errorf("delivered %+v; want the stopped agent's own result", r.req)
	}
	waitFor(t, 10*time.Second, "the spool to settle", func() bool {
		_, e1 := os.Stat(kept)
		_, e2 := os.Stat(filepath.Join(spoolDir, "quarantine", "w-gone-556", "why"))
		return errors.Is(e1, os.ErrNotExist) && e2 == nil
	})
	why, _ := os.ReadFile(filepath.Join(spoolDir, "quarantine", "w-gone-556", "why"))
	if !strings.Contains(string(why), "session no longer works") {
		t.Errorf("quarantine note %q", why)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the result with a dead session is still pending: %v", err)
	}

	// A result of this agent: accepted, then nothing left; a rejected one
	// goes to quarantine.
	ok := f.add(assignment(t, "task.ok", "true"))[0]
	waitFor(t, 20*time.Second, "the result", func() bool { _, got := f.result(ok.FencingToken); return got })
	entry := filepath.Join(spoolDir, "w-1", strconv.FormatInt(ok.FencingToken, 10))
	waitFor(t, 10*time.Second, "the accepted entry to go", func() bool { _, err := os.Stat(entry); return errors.Is(err, os.ErrNotExist) })
	f.set(func(f *fakeCoord) { f.rejectAll = "stale_token" })
	bad := f.add(assignment(t, "task.late", "true"))[0]
	q := filepath.Join(spoolDir, "quarantine", "w-1-"+strconv.FormatInt(bad.FencingToken, 10))
	waitFor(t, 20*time.Second, "the rejected result in quarantine", func() bool { _, err := os.Stat(filepath.Join(q, "result.json")); return err == nil })
	if why, _ := os.ReadFile(filepath.Join(q, "why")); !strings.Contains(string(why), "stale_token") {
		t.Errorf("quarantine note %q", why)
	}
}

// TestSpooledEmptyLogNeedsNoFile: a spooled result names its empty logs
// by the empty blob's hash with no file in its entry; the agent that
// delivers it for a stopped agent sends the empty blob from memory to a
// coordinator that lacks it.
func TestSpooledEmptyLogNeedsNoFile(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	f.blobs = map[string][]byte{}
	s := startFake(t, f)
	work := t.TempDir()
	dir := filepath.Join(work, "spool", "w-old")
	entry := filepath.Join(dir, "555")
	if err := os.MkdirAll(filepath.Join(entry, "blobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	sb, _ := json.Marshal(spoolSession{ServerURL: s.URL(), WorkerID: "w-old", SessionToken: "sess"})
	os.WriteFile(filepath.Join(dir, "session.json"), sb, 0o600)
	zero := 0
	eb, _ := json.Marshal(spoolEntry{Token: 555, Result: protocol.ResultRequest{WorkerID: "w-old", Task: "task.old", Attempt: 1,
		IdempotencyKey: "w-old-555", ExitCode: &zero, Artifacts: []protocol.ArtifactRef{
			{Kind: protocol.ArtifactLog, Name: "stdout", SHA256: artifact.EmptyHash},
			{Kind: protocol.ArtifactLog, Name: "stderr", SHA256: artifact.EmptyHash}}}})
	os.WriteFile(filepath.Join(entry, "result.json"), eb, 0o600)

	startAgent(t, s.URL(), func(o *Options) { o.WorkDir = work })
	waitFor(t, 20*time.Second, "the stopped agent's result", func() bool { _, ok := f.result(555); return ok })
	f.mu.Lock()
	got, held := f.blobs[artifact.EmptyHash]
	f.mu.Unlock()
	if !held || len(got) != 0 {
		t.Errorf("the coordinator got the empty blob: %v (%q)", held, got)
	}
}

// TestSpoolBadEntries: what a stopped agent left that is not a file to
// read (a FIFO as its session.json or an entry's result.json, /dev/zero
// behind a link, a result.json over the limit) neither holds nor exhausts
// an agent that starts: it logs a line for each, moves the entries to the
// quarantine with why, still delivers the good result beside them, and
// registers.
func TestSpoolBadEntries(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	work := t.TempDir()
	spoolDir := filepath.Join(work, "spool")
	mkdir := func(p string) string {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := func(p string) {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	session := func(worker string) {
		sb, _ := json.Marshal(spoolSession{ServerURL: s.URL(), WorkerID: worker, SessionToken: "sess"})
		if err := os.WriteFile(filepath.Join(spoolDir, worker, "session.json"), sb, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A FIFO session, with an entry that cannot be delivered without it.
	mkdir(filepath.Join(spoolDir, "w-fifo-session", "7"))
	fifo(filepath.Join(spoolDir, "w-fifo-session", "session.json"))
	// /dev/zero as a session.
	mkdir(filepath.Join(spoolDir, "w-zero-session", "8"))
	if err := os.Symlink("/dev/zero", filepath.Join(spoolDir, "w-zero-session", "session.json")); err != nil {
		t.Fatal(err)
	}
	// A good session with bad entries, and one good entry.
	mkdir(filepath.Join(spoolDir, "w-bad-entries"))
	session("w-bad-entries")
	fifo(filepath.Join(mkdir(filepath.Join(spoolDir, "w-bad-entries", "11")), "result.json"))
	if err := os.Symlink("/dev/zero", filepath.Join(mkdir(filepath.Join(spoolDir, "w-bad-entries", "12")), "result.json")); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(mkdir(filepath.Join(spoolDir, "w-bad-entries", "13")), "result.json")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), maxEntryFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	zero := 0
	eb, _ := json.Marshal(spoolEntry{Token: 14, Result: protocol.ResultRequest{WorkerID: "w-bad-entries", Task: "task.old", Attempt: 1,
		IdempotencyKey: "w-bad-entries-14", ExitCode: &zero}})
	if err := os.WriteFile(filepath.Join(mkdir(filepath.Join(spoolDir, "w-bad-entries", "14")), "result.json"), eb, 0o600); err != nil {
		t.Fatal(err)
	}

	r := startAgent(t, s.URL(), func(o *Options) { o.WorkDir = work })
	waitFor(t, 20*time.Second, "the agent to register", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.registers > 0 })
	waitFor(t, 20*time.Second, "the good result", func() bool { _, ok := f.result(14); return ok })
	for _, c := range []struct{ entry, why string }{
		{"w-fifo-session-7", "its worker's session cannot be read: " + filepath.Join(spoolDir, "w-fifo-session", "session.json") + " is a FIFO (named pipe), not a regular file"},
		{"w-zero-session-8", "is a character device (a symbolic link to /dev/zero), not a regular file"},
		{"w-bad-entries-11", "unreadable: " + filepath.Join(spoolDir, "w-bad-entries", "11", "result.json") + " is a FIFO (named pipe), not a regular file"},
		{"w-bad-entries-12", "is a character device (a symbolic link to /dev/zero), not a regular file"},
		{"w-bad-entries-13", "is 2,097,153 bytes, more than the 2 MiB (2,097,152 bytes) allowed"},
	} {
		why, err := os.ReadFile(filepath.Join(spoolDir, "quarantine", c.entry, "why"))
		if err != nil || !strings.Contains(string(why), c.why) {
			t.Errorf("quarantine note of %s: %q, %v; want one containing %q", c.entry, why, err, c.why)
		}
	}
	logs := r.logs.String()
	for _, want := range []string{`msg="a stopped agent's spool folder has no usable session"`, `msg="a stopped agent's result is kept in the spool's quarantine"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the agent's log has no %s", want)
		}
	}
	for _, gone := range []string{"w-fifo-session", "w-zero-session", "w-bad-entries"} {
		if _, err := os.Lstat(filepath.Join(spoolDir, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the stopped agent's folder %s is still there: %v", gone, err)
		}
	}
}

// TestLogReplacedByAFIFO: a task that puts a FIFO in its stdout log's
// place (it runs as the agent's user) does not hold the agent, which
// hashes the logs after the command: the result arrives, without that log.
func TestLogReplacedByAFIFO(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd/1"); err != nil {
		t.Skip("no /proc here:", err)
	}
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	// Unconfined: a confined task cannot reach its log files at all (they
	// are in the hidden work folder); this is the agent's own defence.
	a := startAgent(t, s.URL(), func(o *Options) { o.Unconfined = true })
	// Its stdout is a pipe to the agent, which makes the log file at the
	// first byte: the command puts a FIFO there first, then prints.
	logDir := filepath.Join(a.opts.WorkDir, "logs", "task.fifo", "1")
	asg := f.add(assignment(t, "task.fifo", "sh", "-c", `mkdir -p "$0" && mkfifo "$0/stdout" && echo hello`, logDir))[0]
	waitFor(t, 20*time.Second, "the result", func() bool { _, ok := f.result(asg.FencingToken); return ok })
	r, _ := f.result(asg.FencingToken)
	for _, a := range r.req.Artifacts {
		if a.Name == "stdout" {
			t.Errorf("the result names a stdout log %+v; its file is a FIFO", a)
		}
	}
	if r.req.FailureClass != ClassLost || !strings.Contains(r.req.Error, "creating the stdout log") {
		t.Errorf("result %s %q; want lost, the log not made", r.req.FailureClass, r.req.Error)
	}
}

// TestSensitiveDefinitionRuns: an assignment whose definition names a
// sensitive part carries its value, which the command gets; its hash is
// the canonical form's (placeholder and keyed hash), which the agent
// checks. The agent's log, attempt logs and folders hold no value and are
// the user's alone.
func TestSensitiveDefinitionRuns(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	r := startAgent(t, s.URL(), nil)

	a := assignment(t, "task.deploy", "sh", "-c", `printf '%s' "$TOKEN" | tr a-z A-Z > seen; echo deployed`)
	a.Definition.Env = map[string]string{"TOKEN": "ptarmigan"}
	a.Definition = a.Definition.Protect([]byte("the state's key"), map[string][]string{protocol.EnvPart("TOKEN"): {"var.token"}})
	asgs := f.add(a)
	if asgs[0].DefHash == protocol.DefinitionHash(protocol.Definition{Command: a.Definition.Command, Env: a.Definition.Env, Dir: "."}, nil) {
		t.Fatal("the hash covers the value, not its keyed hash")
	}
	var res resultRec
	waitFor(t, 20*time.Second, "the result", func() bool {
		var ok bool
		res, ok = f.result(asgs[0].FencingToken)
		return ok
	})
	if res.req.FailureClass != "" {
		t.Fatalf("result %+v", res.req)
	}
	if got, err := os.ReadFile(filepath.Join(a.WorkDir, "seen")); err != nil || string(got) != "PTARMIGAN" {
		t.Errorf("the command saw %q (%v)", got, err)
	}
	if strings.Contains(strings.ToLower(r.logs.String()), "ptarmigan") {
		t.Errorf("the agent's log holds the value:\n%s", r.logs.String())
	}
	// Once the attempt's folders are tidied (its scratch folder goes
	// last), what is left stays.
	waitFor(t, 20*time.Second, "the scratch folder removed", func() bool {
		_, err := os.Lstat(filepath.Join(r.opts.WorkDir, "scratch", "task.deploy"))
		return errors.Is(err, fs.ErrNotExist)
	})
	if _, err := os.Lstat(filepath.Join(r.opts.WorkDir, "logs", "task.deploy", "1", "stdout")); err != nil {
		t.Errorf("the log that holds something: %v", err)
	}
	err := filepath.WalkDir(r.opts.WorkDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if p != r.opts.WorkDir && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want the user's alone", p, fi.Mode().Perm())
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(strings.ToLower(string(b)), "ptarmigan") {
			t.Errorf("%s holds the value", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
