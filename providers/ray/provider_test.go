package ray

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
)

func testProvider(t *testing.T) *Provider {
	p := New()
	p.PollInterval, p.LogInterval, p.StopWait = 5*time.Millisecond, 5*time.Millisecond, 2*time.Second
	p.RedeleteAfter = []time.Duration{30 * time.Millisecond, 60 * time.Millisecond}
	t.Cleanup(func() { p.Close() })
	return p
}

func block(f *fakeRay) *Settings {
	return &Settings{Address: f.srv.URL, WdcPath: "/opt/wdc bin/wdc", EntrypointNumCPUs: 0.5, EntrypointMemory: 1 << 28,
		EntrypointResources: map[string]float64{"custom": 1}, Env: map[string]string{"K": "v"},
		Metadata: map[string]string{"team": "x"}, AllowWrites: true}
}

func request(t *testing.T, s *Settings) providers.LaunchRequest {
	dir := t.TempDir()
	return providers.LaunchRequest{Pool: "builders", Lineage: "lin", ApplyID: "apply-1", Seq: 1,
		ServerURL: "http://10.0.0.1:7000", Credential: "wdcl_secret", WorkDir: filepath.Join(dir, "work"),
		LogPath: filepath.Join(dir, "logs", "builders-1.log"), Env: map[string]string{"E": "1"},
		Executable: "/local/wdc", DrainTimeout: 5 * time.Second, Settings: s}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSubmissionID(t *testing.T) {
	a := SubmissionID("lin", "apply-1", "builders", 1)
	if !strings.HasPrefix(a, "wdc-builders-1-") || len(a) != len("wdc-builders-1-")+10 {
		t.Errorf("SubmissionID = %q", a)
	}
	for _, other := range []string{SubmissionID("lin2", "apply-1", "builders", 1), SubmissionID("lin", "apply-2", "builders", 1),
		SubmissionID("lin", "apply-1", "b", 1), SubmissionID("lin", "apply-1", "builders", 2)} {
		if other == a {
			t.Errorf("two launches share the submission id %q", a)
		}
	}
	if a != SubmissionID("lin", "apply-1", "builders", 1) {
		t.Error("SubmissionID is not deterministic")
	}
	if got := SubmissionID("l", "a", "x y/"+strings.Repeat("p", 60), 3); strings.ContainsAny(got, " /") || len(got) > 4+40+3+11 {
		t.Errorf("a long odd pool name gives %q", got)
	}
}

func TestShellQuote(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"wdc", "wdc"}, {"/opt/wdc", "/opt/wdc"}, {"http://h:1/x", "http://h:1/x"}, {"5s", "5s"},
		{"", "''"}, {"a b", "'a b'"}, {"it's", `'it'\''s'`}, {"$(rm -rf /)", "'$(rm -rf /)'"}, {"a;b", "'a;b'"}, {"`x`", "'`x`'"},
		{"*", "'*'"}, {"~", "'~'"}, {"a\nb", "'a\nb'"},
	} {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRenderLaunch(t *testing.T) {
	f := newFakeRay(t)
	p := testProvider(t)
	s := block(f)
	req := request(t, s)
	r, err := p.RenderLaunch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{"/opt/wdc bin/wdc", "agent", "--server", "http://10.0.0.1:7000", "--pool", "builders", "--work-dir", req.WorkDir, "--drain-timeout", "5s"}
	if !slices.Equal(r.Argv, wantArgv) {
		t.Errorf("Argv %q, want %q", r.Argv, wantArgv)
	}
	if want := []string{"E", "K", protocol.LaunchCredentialEnv}; !slices.Equal(r.Env, want) {
		t.Errorf("Env %q, want %q", r.Env, want)
	}
	if len(r.Objects) != 1 || r.Objects[0].Kind != "JobSubmission" || r.Objects[0].Name != SubmissionID("lin", "apply-1", "builders", 1) {
		t.Fatalf("Objects %+v", r.Objects)
	}
	body := r.Objects[0].Body
	if strings.Contains(body, "wdcl_secret") || !strings.Contains(body, `"WDC_LAUNCH_CREDENTIAL": "(sensitive)"`) {
		t.Errorf("the body shows the credential, or not its redaction:\n%s", body)
	}
	var sub JobSubmission
	if err := json.Unmarshal([]byte(body), &sub); err != nil {
		t.Fatal(err)
	}
	if sub.Entrypoint != "'/opt/wdc bin/wdc' agent --server http://10.0.0.1:7000 --pool builders --work-dir "+req.WorkDir+" --drain-timeout 5s" ||
		sub.Metadata[MetaPool] != "builders" || sub.Metadata["team"] != "x" || sub.Metadata[MetaManagedBy] != "wdc" ||
		sub.EntrypointNumCPUs != 0.5 || sub.EntrypointMemory != 1<<28 || sub.EntrypointResources["custom"] != 1 {
		t.Errorf("rendered submission %+v", sub)
	}
	// Zero fields are left out: Ray refuses keys it does not know, and
	// older heads do not know every one.
	if strings.Contains(body, "entrypoint_num_gpus") {
		t.Errorf("a zero field is in the body:\n%s", body)
	}
	if _, err := os.Stat(req.LogPath); err == nil {
		t.Error("RenderLaunch made the log file")
	}
	if len(f.requests) != 0 {
		t.Errorf("RenderLaunch talked to Ray: %q", f.requests)
	}
}

func TestLaunchAndWait(t *testing.T) {
	ctx := context.Background()
	three := 3
	tests := []struct {
		name        string
		end         func(f *fakeRay, id string)
		wantCode    *int
		wantSignal  string
		wantReasons []string
	}{
		{"succeeded", func(f *fakeRay, id string) {
			zero := 0
			f.set(id, StatusSucceeded, &zero, "Job finished successfully.")
		},
			new(int), "", []string{"succeeded", "status 0"}},
		{"failed", func(f *fakeRay, id string) {
			f.mu.Lock()
			f.jobs[id].ErrorType = "JOB_ENTRYPOINT_COMMAND_ERROR"
			f.mu.Unlock()
			f.set(id, StatusFailed, &three, "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\nboom")
		}, &three, "", []string{"failed (JOB_ENTRYPOINT_COMMAND_ERROR): Job entrypoint command failed with exit code 3"}},
		{"killed", func(f *fakeRay, id string) { c := 137; f.set(id, StatusFailed, &c, "") }, func() *int { c := 137; return &c }(), "SIGKILL", []string{"failed"}},
		{"stopped by someone", func(f *fakeRay, id string) { f.set(id, StatusStopped, nil, "Job was intentionally stopped.") },
			nil, "", []string{"was stopped", "intentionally stopped"}},
		{"deleted", func(f *fakeRay, id string) { f.mu.Lock(); delete(f.jobs, id); f.mu.Unlock() }, nil, "", []string{"is gone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRay(t)
			p := testProvider(t)
			req := request(t, block(f))
			resp, err := p.Launch(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			sub := SubmissionID("lin", "apply-1", "builders", 1)
			if resp.ID != "ray:"+sub || resp.Host != f.srv.URL || resp.Argv[0] != "/opt/wdc bin/wdc" {
				t.Errorf("LaunchResponse %+v", resp)
			}
			got := f.submissions[0]
			if got.RuntimeEnv.EnvVars[protocol.LaunchCredentialEnv] != "wdcl_secret" || got.RuntimeEnv.EnvVars["K"] != "v" || got.RuntimeEnv.EnvVars["E"] != "1" {
				t.Errorf("env_vars %v", got.RuntimeEnv.EnvVars)
			}
			if strings.Contains(got.Entrypoint, "wdcl_secret") {
				t.Errorf("the credential is in the entrypoint %q", got.Entrypoint)
			}
			if st, err := p.Status(ctx, providers.StatusRequest{ID: resp.ID}); err != nil || !st.Running {
				t.Errorf("Status of a pending job = %+v, %v", st, err)
			}
			f.set(sub, StatusRunning, nil, "")
			f.log(sub, "agent: started\n")
			waitFor(t, "the log copied", func() bool {
				b, _ := os.ReadFile(req.LogPath)
				return strings.HasSuffix(string(b), "agent: started\n")
			})
			f.log(sub, "agent: done\n")
			tt.end(f, sub)
			w, err := p.Wait(ctx, providers.WaitRequest{ID: resp.ID})
			if err != nil {
				t.Fatal(err)
			}
			if (w.ExitCode == nil) != (tt.wantCode == nil) || (w.ExitCode != nil && *w.ExitCode != *tt.wantCode) || w.Signal != tt.wantSignal {
				t.Errorf("Wait = %+v (code %v), want code %v signal %q", w, w.ExitCode, tt.wantCode, tt.wantSignal)
			}
			for _, r := range tt.wantReasons {
				if !strings.Contains(w.Reason, r) {
					t.Errorf("Reason %q does not say %q", w.Reason, r)
				}
			}
			b, _ := os.ReadFile(req.LogPath)
			if want := "Ray job " + sub; !strings.HasPrefix(string(b), "wdc: submitted "+want) {
				t.Errorf("log starts %q", b)
			}
			if tt.name != "deleted" && !strings.HasSuffix(string(b), "agent: started\nagent: done\n") {
				t.Errorf("log %q lacks the job's whole log once", b)
			}
		})
	}
}

// A submission whose answer was lost is retried; Ray answers "already
// exists" and the launch attaches to its own job, not to another's.
func TestLaunchAttachesAfterALostAnswer(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	p := testProvider(t)
	req := request(t, block(f))
	f.loseAnswers = 1
	resp, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatalf("Launch after a lost answer: %v", err)
	}
	if n := f.count("POST /api/jobs/"); n != 2 {
		t.Errorf("%d submissions, want 2 (the lost one and its retry)", n)
	}
	if len(f.jobs) != 1 {
		t.Errorf("%d jobs on Ray, want 1", len(f.jobs))
	}
	if b, _ := os.ReadFile(req.LogPath); !strings.HasPrefix(string(b), "wdc: attached to Ray job") {
		t.Errorf("log %q", b)
	}
	_ = resp

	// A job of that id that is not this launch's is an error.
	f2 := newFakeRay(t)
	req2 := request(t, block(f2))
	f2.add(JobDetails{Type: "SUBMISSION", SubmissionID: SubmissionID("lin", "apply-1", "builders", 1), Status: StatusRunning,
		Metadata: map[string]string{MetaManagedBy: "wdc", MetaLineage: "other"}})
	if _, err := p.Launch(ctx, req2); err == nil || !strings.Contains(err.Error(), "is not this launch's") {
		t.Errorf("Launch onto another's job = %v", err)
	}
	if _, err := os.Stat(req2.LogPath); err == nil {
		t.Error("a failed launch made the log file")
	}
}

func TestLaunchErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(f *fakeRay, s *Settings)
		want  string
	}{
		{"no agent", func(f *fakeRay, s *Settings) { f.unavailable = 100 }, "No available agent"},
		{"wrong token", func(f *fakeRay, s *Settings) { f.token = "right" }, "not authorized"},
		{"missing token file", func(f *fakeRay, s *Settings) { s.TokenFile = "/nonexistent/ray.token" }, "reading the token_file"},
		{"unreachable", func(f *fakeRay, s *Settings) { s.Address = "http://127.0.0.1:1" }, "no answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRay(t)
			p := testProvider(t)
			s := block(f)
			tt.setup(f, s)
			req := request(t, s)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := p.Launch(cctx, req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Launch = %v, want an error saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "wdcl_secret") {
				t.Errorf("the error shows the credential: %v", err)
			}
			if _, err := os.Stat(req.LogPath); err == nil {
				t.Error("a failed launch made the log file")
			}
		})
	}
}

func TestTokenFileAndEnv(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	f.token = "tok"
	s := block(f)
	s.TokenFile = filepath.Join(t.TempDir(), "ray.token")
	os.WriteFile(s.TokenFile, []byte("tok\n"), 0o600) //nolint:errcheck // checked by the launch
	if _, err := testProvider(t).Launch(ctx, request(t, s)); err != nil {
		t.Errorf("Launch with a token file: %v", err)
	}
	t.Setenv(TokenEnv, "tok")
	s2 := block(f)
	req := request(t, s2)
	req.Seq = 2
	if _, err := testProvider(t).Launch(ctx, req); err != nil {
		t.Errorf("Launch with %s: %v", TokenEnv, err)
	}
}

func TestStopKillAndCleanup(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	p := testProvider(t)
	req := request(t, block(f))
	resp, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sub := strings.TrimPrefix(resp.ID, "ray:")
	f.set(sub, StatusRunning, nil, "")
	waitFor(t, "the poller to see RUNNING", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.workers[resp.ID].status == StatusRunning })

	// Ray refuses to delete a running job: Cleanup stops it first.
	if _, err := f.client().Delete(ctx, sub); err == nil || !strings.Contains(err.Error(), "non-terminal") {
		t.Fatalf("the fake deleted a running job: %v", err)
	}
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID, Kill: true}); err != nil {
		t.Fatalf("Stop(Kill): %v", err)
	}
	st, err := p.Status(ctx, providers.StatusRequest{ID: resp.ID})
	if err != nil || st.Running || st.ExitCode != nil {
		t.Errorf("Status after a kill = %+v, %v; want ended without an exit code (Ray keeps none for STOPPED)", st, err)
	}
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID}); err != nil {
		t.Errorf("Stop of an ended worker: %v", err)
	}
	f.log(sub, "last words\n")
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID}); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if _, ok := f.job(sub); ok {
		t.Error("Cleanup left the job on Ray")
	}
	if b, _ := os.ReadFile(req.LogPath); !strings.HasSuffix(string(b), "last words\n") {
		t.Errorf("Cleanup did not copy the rest of the log: %q", b)
	}
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID}); err != nil {
		t.Errorf("a second Cleanup: %v", err)
	}

	// A running job that Cleanup must stop first.
	req.Seq = 2
	resp, err = p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sub = strings.TrimPrefix(resp.ID, "ray:")
	f.set(sub, StatusRunning, nil, "")
	waitFor(t, "RUNNING", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.workers[resp.ID].status == StatusRunning })
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID}); err != nil {
		t.Fatalf("Cleanup of a running job: %v", err)
	}
	if _, ok := f.job(sub); ok || f.count("POST /api/jobs/"+sub+"/stop") != 1 {
		t.Errorf("Cleanup of a running job: left %v, %d stops", ok, f.count("POST /api/jobs/"+sub+"/stop"))
	}

	// A PENDING job does not end by a stop: the kill returns at once,
	// and Cleanup says it is left on Ray.
	req.Seq = 3
	f.onStop = func(j *JobDetails) {} // Ray stops it only once it starts
	resp, err = p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID, Kill: true}); err != nil {
		t.Errorf("Stop(Kill) of a pending job: %v", err)
	}
	if err := p.Cleanup(ctx, providers.CleanupRequest{ID: resp.ID}); err == nil || !strings.Contains(err.Error(), "is PENDING") {
		t.Errorf("Cleanup of a pending job = %v, want it left and said", err)
	}

	// A running job that will not end: the kill gives up after StopWait.
	req.Seq = 4
	p.StopWait = 50 * time.Millisecond
	resp, err = p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	f.set(strings.TrimPrefix(resp.ID, "ray:"), StatusRunning, nil, "")
	waitFor(t, "RUNNING", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.workers[resp.ID].status == StatusRunning })
	if err := p.Stop(ctx, providers.StopRequest{ID: resp.ID, Kill: true}); err == nil || !strings.Contains(err.Error(), "still RUNNING") {
		t.Errorf("Stop(Kill) of a job that does not end = %v", err)
	}
}

func TestBadIDs(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	for _, id := range []string{"", "ray:", "pid:1", "job:default/x", "ray:never-launched"} {
		if _, err := p.Status(ctx, providers.StatusRequest{ID: id}); err == nil {
			t.Errorf("Status(%q) = nil error", id)
		}
		if err := p.Stop(ctx, providers.StopRequest{ID: id}); err == nil {
			t.Errorf("Stop(%q) = nil error", id)
		}
		if _, err := p.Wait(ctx, providers.WaitRequest{ID: id}); err == nil {
			t.Errorf("Wait(%q) = nil error", id)
		}
	}
}

func TestReclaimAndLeftovers(t *testing.T) {
	ctx := context.Background()
	f := newFakeRay(t)
	s := block(f)
	meta := func(lineage, apply, seq string) map[string]string {
		return map[string]string{MetaManagedBy: "wdc", MetaLineage: lineage, MetaApplyID: apply, MetaPool: "builders", MetaLaunchSeq: seq}
	}
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "dead-running", Status: StatusRunning, Metadata: meta("lin", "dead", "1")})
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "dead-done", Status: StatusFailed, Metadata: meta("lin", "dead", "2")})
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "dead-norecord", Status: StatusRunning, Metadata: meta("lin", "dead2", "1")})
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "live", Status: StatusRunning, Metadata: meta("lin", "live", "1")})
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "other-lineage", Status: StatusRunning, Metadata: meta("other", "dead", "1")})
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "not-wdc", Status: StatusRunning, Metadata: map[string]string{MetaLineage: "lin", MetaApplyID: "dead"}})
	records := []providers.LaunchRecord{
		{ApplyID: "dead", Pool: "builders", Seq: 1, ID: "ray:dead-running"},
		{ApplyID: "dead", Pool: "builders", Seq: 2, ID: "ray:dead-done"},
		{ApplyID: "dead", Pool: "builders", Seq: 3, ID: "ray:dead-gone"},
	}
	req := providers.ReclaimRequest{Launches: records, ApplyIDs: []string{"dead", "dead2"}, Lineage: "lin", Settings: []wdchcl.ProviderSettings{s, s}}

	p := testProvider(t)
	left, err := p.FindLeftovers(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range left.Leftovers {
		names = append(names, l.What+" | "+l.Stop)
	}
	want := []string{
		"Ray job dead-running (RUNNING) of apply dead (pool builders, launch 1) on " + f.srv.URL + " | ray job stop --address " + f.srv.URL + " dead-running",
		"Ray job dead-done (FAILED) of apply dead (pool builders, launch 2) on " + f.srv.URL + " | ray job delete --address " + f.srv.URL + " dead-done",
		"Ray job dead-norecord (RUNNING) of apply dead2 (pool builders, launch 1) on " + f.srv.URL + " | ray job stop --address " + f.srv.URL + " dead-norecord",
	}
	if !slices.Equal(names, want) {
		t.Errorf("leftovers\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if left.Leftovers[0].Launch == nil || left.Leftovers[2].Launch != nil {
		t.Errorf("leftovers' records: %+v", left.Leftovers)
	}
	if n := f.count("POST /api/jobs/dead-running/stop"); n != 0 {
		t.Error("FindLeftovers stopped a job")
	}

	resp, err := p.Reclaim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Stopped) != 1 || resp.Stopped[0].Seq != 1 || len(resp.Gone) != 2 || resp.OrphanWorkers != 1 {
		t.Errorf("Reclaim = %+v", resp)
	}
	for _, id := range []string{"dead-running", "dead-done", "dead-norecord"} {
		if _, ok := f.job(id); ok {
			t.Errorf("Reclaim left %s", id)
		}
	}
	for _, id := range []string{"live", "other-lineage", "not-wdc"} {
		if j, ok := f.job(id); !ok || j.Status != StatusRunning {
			t.Errorf("Reclaim touched %s: %+v", id, j)
		}
	}

	// A pool that left the configuration: its launch records name the
	// head (Host), and its jobs are found there.
	f.add(JobDetails{Type: "SUBMISSION", SubmissionID: "left-config", Status: StatusRunning, Metadata: meta("lin", "dead3", "1")})
	gone := providers.ReclaimRequest{Lineage: "lin", Launches: []providers.LaunchRecord{{ApplyID: "dead3", Pool: "old", Seq: 1, ID: "ray:left-config", Host: f.srv.URL}}}
	if resp, err := p.Reclaim(ctx, gone); err != nil || len(resp.Stopped) != 1 {
		t.Errorf("Reclaim of a pool no longer configured = %+v, %v; want its job stopped", resp, err)
	}
	if _, ok := f.job("left-config"); ok {
		t.Error("Reclaim left the job of a pool no longer configured")
	}

	// No lineage, or no dead apply: nothing is looked at.
	for _, r := range []providers.ReclaimRequest{{ApplyIDs: []string{"dead"}, Settings: []wdchcl.ProviderSettings{s}}, {Lineage: "lin", Settings: []wdchcl.ProviderSettings{s}}} {
		if resp, err := p.Reclaim(ctx, r); err != nil || len(resp.Stopped)+resp.OrphanWorkers != 0 {
			t.Errorf("Reclaim(%+v) = %+v, %v", r, resp, err)
		}
	}
}

func TestDryRun(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		setup       func(f *fakeRay, s *Settings)
		unreachable bool
		refusal     string
		warning     string
	}{
		{"accepted", func(f *fakeRay, s *Settings) {}, false, "", ""},
		{"unreachable", func(f *fakeRay, s *Settings) { s.Address = "http://127.0.0.1:1" }, true, "", ""},
		{"token file", func(f *fakeRay, s *Settings) { s.TokenFile = "/nonexistent" }, true, "", ""},
		{"wrong token", func(f *fakeRay, s *Settings) { f.token = "x" }, false, "not authorized", ""},
		{"too old", func(f *fakeRay, s *Settings) { f.version = "2.5.1" }, false, `version "2.5.1"; wdc needs Ray 2.9.0`, ""},
		{"not the dashboard", func(f *fakeRay, s *Settings) { s.Address += "/nothing" }, false, "dashboard's address", ""},
		{"exists", func(f *fakeRay, s *Settings) {
			f.add(JobDetails{SubmissionID: SubmissionID("lin", "apply-1", "builders", 1), Status: StatusRunning})
		}, false, "", "exists already"},
		{"no wdc_path: the package is asked for", func(f *fakeRay, s *Settings) { s.WdcPath = "" }, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRay(t)
			s := block(f)
			tt.setup(f, s)
			req := request(t, s)
			resp, err := testProvider(t).DryRunLaunch(ctx, req)
			switch {
			case tt.unreachable:
				if !errors.Is(err, providers.ErrUnreachable) {
					t.Errorf("DryRunLaunch = %v, want ErrUnreachable", err)
				}
			case tt.refusal != "":
				if err == nil || errors.Is(err, providers.ErrUnreachable) || !strings.Contains(err.Error(), tt.refusal) {
					t.Errorf("DryRunLaunch = %v, want a refusal saying %q", err, tt.refusal)
				}
			case err != nil:
				t.Errorf("DryRunLaunch = %v", err)
			case tt.warning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tt.warning)):
				t.Errorf("warnings %q, want %q", resp.Warnings, tt.warning)
			}
			if n := f.count("POST /api/jobs/"); n != 0 {
				t.Errorf("the dry run submitted %d jobs", n)
			}
			asked := false
			for _, r := range f.requests {
				asked = asked || strings.HasPrefix(r, "GET /api/packages/gcs/_ray_pkg_")
				if strings.HasPrefix(r, "PUT ") {
					t.Errorf("the dry run uploaded: %s", r)
				}
			}
			if want := s.WdcPath == "" && !tt.unreachable && tt.refusal == ""; asked != want {
				t.Errorf("the dry run asked for the agent's package: %v, want %v", asked, want)
			}
			if _, err := os.Stat(req.LogPath); err == nil {
				t.Error("the dry run made the log file")
			}
		})
	}
}

func TestAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"2.60.0", true}, {"2.9.0", true}, {"2.10.1", true}, {"3.0.0rc1", true}, {"2.8.9", false}, {"1.13.0", false}, {"", false}, {"2.9", true}} {
		if got := atLeast(tt.v, MinVersion); got != tt.want {
			t.Errorf("atLeast(%q) = %v", tt.v, got)
		}
	}
}

// A job Ray writes back after its delete (its supervisor actor died after
// it) is deleted again: nothing of the apply stays on the head.
func TestCleanupDeletesAJobRayWritesBack(t *testing.T) {
	f := newFakeRay(t)
	f.resurrect = 10 * time.Millisecond
	p := testProvider(t)
	req := request(t, block(f))
	resp, err := p.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(resp.ID, "ray:")
	zero := 0
	f.set(id, "SUCCEEDED", &zero, "done")
	if _, err := p.Wait(context.Background(), providers.WaitRequest{ID: resp.ID}); err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(context.Background(), providers.CleanupRequest{ID: resp.ID}); err != nil {
		t.Fatal(err)
	}
	p.Close() // waits for the second look
	if j, ok := f.job(id); ok {
		t.Errorf("job %s is back on the head after Cleanup: %+v", id, j)
	}
	if n := f.count("DELETE /api/jobs/" + id); n != 2 {
		t.Errorf("%d deletes of the job, want 2 (the first, and the one after Ray wrote it back)", n)
	}
}
