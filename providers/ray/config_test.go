package ray

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// load writes src as main.wdc.hcl of a new folder and loads it with this
// provider's schema.
func load(t *testing.T, src string) (string, *wdchcl.Config, hcl.Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: map[string]wdchcl.ProviderSchema{Name: Schema}})
	return dir, cfg, diags
}

// mustLoad is load for a configuration without errors, returning the
// first pool's settings.
func mustLoad(t *testing.T, src string) (string, *wdchcl.Config, *Settings) {
	t.Helper()
	dir, cfg, diags := load(t, src)
	if diags.HasErrors() {
		t.Fatalf("unexpected errors: %v", diags)
	}
	s, ok := cfg.Pools[0].Settings.(*Settings)
	if !ok {
		t.Fatalf("settings %T, want the ray block decoded", cfg.Pools[0].Settings)
	}
	return dir, cfg, s
}

func rayConfig(block string) string {
	return "pool \"r\" {\n  provider = \"ray\"\n  ray {\n" + block + "\n  }\n}\n\ntask \"t\" {\n  command = [\"true\"]\n}\n"
}

// rayMinimal is a ray block with the required attributes only; it takes
// lines 4 and 5 of rayConfig's file.
const rayMinimal = "    address  = \"http://127.0.0.1:8265\"\n    wdc_path = \"/opt/wdc\""

func TestRayBlock(t *testing.T) {
	dir, cfg, r := mustLoad(t, rayConfig(`
    address              = "https://ray.example:8265/"
    token_file           = "ray.token"
    wdc_path             = "/abs/path/to/wdc"
    entrypoint_num_cpus  = 0.5
    entrypoint_num_gpus  = 0
    entrypoint_memory    = 268435456
    entrypoint_resources = { custom = 1 }
    env                  = { K = "v" }
    metadata             = { team = "x" }
    allow_writes         = true`))
	want := Settings{
		Address: "https://ray.example:8265", TokenFile: filepath.Join(dir, "ray.token"), WdcPath: "/abs/path/to/wdc",
		EntrypointNumCPUs: 0.5, EntrypointMemory: 268435456, EntrypointResources: map[string]float64{"custom": 1},
		Env: map[string]string{"K": "v"}, Metadata: map[string]string{"team": "x"}, AllowWrites: true,
	}
	got := *r
	got.Range = want.Range
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if cfg.Pools[0].LaunchTimeout != 5*time.Minute {
		t.Errorf("launch_timeout %s, want the ray default 5m", cfg.Pools[0].LaunchTimeout)
	}

	_, _, r = mustLoad(t, rayConfig("    address  = \"http://h:8265\"\n    wdc_path = \"wdc\""))
	if r.AllowWrites || r.TokenFile != "" || r.EntrypointNumCPUs != 0 || r.Env == nil || r.Metadata == nil || r.EntrypointResources == nil {
		t.Errorf("defaults: %+v", r)
	}

	// Without wdc_path the agent travels with the jobs.
	_, _, r = mustLoad(t, rayConfig("    address  = \"http://h:8265\""))
	if r.WdcPath != "" {
		t.Errorf("no wdc_path: %+v", r)
	}
}

func TestRayBlockErrors(t *testing.T) {
	tests := []struct {
		name, block, want string
		line              int // of the error's subject, in main.wdc.hcl
	}{
		{"no address", `    wdc_path = "/w"`, `The argument "address" is required`, 3},
		{"empty address", "    address = \"\"\n    wdc_path = \"/w\"", "address must be the Ray dashboard's URL", 4},
		{"ray client address", "    address = \"ray://h:10001\"\n    wdc_path = \"/w\"", "must start with http:// or https://", 4},
		{"address without host", "    address = \"http://\"\n    wdc_path = \"/w\"", "names no host", 4},
		{"address with password", "    address = \"http://u:p@h:8265\"\n    wdc_path = \"/w\"", "put Ray's token in token_file", 4},
		{"address with query", "    address = \"http://h:8265?x=1\"\n    wdc_path = \"/w\"", "must not have a query", 4},
		{"bad url", "    address = \"http://h:bad\"\n    wdc_path = \"/w\"", "is not a URL", 4},
		{"address a number", "    address = 8265\n    wdc_path = \"/w\"", "a string is required, not the number 8265", 4},
		{"empty wdc_path", "    address = \"http://h:8265\"\n    wdc_path = \" \"", "wdc_path must name the wdc binary", 5},
		{"relative wdc_path", "    address = \"http://h:8265\"\n    wdc_path = \"bin/wdc\"", "is relative", 5},
		{"wdc_path line break", "    address = \"http://h:8265\"\n    wdc_path = \"/w\\nx\"", "contains a NUL or a line break", 5},
		{"empty token_file", rayMinimal + "\n    token_file = \"\"", "Empty token_file", 6},
		{"negative cpus", rayMinimal + "\n    entrypoint_num_cpus = -1", `"entrypoint_num_cpus" must be a number of at least 0`, 6},
		{"cpus type", rayMinimal + "\n    entrypoint_num_cpus = \"lots\"", "Incorrect attribute value type", 6},
		{"negative gpus", rayMinimal + "\n    entrypoint_num_gpus = -0.5", `"entrypoint_num_gpus" must be a number of at least 0`, 6},
		{"fractional memory", rayMinimal + "\n    entrypoint_memory = 1.5", "is a whole number of bytes", 6},
		{"negative memory", rayMinimal + "\n    entrypoint_memory = -1", "must be between 0 and", 6},
		{"huge memory", rayMinimal + "\n    entrypoint_memory = 1e30", "must be between 0 and", 6},
		{"negative resource", rayMinimal + "\n    entrypoint_resources = { custom = -1 }", `resource "custom" must be at least 0`, 6},
		{"built-in resource", rayMinimal + "\n    entrypoint_resources = { CPU = 1 }", "use entrypoint_num_cpus", 6},
		{"resource type", rayMinimal + "\n    entrypoint_resources = { a = \"x\" }", "Incorrect attribute value type", 6},
		{"env name", rayMinimal + "\n    env = { \"1X\" = \"v\" }", `env key "1X" is not a variable name`, 6},
		{"env credential", rayMinimal + "\n    env = { WDC_LAUNCH_CREDENTIAL = \"v\" }", "env must not set WDC_LAUNCH_CREDENTIAL", 6},
		{"reserved metadata", rayMinimal + "\n    metadata = { \"wdc.pool\" = \"x\" }", "is set by wdc itself", 6},
		{"empty metadata key", rayMinimal + "\n    metadata = { \"\" = \"x\" }", "must not be empty", 6},
		{"metadata type", rayMinimal + "\n    metadata = { a = [1] }", "Incorrect attribute value type", 6},
		{"allow_writes type", rayMinimal + "\n    allow_writes = \"yes\"", "allow_writes", 6},
		{"unknown attribute", rayMinimal + "\n    working_dir = \".\"", `An argument named "working_dir" is not expected here`, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, diags := load(t, rayConfig(tt.block))
			if !diags.HasErrors() {
				t.Fatalf("no error for\n%s", tt.block)
			}
			var all []string
			for _, d := range diags {
				all = append(all, d.Summary+": "+d.Detail)
				if !strings.Contains(d.Summary+": "+d.Detail, tt.want) {
					continue
				}
				if d.Subject == nil || filepath.Base(d.Subject.Filename) != "main.wdc.hcl" {
					t.Errorf("%q has no subject in main.wdc.hcl: %+v", tt.want, d.Subject)
				} else if d.Subject.Start.Line != tt.line {
					t.Errorf("%q at line %d, want %d", tt.want, d.Subject.Start.Line, tt.line)
				} else if d.Subject.Start.Column < 1 {
					t.Errorf("%q has no column: %+v", tt.want, d.Subject)
				}
				return
			}
			t.Errorf("no error says %q; got %q", tt.want, all)
		})
	}
}

// TestRayBlockMissing: a ray pool needs its block, and the error points at
// the pool.
func TestRayBlockMissing(t *testing.T) {
	_, _, diags := load(t, "pool \"r\" {\n  provider = \"ray\"\n}\n")
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "needs a ray { } block") {
		t.Errorf("a ray pool without a ray block: %v", diags)
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `uses provider "ray", so it needs a ray { } block`) || diags[0].Subject.Start.Line != 1 {
		t.Errorf("a ray pool without a ray block: %v, want one error on the pool's line", diags)
	}
}
