package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/agent/procgroup"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/providers/providertest"
)

func TestMain(m *testing.M) {
	if os.Getenv(providertest.FakeAgentEnv) != "" {
		providertest.FakeAgent()
	}
	os.Exit(m.Run())
}

// fakeAgentRequest launches this test binary as a fake agent.
func fakeAgentRequest(t *testing.T) providers.LaunchRequest {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return providers.LaunchRequest{
		Pool:         "builders",
		Seq:          1,
		ServerURL:    "http://127.0.0.1:1",
		Credential:   "wdcl_launch-secret",
		WorkDir:      filepath.Join(dir, "work"),
		LogPath:      filepath.Join(dir, "logs", "worker-0.log"),
		Env:          map[string]string{providertest.FakeAgentEnv: "1"},
		Executable:   exe,
		DrainTimeout: 5 * time.Second,
	}
}

// The conformance suite runs against the local provider in
// providers/builtin, with every other built-in provider.

func TestLookupFindsLocal(t *testing.T) {
	p, err := providers.Lookup("local")
	if err != nil || p.Name() != "local" {
		t.Fatalf("Lookup(local) = %v, %v", p, err)
	}
	if _, ok := p.(*Provider); !ok {
		t.Errorf("Lookup(local) returned %T", p)
	}
}

func TestWorkerProcessSetup(t *testing.T) {
	p := New()
	// A credential already in the caller's environment must not win over the launch's.
	p.Environ = append(os.Environ(), protocol.LaunchCredentialEnv+"=caller-credential", protocol.SessionTokenEnv+"=caller-session")
	req := fakeAgentRequest(t)
	resp, err := p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background(), providers.StopRequest{ID: resp.ID, Kill: true}) })
	if resp.ID != "pid:"+strconv.Itoa(resp.PID) {
		t.Errorf("ID = %q, PID = %d", resp.ID, resp.PID)
	}
	waitForLog(t, req.LogPath, "own_group")
	data, _ := os.ReadFile(req.LogPath)
	for _, want := range []string{`"own_group":true`, `"stdin_dev_null":true`, `"has_credential":true`, `"credential_on_argv":false`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("report lacks %s: %s", want, data)
		}
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(resp.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, kv := range strings.Split(string(env), "\x00") {
		if strings.HasPrefix(kv, protocol.SessionTokenEnv+"=") {
			t.Errorf("the caller's session token reached the worker: %s", kv)
		}
		if v, ok := strings.CutPrefix(kv, protocol.LaunchCredentialEnv+"="); ok {
			tokens = append(tokens, v)
		}
	}
	if len(tokens) != 1 || tokens[0] != req.Credential {
		t.Errorf("worker's %s values = %q, want exactly the launch credential", protocol.LaunchCredentialEnv, tokens)
	}
}

func TestRender(t *testing.T) {
	req := providers.LaunchRequest{Executable: "/usr/bin/wdc", ServerURL: "http://127.0.0.1:7420", Pool: "builders", WorkDir: "/w", Credential: "secret", DrainTimeout: 90 * time.Second}
	want := "/usr/bin/wdc agent --server http://127.0.0.1:7420 --pool builders --work-dir /w --drain-timeout 1m30s"
	if got := strings.Join(providers.Render(req), " "); got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	req.DrainTimeout = 0
	if got := strings.Join(providers.Render(req), " "); strings.Contains(got, "drain-timeout") {
		t.Errorf("Render without a drain timeout = %q", got)
	}
}

func TestRenderLaunch(t *testing.T) {
	req := fakeAgentRequest(t)
	req.Env = map[string]string{"TOKEN": "s3cr3t", "A": "1", protocol.LaunchCredentialEnv: "forged"}
	resp, err := New().RenderLaunch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(resp.Argv, " "), strings.Join(providers.Render(req), " "); got != want {
		t.Errorf("Argv = %q, want %q", got, want)
	}
	if got, want := strings.Join(resp.Env, " "), "A TOKEN "+protocol.LaunchCredentialEnv; got != want {
		t.Errorf("Env = %q, want %q: the names, sorted, the credential once", got, want)
	}
	if len(resp.Objects) != 0 {
		t.Errorf("Objects = %+v, want none", resp.Objects)
	}
	if s := fmt.Sprintf("%+v", resp); strings.Contains(s, "s3cr3t") || strings.Contains(s, req.Credential) || strings.Contains(s, "forged") {
		t.Errorf("the rendered launch shows a value: %s", s)
	}
	if _, err := os.Stat(filepath.Dir(req.LogPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("RenderLaunch made the log folder (%v): it must write nothing", err)
	}
	if _, err := providers.DryRun(context.Background(), New(), req); !errors.Is(err, providers.ErrNotSupported) {
		t.Errorf("DryRun = %v, want ErrNotSupported", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().RenderLaunch(ctx, req); !errors.Is(err, context.Canceled) {
		t.Errorf("RenderLaunch with a cancelled context = %v", err)
	}
}

func TestLaunchErrors(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(r *providers.LaunchRequest)
		wantErr string
	}{
		{"no executable", func(r *providers.LaunchRequest) { r.Executable = "" }, "no executable"},
		{"no credential", func(r *providers.LaunchRequest) { r.Credential = "" }, "no launch credential"},
		{"no log path", func(r *providers.LaunchRequest) { r.LogPath = "" }, "no log path"},
		{"missing executable", func(r *providers.LaunchRequest) { r.Executable = "/nonexistent/wdc" }, "starting /nonexistent/wdc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fakeAgentRequest(t)
			tt.mod(&req)
			if _, err := New().Launch(context.Background(), req); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Launch = %v, want %q", err, tt.wantErr)
			}
			if tt.name == "missing executable" {
				return // RenderLaunch starts nothing, so it cannot know
			}
			if _, err := New().RenderLaunch(context.Background(), req); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("RenderLaunch = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestStatusOfAWorkerLaunchedElsewhere(t *testing.T) {
	launcher := New()
	req := fakeAgentRequest(t)
	resp, err := launcher.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, req.LogPath, "own_group")
	other := New() // another apply: it did not launch the worker
	st, err := other.Status(context.Background(), providers.StatusRequest{ID: resp.ID})
	if err != nil || !st.Running {
		t.Fatalf("Status = %+v, %v; want running", st, err)
	}
	if err := other.Stop(context.Background(), providers.StopRequest{ID: resp.ID}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = other.Status(context.Background(), providers.StatusRequest{ID: resp.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker still running 30s after Stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.ExitCode != nil {
		t.Errorf("exit code %d from a provider that did not launch the worker", *st.ExitCode)
	}
}

// TestLookupErrors: a provider this program does not import (this test
// binary has local only) is unknown to it.
func TestLookupErrors(t *testing.T) {
	for _, name := range []string{"ray", "kubernetes", "nomad"} {
		_, err := providers.Lookup(name)
		if !errors.Is(err, providers.ErrUnknown) || !strings.Contains(err.Error(), "local") {
			t.Errorf("Lookup(%q) = %v, want %v listing local", name, err, providers.ErrUnknown)
		}
	}
}

func waitForLog(t *testing.T, path, substr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		if strings.Contains(string(data), substr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lacks %q after 30s: %q", path, substr, data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEnvironDropsWDCInputs(t *testing.T) {
	p := &Provider{Environ: []string{"PATH=/bin", "WDC_VAR_secret=s3cr3t", "WDC_STATE=/x", "WDC_LISTEN=:1", "WDC_ADVERTISE=https://x",
		"WDC_WORKER_TOKEN=old", "WDC_LAUNCH_CREDENTIAL=old", "WDC_SESSION_TOKEN=s", "KEEP=1"}}
	got := strings.Join(p.environ(providers.LaunchRequest{Credential: "tok", Env: map[string]string{"B": "2", "A": "1"}}), " ")
	want := "PATH=/bin KEEP=1 A=1 B=2 WDC_LAUNCH_CREDENTIAL=tok"
	if got != want {
		t.Fatalf("environ = %q, want %q", got, want)
	}
}

// TestReclaimStopsOnlyWhatWasLaunched: Reclaim, run by another provider
// instance (the next apply), kills a dead apply's worker whose pid, start
// time, command line and work folder match the launch record, and leaves
// alone a process whose pid a record names but which is not what was
// launched (a forged pid, a reused pid, another state's worker).
func TestReclaimStopsOnlyWhatWasLaunched(t *testing.T) {
	first := New()
	req := fakeAgentRequest(t)
	resp, err := first.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Stop(context.Background(), providers.StopRequest{ID: resp.ID, Kill: true}) })
	if resp.ProcessStart == "" || resp.Host == "" {
		t.Fatalf("launch response %+v lacks the process start or host", resp)
	}
	// A bystander: another process, which records may name by its pid.
	other := New()
	oreq := fakeAgentRequest(t)
	oresp, err := other.Launch(context.Background(), oreq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Stop(context.Background(), providers.StopRequest{ID: oresp.ID, Kill: true}) })
	waitForLog(t, oreq.LogPath, "own_group")

	rec := providers.LaunchRecord{ApplyID: "dead", Pool: "builders", Seq: 1, ID: resp.ID, Host: resp.Host, PID: resp.PID,
		ProcessStart: resp.ProcessStart, Argv: resp.Argv, WorkDir: req.WorkDir}
	forged := func(f func(*providers.LaunchRecord)) providers.LaunchRecord {
		r := providers.LaunchRecord{ApplyID: "dead", Pool: "builders", Seq: 2, ID: oresp.ID, Host: oresp.Host, PID: oresp.PID,
			ProcessStart: oresp.ProcessStart, Argv: oresp.Argv, WorkDir: req.WorkDir}
		f(&r)
		return r
	}
	bystander := []providers.LaunchRecord{
		forged(func(r *providers.LaunchRecord) { r.ProcessStart = "1" }),                                   // a reused pid
		forged(func(r *providers.LaunchRecord) { r.Argv = append(r.Argv[:len(r.Argv):len(r.Argv)], "x") }), // another command line
		forged(func(r *providers.LaunchRecord) { r.ProcessStart = "" }),                                    // nothing recorded at launch
		forged(func(r *providers.LaunchRecord) { r.Host = "elsewhere" }),                                   // another host
	}
	// The same pid, start and argv, but another state's work folder.
	otherState := forged(func(r *providers.LaunchRecord) { r.WorkDir = oreq.WorkDir + "-elsewhere" })
	next := New()
	got, err := next.Reclaim(context.Background(), providers.ReclaimRequest{WorkDir: req.WorkDir,
		Launches: append([]providers.LaunchRecord{rec, otherState}, bystander...)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Stopped) != 1 || got.Stopped[0].Seq != 1 || len(got.Gone) != 5 {
		t.Errorf("Reclaim = %+v; want only launch 1 stopped", got)
	}
	// The launching instance reaps its child on its own goroutine, a moment
	// after the kill: poll (with a deadline) rather than ask once.
	if st, err := waitNotRunning(first, resp.ID); err != nil || st.Running {
		t.Errorf("the dead apply's worker still runs: %+v, %v", st, err)
	}
	if st, err := other.Status(context.Background(), providers.StatusRequest{ID: oresp.ID}); err != nil || !st.Running {
		t.Errorf("the bystander was killed: %+v, %v", st, err)
	}
}

// TestLaunchFailsAtOnceOnAFullDisk: a worker log that cannot be written
// (here /dev/full, which answers every write with ENOSPC) fails the launch
// at once, naming the log and the full disk, and starts nothing.
func TestLaunchFailsAtOnceOnAFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	req := fakeAgentRequest(t)
	req.LogPath = "/dev/full"
	resp, err := New().Launch(context.Background(), req)
	if err == nil {
		t.Fatalf("Launch with an unwritable log = %+v, want an error", resp)
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "cannot write the worker log /dev/full: the disk is full") {
		t.Errorf("Launch = %v, want the full disk named, wrapping ENOSPC", err)
	}
}

// TestLaunchLogHeader: the worker log starts with a line naming the launch.
func TestLaunchLogHeader(t *testing.T) {
	p := New()
	req := fakeAgentRequest(t)
	req.ApplyID = "a-1"
	resp, err := p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background(), providers.StopRequest{ID: resp.ID, Kill: true}) })
	waitForLog(t, req.LogPath, "wdc: launch 1 of pool builders (apply a-1) at ")
}

// TestFindLeftoversStopsNothing: FindLeftovers lists the launches Reclaim
// would stop (the same checks: pid, start time, command line, work folder)
// and the running process groups of dead agents' attempts, and stops none.
func TestFindLeftoversStopsNothing(t *testing.T) {
	first := New()
	req := fakeAgentRequest(t)
	resp, err := first.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Stop(context.Background(), providers.StopRequest{ID: resp.ID, Kill: true}) })
	rec := providers.LaunchRecord{ApplyID: "dead", Pool: "builders", Seq: 1, ID: resp.ID, Host: resp.Host, PID: resp.PID,
		ProcessStart: resp.ProcessStart, Argv: resp.Argv, WorkDir: req.WorkDir}
	reused := rec
	reused.Seq, reused.ProcessStart = 2, "1"

	// An attempt's process group whose agent is gone.
	group := exec.Command("sleep", "60")
	group.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := group.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-group.Process.Pid, syscall.SIGKILL); _ = group.Wait() })
	const deadAgent = 1 << 22 // above pid_max: never a live pid
	if err := os.MkdirAll(procgroup.Dir(req.WorkDir), 0o755); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(procgroup.Dir(req.WorkDir), strconv.Itoa(deadAgent)+"."+strconv.Itoa(group.Process.Pid))
	if err := os.WriteFile(record, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := New().FindLeftovers(context.Background(), providers.ReclaimRequest{WorkDir: req.WorkDir, Launches: []providers.LaunchRecord{rec, reused}})
	if err != nil {
		t.Fatal(err)
	}
	var whats []string
	for _, l := range got.Leftovers {
		whats = append(whats, l.What+" / "+l.Stop)
	}
	want := []string{
		"worker process " + strconv.Itoa(resp.PID) + " (launch 1 of pool builders, apply dead) / kill -KILL " + strconv.Itoa(resp.PID),
		"process group " + strconv.Itoa(group.Process.Pid) + " of an attempt whose agent (pid " + strconv.Itoa(deadAgent) + ") is gone / kill -KILL -- -" + strconv.Itoa(group.Process.Pid),
	}
	if strings.Join(whats, "\n") != strings.Join(want, "\n") {
		t.Errorf("FindLeftovers =\n%s\nwant\n%s", strings.Join(whats, "\n"), strings.Join(want, "\n"))
	}
	if got.Leftovers[0].Launch == nil || got.Leftovers[0].Launch.Seq != 1 || got.Leftovers[1].Launch != nil {
		t.Errorf("launch records of the leftovers: %+v", got.Leftovers)
	}
	if st, err := first.Status(context.Background(), providers.StatusRequest{ID: resp.ID}); err != nil || !st.Running {
		t.Errorf("the worker was stopped by a listing: %+v, %v", st, err)
	}
	if err := syscall.Kill(group.Process.Pid, 0); err != nil {
		t.Errorf("the attempt group was killed by a listing: %v", err)
	}
	if _, err := os.Stat(record); err != nil {
		t.Errorf("the group record was removed by a listing: %v", err)
	}
}

// waitNotRunning polls p's Status of id until it is not running, for up to
// 10 s, and returns the last answer.
func waitNotRunning(p providers.Provider, id string) (providers.StatusResponse, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := p.Status(context.Background(), providers.StatusRequest{ID: id})
		if err != nil || !st.Running || time.Now().After(deadline) {
			return st, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
