package builtin

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/providers/kubernetes"
	"github.com/wdc-dev/wdc/providers/local"
	"github.com/wdc-dev/wdc/providers/providertest"
	"github.com/wdc-dev/wdc/providers/ray"
)

func TestMain(m *testing.M) {
	if os.Getenv(providertest.FakeAgentEnv) != "" {
		providertest.FakeAgent()
	}
	os.Exit(m.Run())
}

// factories make each built-in provider and a request that launches a
// fake agent through it, for the conformance suite. Every registered
// provider must have one.
var factories = map[string]providertest.Factory{
	local.Name: func(t *testing.T) (providers.Provider, providers.LaunchRequest) {
		return local.New(), localRequest(t)
	},
	kubernetes.Name: kubernetesRequest,
	ray.Name:        rayRequest,
}

// options are the conformance options of providers whose targets report
// less than a process does.
var options = map[string]providertest.Options{
	ray.Name: {NoExitCodeAfterStop: true},
}

// Environment of the Ray conformance run: a Ray head's dashboard URL and,
// for a head with token authentication, the file holding its token. The
// head runs on this machine (it runs this test binary by its path).
const (
	rayAddressEnv   = "WDC_TEST_RAY_ADDRESS"
	rayTokenFileEnv = "WDC_TEST_RAY_TOKEN_FILE"
)

// rayRequest launches this test binary, as a fake agent, as a job on the
// Ray head WDC_TEST_RAY_ADDRESS names; without it the sub-test is skipped.
func rayRequest(t *testing.T) (providers.Provider, providers.LaunchRequest) {
	t.Helper()
	address := os.Getenv(rayAddressEnv)
	if address == "" {
		t.Skipf("no Ray head: set %s (and %s for a head with token authentication)", rayAddressEnv, rayTokenFileEnv)
	}
	req := localRequest(t)
	req.Lineage = "conformance-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	req.ApplyID = "apply-" + strconv.Itoa(req.Seq)
	req.Settings = &ray.Settings{Address: address, TokenFile: os.Getenv(rayTokenFileEnv), WdcPath: req.Executable,
		Env: map[string]string{}, Metadata: map[string]string{}, EntrypointResources: map[string]float64{}, AllowWrites: true}
	p := ray.New()
	t.Cleanup(func() { p.Close() })
	return p, req
}

// Environment of the Kubernetes conformance run (scripts/test-kubernetes.sh
// sets them): a testbed's kubeconfig, and an image holding this test binary,
// compiled with CGO_ENABLED=0, at KubernetesTestCommandEnv's path.
const (
	kubeconfigEnv = "WDC_TEST_KUBECONFIG"
	imageEnv      = "WDC_TEST_K8S_IMAGE"
	commandEnv    = "WDC_TEST_K8S_COMMAND"
)

// kubernetesRequest launches this test binary, as a fake agent, in a pod
// of the cluster WDC_TEST_KUBECONFIG names; without it the sub-test is
// skipped (the suite runs against a real kubelet in CI).
func kubernetesRequest(t *testing.T) (providers.Provider, providers.LaunchRequest) {
	t.Helper()
	kubeconfig, image, command := os.Getenv(kubeconfigEnv), os.Getenv(imageEnv), os.Getenv(commandEnv)
	if kubeconfig == "" || image == "" || command == "" {
		t.Skipf("no cluster: set %s, %s and %s (scripts/test-kubernetes.sh, `make test-kubernetes`, does)", kubeconfigEnv, imageEnv, commandEnv)
	}
	req := localRequest(t)
	req.Executable, req.WorkDir = command, "/wdc-work"
	req.Lineage = "conformance-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	req.ApplyID = "apply-" + strconv.Itoa(req.Seq)
	req.HeartbeatTTL = 10 * time.Second
	req.Settings = &kubernetes.Settings{Kubeconfig: kubeconfig, Namespace: "default", Image: image, ImagePullPolicy: "Never",
		Command: command, HostNetwork: true, ActiveDeadline: 10 * time.Minute, TTLAfterFinished: time.Minute, AllowWrites: true}
	p := kubernetes.New(kubernetes.Connect)
	t.Cleanup(func() { p.Close() })
	return p, req
}

// localRequest launches this test binary as a fake agent.
func localRequest(t *testing.T) providers.LaunchRequest {
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

// TestConformance runs the conformance suite against every registered
// provider, and fails for one that has no factory here (or a factory of a
// provider that is not registered).
func TestConformance(t *testing.T) {
	names := providers.Names()
	if len(names) == 0 {
		t.Fatal("no provider is registered")
	}
	for _, name := range names {
		factory, ok := factories[name]
		if !ok {
			t.Errorf("provider %q is registered but has no conformance factory in providers/builtin/conformance_test.go", name)
			continue
		}
		t.Run(name, func(t *testing.T) { providertest.RunWith(t, factory, options[name]) })
	}
	for name := range factories {
		if !slices.Contains(names, name) {
			t.Errorf("conformance factory for %q, which is not registered (import its package in builtin.go)", name)
		}
	}
}

// TestRegistry checks that every built-in provider keeps its contract and
// that the registry lists every provider as the design has it.
func TestRegistry(t *testing.T) {
	if err := providers.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, e := range providers.List() {
		switch e.Status {
		case providers.StatusAvailable:
			if e.Info.Source != providers.SourceBuiltIn || e.Info.Summary == "" {
				t.Errorf("built-in provider %q: Source %q, Summary %q; want %q and a summary", e.Info.Name, e.Info.Source, e.Info.Summary, providers.SourceBuiltIn)
			}
		case providers.StatusPlanned:
			if e.Info.Summary == "" {
				t.Errorf("planned provider %q has no summary", e.Info.Name)
			}
		default:
			t.Errorf("provider %q is %s: %v", e.Info.Name, e.Status, e.Err)
		}
	}
}

// TestRegistryAgreesWithTheLanguage: the providers a pool may name
// (providers.Schemas, what the configuration language is given) are the
// registered ones, each with the schema it registered, plus "external",
// which is no provider (apply launches nothing for it).
func TestRegistryAgreesWithTheLanguage(t *testing.T) {
	schemas := providers.Schemas()
	if _, ok := schemas[providers.External]; !ok {
		t.Errorf("Schemas lacks %q", providers.External)
	}
	if _, err := providers.Lookup(providers.External); err == nil {
		t.Errorf("%q is registered as a provider; it is the language's name for pools apply launches nothing for", providers.External)
	}
	names := providers.Names()
	if len(schemas) != len(names)+1 {
		t.Errorf("Schemas names %d providers, want the %d registered and external", len(schemas), len(names))
	}
	for _, name := range names {
		info, _ := providers.Describe(name)
		s, ok := schemas[name]
		switch {
		case !ok:
			t.Errorf("the registry has %q, but pools cannot name it (providers.Schemas)", name)
		case info.Schema == nil || s.Decode == nil || s.LaunchTimeout <= 0:
			t.Errorf("built-in provider %q: schema %+v, want its own, with a launch_timeout and a Decode", name, info.Schema)
		case info.Capabilities.ClusterWrites && info.Creates == "":
			t.Errorf("built-in provider %q writes to a cluster, but its Info does not say what it creates", name)
		}
	}
}

// TestTheLanguageWithEveryProvider loads a configuration with the real
// providers: their names in an unknown provider's error, their defaults,
// the block each requires and its settings.
func TestTheLanguageWithEveryProvider(t *testing.T) {
	dir := t.TempDir()
	src := `pool "a" {
  provider = "docker"
}

pool "b" {
  provider = "ray"
}

pool "c" {
  provider = "kubernetes"
}

pool "d" {
  provider = "local"
  local {
    env = { A = "1" }
  }
}

pool "e" {
  provider = "external"
}

pool "f" {
  provider = "ray"
  ray {
    address  = "http://127.0.0.1:8265"
    wdc_path = "/wdc"
  }
}

pool "g" {
  provider = "kubernetes"
  kubernetes {
    image = "registry.example/wdc:1"
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	var got []string
	for _, d := range diags {
		got = append(got, strconv.Itoa(d.Subject.Start.Line)+": "+d.Detail)
	}
	want := []string{
		`2: There is no provider named "docker". The available providers are: external, kubernetes, local, ray.`,
		`5: Pool "b" uses provider "ray", so it needs a ray { } block with at least address = "http://…:8265" (the Ray dashboard).`,
		`9: Pool "c" uses provider "kubernetes", so it needs a kubernetes { } block with at least image = "…" (an image holding the wdc binary).`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	timeouts := map[string]time.Duration{"b": 5 * time.Minute, "c": 5 * time.Minute, "d": time.Minute, "e": 10 * time.Minute}
	for _, p := range cfg.Pools {
		if want, ok := timeouts[p.Name]; ok && p.LaunchTimeout != want {
			t.Errorf("pool %s (%s): launch_timeout %s, want %s", p.Name, p.Provider, p.LaunchTimeout, want)
		}
		if want := providers.LaunchTimeout(p.Provider); p.Provider != "docker" && p.LaunchTimeout != want {
			t.Errorf("pool %s: launch_timeout %s, providers.LaunchTimeout %s", p.Name, p.LaunchTimeout, want)
		}
	}
	if _, ok := cfg.Pools[3].Settings.(*local.Settings); !ok {
		t.Errorf("pool d: settings %T, want *local.Settings", cfg.Pools[3].Settings)
	}
	if cfg.Pools[4].Settings != nil {
		t.Errorf("pool e: settings %T, want none", cfg.Pools[4].Settings)
	}
	if _, ok := cfg.Pools[5].Settings.(*ray.Settings); !ok {
		t.Errorf("pool f: settings %T, want *ray.Settings", cfg.Pools[5].Settings)
	}
	if _, ok := cfg.Pools[6].Settings.(*kubernetes.Settings); !ok {
		t.Errorf("pool g: settings %T, want *kubernetes.Settings", cfg.Pools[6].Settings)
	}
	if got := providers.LaunchTimeout("docker"); got != providers.DefaultLaunchTimeout {
		t.Errorf("LaunchTimeout of an unknown provider = %s", got)
	}
}
