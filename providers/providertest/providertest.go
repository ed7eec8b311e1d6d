package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

// FakeAgentEnv is the environment variable that makes a test binary act as
// FakeAgent (any non-empty value).
const FakeAgentEnv = "WDC_PROVIDERTEST_FAKE_AGENT"

// Factory returns a fresh provider and a request that launches a fake
// agent through it. It is called once per sub-test.
type Factory func(t *testing.T) (providers.Provider, providers.LaunchRequest)

// Report is the JSON line FakeAgent writes to its stdout (the worker log)
// when it starts, describing what it was given.
type Report struct {
	Args             []string `json:"args"`
	HasCredential    bool     `json:"has_credential"`
	CredentialOnArgv bool     `json:"credential_on_argv"`
	OwnGroup         bool     `json:"own_group"`      // getpgrp() == getpid()
	StdinDevNull     bool     `json:"stdin_dev_null"` // stdin is the null device
}

// FakeAgent stands in for `wdc agent`: it writes a Report line to stdout,
// then waits for SIGTERM or SIGINT and exits 0 ("drained"). It exits 3
// after 2 minutes so a broken test leaves no process behind. Call it from
// TestMain when FakeAgentEnv is set; it does not return.
func FakeAgent() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	token := os.Getenv(protocol.LaunchCredentialEnv)
	r := Report{
		Args:          os.Args[1:],
		HasCredential: token != "",
		OwnGroup:      syscall.Getpgrp() == os.Getpid(),
	}
	for _, a := range os.Args {
		if token != "" && strings.Contains(a, token) {
			r.CredentialOnArgv = true
		}
	}
	if fi, err := os.Stdin.Stat(); err == nil {
		if null, err := os.Stat(os.DevNull); err == nil {
			r.StdinDevNull = os.SameFile(fi, null)
		}
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	select {
	case <-sigs:
		fmt.Println("fake agent: drained")
		os.Exit(0)
	case <-time.After(2 * time.Minute):
		os.Exit(3)
	}
}

// Run runs the conformance suite against the provider the factory makes.
// Besides launching, watching and stopping fake agents, it checks the
// provider's registration: it is registered under its Name, keeps the
// promises of its Info (providers.Check), and renders and dry-runs a
// launch as its capabilities say, launching nothing and showing no
// credential.
func Run(t *testing.T, factory Factory) { RunWith(t, factory, Options{}) }

// Options adjust the suite to what a launch target can report.
type Options struct {
	// NoExitCodeAfterStop: the target keeps no exit code for a worker it
	// stopped (Ray marks a stopped job STOPPED without driver_exit_code),
	// so after a graceful stop the suite accepts no exit code instead of
	// requiring 0. A reported exit code must still be 0.
	NoExitCodeAfterStop bool
}

// RunWith is Run with options.
func RunWith(t *testing.T, factory Factory, opts Options) {
	for _, c := range []struct {
		name  string
		check func(*testing.T, Factory, Options)
	}{
		{"registered, and keeps the promises of its Info", checkRegistration},
		{"render shows the launch and makes nothing", checkRender},
		{"dry run checks the launch and makes nothing", checkDryRun},
		{"launch, status, graceful stop", checkGracefulStop},
		{"kill", checkKill},
		{"the launch credential is in the environment only", checkCredential},
		{"wait reports the end: drained, killed, or ctx done", checkWait},
		{"reclaim with nothing recorded stops nothing", checkReclaimNothing},
		{"bad ids", checkBadIDs},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(t, factory, opts) })
	}
}

// drained reports whether an exit code is what a worker that drained
// reports: 0, or none where the target keeps none after a stop.
func (o Options) drained(code *int) bool {
	if code == nil {
		return o.NoExitCodeAfterStop
	}
	return *code == 0
}

// checkRegistration: the provider is registered under its Name and keeps
// the promises of its Info.
func checkRegistration(t *testing.T, factory Factory, _ Options) {
	p, _ := factory(t)
	info, ok := registered(p.Name())
	if !ok {
		t.Fatalf("provider %q is not registered (providers.Register from its package's init)", p.Name())
	}
	if err := providers.Check(info, p); err != nil {
		t.Errorf("the provider under test: %v", err)
	}
	if _, err := providers.Lookup(p.Name()); err != nil {
		t.Errorf("Lookup(%q): %v", p.Name(), err)
	}
	if info.Source == "" || info.Summary == "" {
		t.Errorf("Info %+v: want a Source and a Summary", info)
	}
}

// checkRender: a Renderer shows the launch (Render's argv, the
// environment's names, sorted, with the credential's) without the
// credential and without launching; another provider says it cannot.
func checkRender(t *testing.T, factory Factory, _ Options) {
	p, req := factory(t)
	resp, err := providers.RenderLaunch(context.Background(), p, req)
	if _, renders := p.(providers.Renderer); !renders {
		if !errors.Is(err, providers.ErrNotSupported) {
			t.Errorf("RenderLaunch of a provider that is no Renderer = %v, want ErrNotSupported", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("RenderLaunch: %v", err)
	}
	if !slices.Equal(resp.Argv, providers.Render(req)) {
		t.Errorf("rendered Argv = %q, want Render's %q", resp.Argv, providers.Render(req))
	}
	if !slices.Contains(resp.Env, protocol.LaunchCredentialEnv) {
		t.Errorf("rendered Env = %q, want it to name %s", resp.Env, protocol.LaunchCredentialEnv)
	}
	if !slices.IsSorted(resp.Env) {
		t.Errorf("rendered Env = %q, want it sorted", resp.Env)
	}
	noCredential(t, "the rendered launch", req.Credential, resp)
	madeNothing(t, "RenderLaunch", req)
}

// checkDryRun: a DryRunner accepts a launch that works, without the
// credential in its answer and without launching; another provider says
// it cannot.
func checkDryRun(t *testing.T, factory Factory, _ Options) {
	p, req := factory(t)
	resp, err := providers.DryRun(context.Background(), p, req)
	if _, dryRuns := p.(providers.DryRunner); !dryRuns {
		if !errors.Is(err, providers.ErrNotSupported) {
			t.Errorf("DryRun of a provider that is no DryRunner = %v, want ErrNotSupported", err)
		}
		return
	}
	if err != nil && !errors.Is(err, providers.ErrNotSupported) {
		t.Errorf("DryRunLaunch of a launch that works: %v", err)
	}
	noCredential(t, "the dry run's answer", req.Credential, resp)
	if err != nil && strings.Contains(err.Error(), req.Credential) {
		t.Errorf("the dry run's error shows the launch credential: %v", err)
	}
	madeNothing(t, "DryRunLaunch", req)
}

// checkGracefulStop: a launched worker runs Render's command line without
// the credential, is running, drains when stopped, and stopping it again
// is no error.
func checkGracefulStop(t *testing.T, factory Factory, opts Options) {
	p, req := factory(t)
	ctx := context.Background()
	resp := launch(t, p, req)
	if resp.ID == "" {
		t.Error("Launch returned an empty ID")
	}
	if !slices.Equal(resp.Argv, providers.Render(req)) {
		t.Errorf("Argv = %q, want Render's %q", resp.Argv, providers.Render(req))
	}
	for _, a := range resp.Argv {
		if strings.Contains(a, req.Credential) {
			t.Errorf("the launch credential is on the command line: %q", resp.Argv)
		}
	}
	st, err := p.Status(ctx, providers.StatusRequest{ID: resp.ID})
	if err != nil || !st.Running {
		t.Fatalf("Status after Launch = %+v, %v; want running", st, err)
	}
	// Let the fake agent install its signal handler before stopping it.
	waitReport(t, req.LogPath)
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st = waitExited(t, p, resp.ID)
	if !opts.drained(st.ExitCode) {
		t.Errorf("Status after a graceful stop = %+v, want exit code 0 (the agent drained)", st)
	}
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID}); err != nil {
		t.Errorf("Stop of an exited worker = %v, want nil", err)
	}
}

// checkKill: a killed worker ends without a clean exit.
func checkKill(t *testing.T, factory Factory, _ Options) {
	p, req := factory(t)
	ctx := context.Background()
	resp := launch(t, p, req)
	waitReport(t, req.LogPath)
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Stop(stopCtx, providers.StopRequest{ID: resp.ID, Kill: true}); err != nil {
		t.Fatalf("Stop(Kill): %v", err)
	}
	st := waitExited(t, p, resp.ID)
	if st.ExitCode != nil && *st.ExitCode == 0 {
		t.Errorf("Status after a kill = %+v, want no clean exit", st)
	}
}

// checkCredential: the agent gets the launch credential in its
// environment, never on its command line, and Render's arguments.
func checkCredential(t *testing.T, factory Factory, _ Options) {
	p, req := factory(t)
	launch(t, p, req)
	r := waitReport(t, req.LogPath)
	if !r.HasCredential || r.CredentialOnArgv {
		t.Errorf("credential in env %v, on argv %v; want only in the environment", r.HasCredential, r.CredentialOnArgv)
	}
	if want := providers.Render(req)[1:]; !slices.Equal(r.Args, want) {
		t.Errorf("agent args = %q, want %q", r.Args, want)
	}
}

// checkWait: Wait returns when ctx is done while the worker runs, reports
// a drained and a killed worker's end with a reason, and answers at once
// for a worker that ended; Cleanup after a killed worker succeeds.
func checkWait(t *testing.T, factory Factory, opts Options) {
	p, req := factory(t)
	ctx := context.Background()
	resp := launch(t, p, req)
	waitReport(t, req.LogPath)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := p.Wait(short, providers.WaitRequest{ID: resp.ID}); err == nil {
		t.Errorf("Wait on a running worker returned before ctx was done")
	}
	cancel()
	done := make(chan providers.WaitResponse, 1)
	go func() {
		r, err := p.Wait(ctx, providers.WaitRequest{ID: resp.ID})
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
		done <- r
	}()
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case r := <-done:
		if !opts.drained(r.ExitCode) || r.Reason == "" {
			t.Errorf("Wait after a graceful stop = %+v, want exit code 0 and a reason", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Wait did not return 30s after the worker was stopped")
	}
	// Waiting again for a worker that ended answers at once.
	if r, err := p.Wait(ctx, providers.WaitRequest{ID: resp.ID}); err != nil || r.Reason == "" {
		t.Errorf("second Wait = %+v, %v", r, err)
	}

	p, req = factory(t)
	resp = launch(t, p, req)
	waitReport(t, req.LogPath)
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID, Kill: true}); err != nil {
		t.Fatalf("Stop(Kill): %v", err)
	}
	r, err := p.Wait(ctx, providers.WaitRequest{ID: resp.ID})
	if err != nil || (r.ExitCode != nil && *r.ExitCode == 0) || r.Reason == "" {
		t.Errorf("Wait after a kill = %+v, %v; want no clean exit and a reason", r, err)
	}
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID, WorkDir: req.WorkDir}); err != nil {
		t.Errorf("Cleanup after a killed worker: %v", err)
	}
}

// checkReclaimNothing: Reclaim with no launch records stops nothing.
func checkReclaimNothing(t *testing.T, factory Factory, _ Options) {
	p, req := factory(t)
	resp, err := p.Reclaim(context.Background(), providers.ReclaimRequest{WorkDir: req.WorkDir, ApplyIDs: []string{"dead-apply"}})
	if err != nil || len(resp.Stopped) != 0 {
		t.Errorf("Reclaim with no launches = %+v, %v; want nothing stopped", resp, err)
	}
}

// checkBadIDs: Status, Stop and Wait refuse ids the provider never gave.
func checkBadIDs(t *testing.T, factory Factory, _ Options) {
	p, _ := factory(t)
	for _, id := range []string{"", "nonsense", "pid:", "pid:-1"} {
		if _, err := p.Status(context.Background(), providers.StatusRequest{ID: id}); err == nil {
			t.Errorf("Status(%q) = nil error", id)
		}
		if err := p.Stop(context.Background(), providers.StopRequest{ID: id}); err == nil {
			t.Errorf("Stop(%q) = nil error", id)
		}
		if _, err := p.Wait(context.Background(), providers.WaitRequest{ID: id}); err == nil {
			t.Errorf("Wait(%q) = nil error", id)
		}
	}
}

// launch launches req through p, failing the test if it cannot, and
// makes the test kill the worker and clean up after it, as apply does
// with every worker that ended, when the test ends.
func launch(t *testing.T, p providers.Provider, req providers.LaunchRequest) providers.LaunchResponse {
	t.Helper()
	resp, err := p.Launch(context.Background(), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	id, workDir := resp.ID, req.WorkDir
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = p.Stop(ctx, providers.StopRequest{ID: id, Kill: true})
		if err := p.Cleanup(ctx, providers.CleanupRequest{ID: id, WorkDir: workDir}); err != nil {
			t.Errorf("Cleanup of %s: %v", id, err)
		}
	})
	return resp
}

// registered returns the Info the provider name is registered with.
func registered(name string) (providers.Info, bool) {
	for _, e := range providers.List() {
		if e.Info.Name == name && e.Status != providers.StatusPlanned {
			return e.Info, true
		}
	}
	return providers.Info{}, false
}

// noCredential fails the test when the credential appears anywhere in v
// (a response struct, printed with its field values).
func noCredential(t *testing.T, what, credential string, v any) {
	t.Helper()
	if s := fmt.Sprintf("%+v", v); credential != "" && strings.Contains(s, credential) {
		t.Errorf("%s shows the launch credential: %s", what, s)
	}
}

// madeNothing fails the test when the worker log of req exists: only a
// launch makes it (the fake agent, or a provider's first line, writes it).
func madeNothing(t *testing.T, call string, req providers.LaunchRequest) {
	t.Helper()
	if _, err := os.Stat(req.LogPath); err == nil {
		t.Errorf("%s wrote the worker log %s: it must launch nothing", call, req.LogPath)
	}
}

// waitReport waits for the fake agent's Report line in the worker log.
func waitReport(t *testing.T, logPath string) Report {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(logPath)
		// A provider may write lines of its own first (local names the
		// launch); the agent's first line is the report.
		rest := string(data)
		for {
			line, after, ok := strings.Cut(rest, "\n")
			if !ok {
				break
			}
			rest = after
			if !strings.HasPrefix(line, "{") {
				continue
			}
			var r Report
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("worker log %s has %q, not a report: %v", logPath, line, err)
			}
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report in the worker log %s after 30s (it holds %q)", logPath, data)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitExited polls Status until the worker is no longer running.
func waitExited(t *testing.T, p providers.Provider, id string) providers.StatusResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := p.Status(context.Background(), providers.StatusRequest{ID: id})
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if !st.Running {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s still running 30s after Stop", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
