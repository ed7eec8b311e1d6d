package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
		Index:        0,
		ServerURL:    "http://127.0.0.1:1",
		Token:        "pool-secret-token",
		WorkDir:      filepath.Join(dir, "work"),
		LogPath:      filepath.Join(dir, "logs", "worker-0.log"),
		Env:          map[string]string{providertest.FakeAgentEnv: "1"},
		Executable:   exe,
		DrainTimeout: 5 * time.Second,
	}
}

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) (providers.Provider, providers.LaunchRequest) {
		return New(), fakeAgentRequest(t)
	})
}

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
	// A token already in the caller's environment must not win over the pool's.
	p.Environ = append(os.Environ(), protocol.TokenEnv+"=caller-token")
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
	for _, want := range []string{`"own_group":true`, `"stdin_dev_null":true`, `"has_token":true`, `"token_on_argv":false`} {
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
		if v, ok := strings.CutPrefix(kv, protocol.TokenEnv+"="); ok {
			tokens = append(tokens, v)
		}
	}
	if len(tokens) != 1 || tokens[0] != req.Token {
		t.Errorf("worker's %s values = %q, want exactly the pool token", protocol.TokenEnv, tokens)
	}
}

func TestRender(t *testing.T) {
	req := providers.LaunchRequest{Executable: "/usr/bin/wdc", ServerURL: "http://127.0.0.1:7420", Pool: "builders", WorkDir: "/w", Token: "secret", DrainTimeout: 90 * time.Second}
	want := "/usr/bin/wdc agent --server http://127.0.0.1:7420 --pool builders --work-dir /w --drain-timeout 1m30s"
	if got := strings.Join(providers.Render(req), " "); got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	req.DrainTimeout = 0
	if got := strings.Join(providers.Render(req), " "); strings.Contains(got, "drain-timeout") {
		t.Errorf("Render without a drain timeout = %q", got)
	}
}

func TestLaunchErrors(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(r *providers.LaunchRequest)
		wantErr string
	}{
		{"no executable", func(r *providers.LaunchRequest) { r.Executable = "" }, "no executable"},
		{"no token", func(r *providers.LaunchRequest) { r.Token = "" }, "no pool token"},
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

func TestLookupErrors(t *testing.T) {
	for name, want := range map[string]error{"ray": providers.ErrNotBuilt, "kubernetes": providers.ErrNotBuilt, "nomad": providers.ErrUnknown} {
		_, err := providers.Lookup(name)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), "local") {
			t.Errorf("Lookup(%q) = %v, want %v listing local", name, err, want)
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
	p := &Provider{Environ: []string{"PATH=/bin", "WDC_VAR_secret=s3cr3t", "WDC_STATE=/x", "WDC_LISTEN=:1", "WDC_WORKER_TOKEN=old", "KEEP=1"}}
	got := strings.Join(p.environ(providers.LaunchRequest{Token: "tok", Env: map[string]string{"B": "2", "A": "1"}}), " ")
	want := "PATH=/bin KEEP=1 A=1 B=2 WDC_WORKER_TOKEN=tok"
	if got != want {
		t.Fatalf("environ = %q, want %q", got, want)
	}
}
