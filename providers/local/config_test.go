package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
)

// load writes src as main.wdc.hcl of a new folder and loads it with this
// provider's schema.
func load(t *testing.T, src string) (*wdchcl.Config, hcl.Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return wdchcl.Load(dir, wdchcl.Inputs{Providers: map[string]wdchcl.ProviderSchema{Name: Schema}})
}

// TestLocalBlock: a local block's env decodes to the pool's settings
// (numbers as strings); a pool without the block has none; a launch_timeout
// left out is a minute.
func TestLocalBlock(t *testing.T) {
	cfg, diags := load(t, `pool "gpu" {
  provider = "local"
  local {
    env = { CUDA_VISIBLE_DEVICES = "0", N = 1 }
  }
}

pool "plain" {
  provider = "local"
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s, ok := cfg.Pools[0].Settings.(*Settings)
	if !ok {
		t.Fatalf("settings %T, want the local block decoded", cfg.Pools[0].Settings)
	}
	if len(s.Env) != 2 || s.Env["CUDA_VISIBLE_DEVICES"] != "0" || s.Env["N"] != "1" || s.Range.Start.Line != 3 || s.WritesAllowed() {
		t.Errorf("settings %+v", s)
	}
	if cfg.Pools[1].Settings != nil {
		t.Errorf("a pool without a local block has settings %+v", cfg.Pools[1].Settings)
	}
	if cfg.Pools[0].LaunchTimeout != time.Minute {
		t.Errorf("launch_timeout %s, want the local default 1m", cfg.Pools[0].LaunchTimeout)
	}
}

func TestLocalBlockErrors(t *testing.T) {
	for name, tt := range map[string]struct {
		block, want string
		line        int
	}{
		"unknown attribute": {`    image = "x"`, `An argument named "image" is not expected here`, 4},
		"env type":          {`    env = ["A"]`, "Incorrect attribute value type", 4},
		"null env value":    {`    env = { A = null }`, `The value of "env" for key "A" must not be null.`, 4},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := load(t, "pool \"p\" {\n  provider = \"local\"\n  local {\n"+tt.block+"\n  }\n}\n")
			if len(diags) != 1 || !strings.Contains(diags[0].Summary+": "+diags[0].Detail, tt.want) || diags[0].Subject.Start.Line != tt.line {
				t.Errorf("diagnostics %v, want one at line %d saying %q", diags, tt.line, tt.want)
			}
		})
	}
}

// TestLaunchGetsTheBlockEnv: the env of a pool's local block reaches its
// workers (under the request's own Env), and RenderLaunch names it.
func TestLaunchGetsTheBlockEnv(t *testing.T) {
	req := fakeAgentRequest(t)
	req.Env = map[string]string{"B": "from-request", "C": "3"}
	req.Settings = &Settings{Env: map[string]string{"A": "1", "B": "from-block"}}
	got := withBlockEnv(req).Env
	if len(got) != 3 || got["A"] != "1" || got["B"] != "from-request" || got["C"] != "3" {
		t.Errorf("env %v, want the block's under the request's", got)
	}
	if req.Env["A"] != "" {
		t.Errorf("the request's Env was changed: %v", req.Env)
	}
	resp, err := New().RenderLaunch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(resp.Env, "A") || !slices.Contains(resp.Env, "B") {
		t.Errorf("rendered Env %q, want the block's names", resp.Env)
	}
	env := New().environ(withBlockEnv(req))
	if !slices.Contains(env, "A=1") || !slices.Contains(env, "B=from-request") {
		t.Errorf("environ %q, want the block's env", env)
	}
	if got := withBlockEnv(providers.LaunchRequest{Env: map[string]string{"X": "1"}}).Env; len(got) != 1 {
		t.Errorf("without settings: %v", got)
	}
}
