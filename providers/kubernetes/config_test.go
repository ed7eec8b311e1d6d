package kubernetes

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

func kubernetesConfig(block string) string {
	return "pool \"k\" {\n  provider = \"kubernetes\"\n  kubernetes {\n" + block + "\n  }\n}\n\ntask \"t\" {\n  command = [\"true\"]\n}\n"
}

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

// mustLoad is load for a configuration without errors.
func mustLoad(t *testing.T, src string) (string, *wdchcl.Config) {
	t.Helper()
	dir, cfg, diags := load(t, src)
	if diags.HasErrors() {
		t.Fatalf("unexpected errors: %v", diags)
	}
	return dir, cfg
}

func TestKubernetesBlock(t *testing.T) {
	dir, cfg := mustLoad(t, kubernetesConfig(`
    kubeconfig         = "kube/config"
    context            = "ci"
    namespace          = "batch"
    image              = "registry.example/wdc:1"
    image_pull_policy  = "IfNotPresent"
    command            = "/wdc"
    service_account    = "runner"
    node_selector      = { "kubernetes.io/arch" = "amd64" }
    labels             = { team = "data" }
    annotations        = { "example.com/owner" = "ops" }
    host_network       = true
    active_deadline    = "2h"
    ttl_after_finished = "0s"
    allow_writes       = true
    requests {
      cpu    = "500m"
      memory = "256Mi"
    }
    toleration {
      key                = "dedicated"
      value              = "batch"
      effect             = "NoExecute"
      toleration_seconds = 30
    }
    toleration {
      operator = "Exists"
    }`))
	k, ok := cfg.Pools[0].Settings.(*Settings)
	if !ok {
		t.Fatalf("settings %T, want the kubernetes block decoded", cfg.Pools[0].Settings)
	}
	thirty := int64(30)
	want := Settings{
		Kubeconfig: filepath.Join(dir, "kube/config"), Context: "ci", Namespace: "batch",
		Image: "registry.example/wdc:1", ImagePullPolicy: "IfNotPresent", Command: "/wdc", ServiceAccount: "runner",
		// Limits equal the requests when only requests are given.
		Requests: Resources{CPU: "500m", Memory: "256Mi"}, Limits: Resources{CPU: "500m", Memory: "256Mi"},
		NodeSelector: map[string]string{"kubernetes.io/arch": "amd64"}, Labels: map[string]string{"team": "data"},
		Annotations: map[string]string{"example.com/owner": "ops"},
		Tolerations: []Toleration{{Key: "dedicated", Value: "batch", Effect: "NoExecute", Seconds: &thirty}, {Operator: "Exists"}},
		HostNetwork: true, ActiveDeadline: 2 * time.Hour, TTLAfterFinished: 0, AllowWrites: true,
	}
	got := *k
	got.Range = want.Range
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if cfg.Pools[0].LaunchTimeout != 5*time.Minute {
		t.Errorf("launch_timeout %s, want the kubernetes default 5m", cfg.Pools[0].LaunchTimeout)
	}

	_, cfg = mustLoad(t, kubernetesConfig(`    image = "python:3.12"
    agent_image = "registry.example/wdc-agent:1"`))
	if k = cfg.Pools[0].Settings.(*Settings); k.AgentImage != "registry.example/wdc-agent:1" || k.Command != "" {
		t.Errorf("agent_image: %+v", k)
	}

	_, cfg = mustLoad(t, kubernetesConfig(`    image = "wdc"
    limits {
      cpu = "1"
    }`))
	k = cfg.Pools[0].Settings.(*Settings)
	if k.Requests.CPU != "1" || k.ActiveDeadline != DefaultActiveDeadline || k.TTLAfterFinished != DefaultTTLAfterFinished || k.AllowWrites {
		t.Errorf("defaults: %+v", k)
	}
}

func TestKubernetesBlockErrors(t *testing.T) {
	tests := []struct {
		name, block, want string
		line              int // of the error's subject, in main.wdc.hcl
	}{
		{"no image", `    namespace = "x"`, `The argument "image" is required`, 3},
		{"empty image", `    image = ""`, "Missing image", 4},
		{"image with a space", `    image = "a b"`, "contains white space", 4},
		{"image a number", `    image = 5`, `a string is required, not the number 5; write it in quotes ("5")`, 4},
		{"namespace a bool", "    image = \"w\"\n    namespace = true", "a string is required, not the bool true", 5},
		{"command a list", "    image = \"w\"\n    command = [\"/wdc\"]", "a string is required, not tuple", 5},
		{"namespace", "    image = \"w\"\n    namespace = \"Bad_NS\"", `namespace "Bad_NS" is not a valid Kubernetes name`, 5},
		{"service account", "    image = \"w\"\n    service_account = \"-x\"", `service_account "-x" is not a valid Kubernetes name`, 5},
		{"pull policy", "    image = \"w\"\n    image_pull_policy = \"Sometimes\"", `image_pull_policy must be "Always", "IfNotPresent" or "Never"`, 5},
		{"label key", "    image = \"w\"\n    labels = { \"bad key\" = \"v\" }", `labels key "bad key"`, 5},
		{"label value", "    image = \"w\"\n    labels = { k = \"" + strings.Repeat("v", 64) + "\" }", "Invalid label value", 5},
		{"reserved label", "    image = \"w\"\n    labels = { \"wdc.dev/pool\" = \"x\" }", "is set by wdc itself", 5},
		{"node selector", "    image = \"w\"\n    node_selector = { \"a/b/c\" = \"v\" }", "Invalid label key", 5},
		{"annotation key", "    image = \"w\"\n    annotations = { \"-x\" = \"v\" }", "Invalid annotation key", 5},
		{"quantity", "    image = \"w\"\n    requests {\n      cpu = \"lots\"\n    }", `requests.cpu "lots" is not a Kubernetes quantity`, 6},
		{"zero quantity", "    image = \"w\"\n    limits {\n      memory = \"0\"\n    }", "must be more than zero", 6},
		{"request above limit", "    image = \"w\"\n    requests {\n      cpu = \"2\"\n    }\n    limits {\n      cpu = \"1\"\n    }", "requests 2 cpu but limits it to 1", 0},
		{"deadline", "    image = \"w\"\n    active_deadline = \"500ms\"", "active_deadline is a whole number of seconds", 5},
		{"ttl", "    image = \"w\"\n    ttl_after_finished = \"1.5s\"", "ttl_after_finished is a whole number of seconds", 5},
		{"toleration operator", "    image = \"w\"\n    toleration {\n      key = \"k\"\n      operator = \"Maybe\"\n    }", "operator must be \"Equal\" or \"Exists\"", 7},
		{"toleration without key", "    image = \"w\"\n    toleration {\n      value = \"v\"\n    }", "Missing toleration key", 0},
		{"toleration seconds", "    image = \"w\"\n    toleration {\n      key = \"k\"\n      toleration_seconds = 5\n    }", "toleration_seconds only applies", 7},
		{"allow_writes type", "    image = \"w\"\n    allow_writes = \"yes\"", "allow_writes", 5},
		{"empty agent_image", "    image = \"w\"\n    agent_image = \"\"", "Missing agent_image", 5},
		{"agent_image with a space", "    image = \"w\"\n    agent_image = \"a b\"", "contains white space", 5},
		{"agent_image and command", "    image = \"w\"\n    command = \"/wdc\"\n    agent_image = \"wdc-agent:1\"", "with agent_image the pod runs the agent that image brings", 5},
		{"unknown attribute", "    image = \"w\"\n    replicas = 3", `An argument named "replicas" is not expected here`, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, diags := load(t, kubernetesConfig(tt.block))
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
				} else if tt.line > 0 && d.Subject.Start.Line != tt.line {
					t.Errorf("%q at line %d, want %d", tt.want, d.Subject.Start.Line, tt.line)
				}
				return
			}
			t.Errorf("no error says %q; got %q", tt.want, all)
		})
	}
}

// TestKubernetesBlockMissing: a kubernetes pool needs its block, and the
// error points at the pool.
func TestKubernetesBlockMissing(t *testing.T) {
	_, _, diags := load(t, "pool \"c\" {\n  provider = \"kubernetes\"\n}\n")
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `uses provider "kubernetes", so it needs a kubernetes { } block`) || diags[0].Subject.Start.Line != 1 {
		t.Errorf("a kubernetes pool without a kubernetes block: %v", diags)
	}
}
