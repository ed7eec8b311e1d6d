package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
)

// logRefs returns a result's log artifacts by name.
func logRefs(req protocol.ResultRequest) map[string]protocol.ArtifactRef {
	out := map[string]protocol.ArtifactRef{}
	for _, a := range req.Artifacts {
		if a.Kind == protocol.ArtifactLog {
			out[a.Name] = a
		}
	}
	return out
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestLogFilesMadeAtTheFirstByte: an attempt's stdout and stderr reach
// the agent through pipes, and a log file (with its folders and the task's
// address file) is made only when its stream carries a byte. A quiet
// attempt makes none while it runs, and its result names the empty blob
// for both; one that prints on stderr alone makes that file only.
func TestLogFilesMadeAtTheFirstByte(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		script         string
		stdout, stderr string
	}{
		{"quiet", `touch "$1/running"; while [ ! -f "$1/go" ]; do sleep 0.05; done`, "", ""},
		{"stderr only", `echo oops >&2; touch "$1/running"; while [ ! -f "$1/go" ]; do sleep 0.05; done`, "", "oops\n"},
		{"both", `printf out; printf err >&2; touch "$1/running"; while [ ! -f "$1/go" ]; do sleep 0.05; done`, "out", "err"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
			s := startFake(t, f)
			a := startAgent(t, s.URL(), func(o *Options) { o.Unconfined = true })
			gate := t.TempDir()
			asg := f.add(assignment(t, "task.q", "sh", "-c", c.script, "sh", gate))[0]
			waitFor(t, 20*time.Second, "the command to run", func() bool {
				_, err := os.Stat(filepath.Join(gate, "running"))
				return err == nil
			})
			logDir := filepath.Join(a.opts.WorkDir, "logs", "task.q")
			want := map[string]bool{"stdout": c.stdout != "", "stderr": c.stderr != ""}
			// What it printed before "running" is in the pipes; the copier
			// writes it soon after.
			waitFor(t, 20*time.Second, "the logs it printed", func() bool {
				for name, printed := range want {
					if _, err := os.Stat(filepath.Join(logDir, "1", name)); (err == nil) != printed {
						return false
					}
				}
				return true
			})
			if _, err := os.Stat(logDir); c.stdout == "" && c.stderr == "" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a quiet attempt's log folder %s: %v; want none while it runs", logDir, err)
			}
			if err := os.WriteFile(filepath.Join(gate, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "the result", func() bool { _, ok := f.result(asg.FencingToken); return ok })
			r, _ := f.result(asg.FencingToken)
			if r.req.FailureClass != "" {
				t.Fatalf("result %s %q; want a success", r.req.FailureClass, r.req.Error)
			}
			refs := logRefs(r.req)
			for name, text := range map[string]string{"stdout": c.stdout, "stderr": c.stderr} {
				ref, ok := refs[name]
				if !ok || ref.SHA256 != hashOf(text) || ref.Size != int64(len(text)) {
					t.Errorf("%s log %+v; want %d bytes of hash %s", name, ref, len(text), hashOf(text))
				}
				if text == "" && ref.SHA256 != artifact.EmptyHash {
					t.Errorf("%s log %+v; want the empty blob", name, ref)
				}
			}
		})
	}
}

// runDetached runs an attempt whose command starts a process that leaves
// its process group (setsid) and runs detached, a shell that writes its
// pid into dir and then runs the shell text detached; the command waits
// for the pid (a process still in the group when the command exits is
// killed with it), then runs after. It returns the attempt's successful
// result, the detached process's pid and dir.
func runDetached(t *testing.T, task, detached, after string) (protocol.ResultRequest, int, string) {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid here:", err)
	}
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	startAgent(t, s.URL(), func(o *Options) { o.Unconfined = true })
	dir := t.TempDir()
	script := `setsid sh -c 'echo $$ > "$1/pid.tmp"; mv "$1/pid.tmp" "$1/pid"; ` + detached + `' sh "$1" & while [ ! -f "$1/pid" ]; do sleep 0.05; done; ` + after
	asg := f.add(assignment(t, task, "sh", "-c", script, "sh", dir))[0]
	waitFor(t, 30*time.Second, "the result", func() bool { _, ok := f.result(asg.FencingToken); return ok })
	r, _ := f.result(asg.FencingToken)
	if r.req.FailureClass != "" {
		t.Fatalf("result %s %q; want a success", r.req.FailureClass, r.req.Error)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatalf("the detached process never wrote its pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return r.req, pid, dir
}

// TestDetachedProcessDoesNotHoldTheAttempt: a process that left the
// attempt's process group (setsid) and holds its stdout does not keep the
// attempt from ending: once the command has exited, the agent reads its
// pipes for logDrainGrace more, then closes them. The result arrives while
// that process still runs, with what the command printed.
func TestDetachedProcessDoesNotHoldTheAttempt(t *testing.T) {
	t.Parallel()
	// The detached shell waits for the test's gate (or 60 s) before it
	// prints: it outlives the attempt.
	req, pid, dir := runDetached(t, "task.detach",
		`i=0; while [ ! -f "$1/gate" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo late`, "echo early")
	defer os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600)
	if ref := logRefs(req)["stdout"]; ref.SHA256 != hashOf("early\n") {
		t.Errorf("stdout log %+v; want early", ref)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the detached process %d is gone (%v) when the result arrives; the test wants it alive to show the attempt did not wait for it", pid, err)
	}
}

// TestLateCopierKeepsTheOutput: a copier that is late when the command
// ends (making the log folders waits for the work folder's lock, which
// another agent of the folder may hold for long) still writes all the
// command printed. The grace after the command's end bounds the wait for
// detached writers, not for what the pipe already holds.
func TestLateCopierKeepsTheOutput(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	a := startAgent(t, s.URL(), func(o *Options) { o.Unconfined = true })
	// 48,894 bytes: less than a pipe holds, so the command ends while the
	// copier still waits for the lock.
	var want strings.Builder
	for i := 1; i <= 10000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	gate := t.TempDir()
	script := `touch "$1/running"; while [ ! -f "$1/go" ]; do sleep 0.05; done; i=1; while [ $i -le 10000 ]; do echo $i; i=$((i+1)); done; touch "$1/printed"`
	asg := f.add(assignment(t, "task.late", "sh", "-c", script, "sh", gate))[0]
	waitFor(t, 30*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(gate, "running"))
		return err == nil
	})
	// The attempt has set up; take the work folder's lock before it
	// prints its first byte.
	lock, err := os.Open(a.opts.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Skip("no flock here:", err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
			unlocked = true
		}
	}
	defer unlock()
	if err := os.WriteFile(filepath.Join(gate, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the command to print", func() bool {
		_, err := os.Stat(filepath.Join(gate, "printed"))
		return err == nil
	})
	// Hold the lock well past the grace after the command's end.
	time.Sleep(5 * logDrainGrace)
	if _, ok := f.result(asg.FencingToken); ok {
		t.Fatal("a result arrived while its stdout log could not be made")
	}
	unlock()
	waitFor(t, 30*time.Second, "the result", func() bool { _, ok := f.result(asg.FencingToken); return ok })
	r, _ := f.result(asg.FencingToken)
	if r.req.FailureClass != "" {
		t.Fatalf("result %s %q; want a success", r.req.FailureClass, r.req.Error)
	}
	if ref := logRefs(r.req)["stdout"]; ref.SHA256 != hashOf(want.String()) || ref.Size != int64(want.Len()) {
		t.Errorf("stdout log %+v; want all %d bytes the command printed", ref, want.Len())
	}
}

// TestDetachedWriterDoesNotHoldTheAttempt: a detached process that never
// stops printing does not keep the attempt from ending either: past the
// grace the copier takes what the pipe holds then and closes it, and the
// writer's next write fails (yes(1) dies of SIGPIPE).
func TestDetachedWriterDoesNotHoldTheAttempt(t *testing.T) {
	t.Parallel()
	req, pid, _ := runDetached(t, "task.spam", "exec yes spam", "true")
	if ref := logRefs(req)["stdout"]; ref.Size == 0 {
		t.Errorf("stdout log %+v; want what yes printed before the pipe closed", ref)
	}
	waitFor(t, 10*time.Second, "the detached writer to die of its closed stdout", func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}
