package builtin

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	req.Settings = &wdchcl.RayPool{Address: address, TokenFile: os.Getenv(rayTokenFileEnv), WdcPath: req.Executable,
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
	req.Settings = &wdchcl.KubernetesPool{Kubeconfig: kubeconfig, Namespace: "default", Image: image, ImagePullPolicy: "Never",
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
// (hcl.Providers) are the registered ones plus "external", which is no
// provider (apply launches nothing for it), and the ones the language
// knows but refuses are the registry's planned ones.
func TestRegistryAgreesWithTheLanguage(t *testing.T) {
	status := map[string]providers.Status{}
	for _, e := range providers.List() {
		status[e.Info.Name] = e.Status
	}
	if _, ok := status[wdchcl.ProviderExternal]; ok {
		t.Errorf("%q is registered as a provider; it is the language's name for pools apply launches nothing for", wdchcl.ProviderExternal)
	}
	for name, available := range wdchcl.Providers {
		switch {
		case name == wdchcl.ProviderExternal:
		case available && status[name] != providers.StatusAvailable:
			t.Errorf("pools may name %q (hcl.Providers), but the registry has it %q", name, status[name])
		case !available && status[name] != providers.StatusPlanned:
			t.Errorf("the language refuses %q as not built (hcl.Providers), but the registry has it %q", name, status[name])
		}
	}
	for name, st := range status {
		if _, ok := wdchcl.Providers[name]; !ok {
			t.Errorf("the registry has %q (%s), but the configuration language does not know it (hcl.Providers)", name, st)
		}
	}
}
