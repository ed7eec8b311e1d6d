package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/agent/confine"
	"github.com/wdc-dev/wdc/agent/procgroup"
	"github.com/wdc-dev/wdc/protocol"
)

// Environment of the test binary re-executed as a real agent process.
const (
	childEnv       = "WDC_AGENTTEST_CHILD" // non-empty: act as an agent
	childServerEnv = "WDC_AGENTTEST_SERVER"
	childWorkEnv   = "WDC_AGENTTEST_WORKDIR"
	// childUnconfinedEnv non-empty: the agent runs its attempts unconfined
	childUnconfinedEnv = "WDC_AGENTTEST_UNCONFINED"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childAgent())
	}
	os.Exit(m.Run())
}

// childAgent runs an agent the way `wdc agent` does: SIGTERM and SIGINT
// drain it, logs go to stderr, an error exits 1.
func childAgent() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := Run(ctx, Options{
		ServerURL:  os.Getenv(childServerEnv),
		Pool:       "builders",
		WorkDir:    os.Getenv(childWorkEnv),
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Version:    "test",
		ClaimWait:  200 * time.Millisecond,
		KillGrace:  300 * time.Millisecond,
		RetryBase:  20 * time.Millisecond,
		RetryMax:   200 * time.Millisecond,
		Unconfined: os.Getenv(childUnconfinedEnv) != "",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "wdc agent:", err)
		return 1
	}
	return 0
}

// agentProcess is the test binary running as an agent.
type agentProcess struct {
	cmd     *exec.Cmd
	logPath string
	workDir string
	done    chan struct{}
}

func startAgentProcess(t *testing.T, url string, env ...string) *agentProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	p := &agentProcess{logPath: logPath, workDir: filepath.Join(dir, "work"), done: make(chan struct{})}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(append(os.Environ(), childEnv+"=1", childServerEnv+"="+url, childWorkEnv+"="+p.workDir, protocol.LaunchCredentialEnv+"=tok"), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf // files, never pipes
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("agent process log:\n%s", data)
		}
	})
	return p
}

func (p *agentProcess) logs() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

func (p *agentProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *agentProcess) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("agent process still running after %s", d)
		return 0
	}
}

func TestAgentProcessDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
	s := startFake(t, f)
	p := startAgentProcess(t, s.URL())
	asg := f.add(assignment(t, "task.t", "sh", "-c", `touch "$WDC_ATTEMPT_DIR/started"; sleep 0.5`))[0]
	waitFor(t, 20*time.Second, "the attempt to start", func() bool {
		_, err := os.Stat(filepath.Join(p.workDir, "scratch", "task.t", "1", "started"))
		return err == nil
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("agent exited %d after SIGTERM, want 0", code)
	}
	res, ok := f.result(asg.FencingToken)
	if !ok || res.req.FailureClass != "" {
		t.Errorf("result = %+v, %v; want the attempt to finish during the drain", res.req, ok)
	}
	if !strings.Contains(p.logs(), "no lease abandoned") {
		t.Errorf("the agent did not log that it abandoned nothing")
	}
}

// TestAgentProcessKilledTakesItsAttemptsWithIt: an unconfined attempt
// dies with its agent (its parent-death signal). A confined one has none
// (the thread that started it is gone before it runs, so that it cannot
// signal that thread, which would stop or kill the agent): it outlives a
// SIGKILLed agent until what supervises the agent ends it, as the local
// provider's Cleanup does with procgroup.KillOrphans, or the next agent in
// the same work folder does at its start.
func TestAgentProcessKilledTakesItsAttemptsWithIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		env      []string
		orphaned bool
	}{
		{"unconfined", []string{childUnconfinedEnv + "=1"}, false},
		{"confined", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.orphaned && !confine.Probe().Confined {
				t.Skip("attempts are not confined here")
			}
			f := newFakeCoord(1, 100*time.Millisecond, 3*time.Second)
			s := startFake(t, f)
			p := startAgentProcess(t, s.URL(), tc.env...)
			f.add(assignment(t, "task.k", "sh", "-c", `echo $$ > "$WDC_ATTEMPT_DIR/pid"; exec sleep 60`))
			pid := readPID(t, filepath.Join(p.workDir, "scratch", "task.k", "1", "pid"))
			agentPID := p.cmd.Process.Pid
			p.cmd.Process.Kill()
			p.wait(t, 20*time.Second)
			if tc.orphaned {
				if processGone(pid) {
					t.Fatal("the confined attempt died with its agent: was a parent-death signal left to it?")
				}
				if n := procgroup.KillOrphans(p.workDir, agentPID); n != 1 {
					t.Errorf("KillOrphans ended %d process groups, want 1", n)
				}
			}
			waitFor(t, 10*time.Second, "the attempt to end", func() bool { return processGone(pid) })
		})
	}
}

func TestPausedTimeDoesNotCountAgainstTheTTL(t *testing.T) {
	t.Parallel()
	const (
		ttl   = 2 * time.Second
		pause = 3 * time.Second // longer than the ttl
	)
	tests := []struct {
		name     string
		comeBack bool // the coordinator is back when the agent resumes
	}{
		{"coordinator back after the pause", true},
		{"coordinator still down after the pause", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeCoord(1, 100*time.Millisecond, ttl)
			s := startFake(t, f)
			p := startAgentProcess(t, s.URL())
			waitFor(t, 20*time.Second, "a heartbeat", func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return len(f.heartbeats) > 0
			})
			s.down()
			waitFor(t, 20*time.Second, "a failed heartbeat", func() bool { return strings.Contains(p.logs(), "heartbeat failed") })
			p.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(pause) // the pause under test, not a wait for a condition
			if tt.comeBack {
				s.up(t)
			}
			p.cmd.Process.Signal(syscall.SIGCONT)
			resumed := time.Now()

			if tt.comeBack {
				waitFor(t, 20*time.Second, "a heartbeat after the pause", func() bool {
					f.mu.Lock()
					defer f.mu.Unlock()
					return f.heartbeats[len(f.heartbeats)-1].at.After(resumed)
				})
				if p.exited() {
					t.Fatalf("agent exited after the pause:\n%s", p.logs())
				}
				p.cmd.Process.Signal(syscall.SIGTERM)
				if code := p.wait(t, 20*time.Second); code != 0 {
					t.Errorf("agent exited %d after SIGTERM, want 0", code)
				}
				return
			}
			// Only a fraction of the ttl had failed before the pause: the
			// agent must keep trying for the rest of it after resuming.
			time.Sleep(500 * time.Millisecond) // a duration the agent must survive
			if p.exited() {
				t.Fatalf("agent exited within 500ms of resuming; the pause counted against the ttl:\n%s", p.logs())
			}
			if code := p.wait(t, 20*time.Second); code != 1 {
				t.Errorf("agent exited %d, want 1", code)
			}
			if logs := p.logs(); !strings.Contains(logs, "longer than the worker's ttl") || !strings.Contains(logs, "paused") {
				t.Errorf("logs lack the pause or the ttl error:\n%s", logs)
			}
		})
	}
}

// TestPlainAttemptOutlivesConfinedStarts: an unconfined attempt's
// parent-death signal belongs to the thread that forked it; confined
// starts throw their threads away, and must never take an unconfined
// attempt with them (startPlain forks from a thread that never ends).
func TestPlainAttemptOutlivesConfinedStarts(t *testing.T) {
	if !confine.Probe().Confined {
		t.Skip("attempts are not confined here")
	}
	work := filepath.Join(t.TempDir(), "work")
	attempt := filepath.Join(work, "scratch", "t", "1")
	if err := os.MkdirAll(attempt, 0o700); err != nil {
		t.Fatal(err)
	}
	var plain []*exec.Cmd
	defer func() {
		for _, c := range plain {
			c.Process.Kill()
			c.Wait()
		}
	}()
	// one after the other, so that a confined start's goroutine is likely
	// to run on the thread that has just forked an unconfined one
	for i := 0; i < 32; i++ {
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = attemptSysProcAttr()
		if _, err := startPlain(cmd, nil); err != nil {
			t.Fatal(err)
		}
		plain = append(plain, cmd)
		confined := exec.Command("/bin/true")
		confined.Dir = attempt
		release, err := confine.Start(confined, confine.Policy{Hide: []string{work}, Show: []string{attempt}})
		if err != nil {
			t.Fatal(err)
		}
		confined.Wait()
		release()
	}
	time.Sleep(100 * time.Millisecond)
	for i, c := range plain {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("unconfined attempt %d died while confined ones started: %v", i, err)
		}
	}
}
