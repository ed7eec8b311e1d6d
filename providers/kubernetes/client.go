package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are the typed API clients the provider uses, and no others
// (batch/v1 for Jobs, core/v1 for Secrets and Pods, coordination/v1 for
// Leases), with the cluster they talk to.
type Clients struct {
	Batch        batchv1client.BatchV1Interface
	Core         corev1client.CoreV1Interface
	Coordination coordinationv1client.CoordinationV1Interface
	// Namespace is the namespace of the kubeconfig context (or of the
	// pod's service account, in a cluster), "default" when it names none;
	// a pool's namespace attribute overrides it.
	Namespace string
	// Server is the API server's URL, for messages.
	Server string
	// NoWatchList is set for clients that cannot serve watch-list streams
	// (client-go's fake clientset): informers then list and watch.
	NoWatchList bool
}

// IsWatchListSemanticsUnSupported tells client-go's reflector whether the
// clients can serve watch-list streams (util/watchlist).
func (c *Clients) IsWatchListSemanticsUnSupported() bool { return c.NoWatchList }

// Connector makes the Clients for a pool's kubernetes block. Connect is
// the real one; tests pass one returning a fake clientset's clients.
type Connector func(s *Settings) (*Clients, error)

// Connect makes the clients for the block's kubeconfig and context the way
// kubectl picks them: the block's kubeconfig, else KUBECONFIG, else
// ~/.kube/config, else the in-cluster service account; the block's
// context, else the current one. It only reads files: nothing is sent to
// the cluster. Errors: no usable configuration, an unknown context.
func Connect(s *Settings) (*Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if s.Kubeconfig != "" {
		rules.ExplicitPath = s.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: s.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) || errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %v", errNoConfiguration, err)
		}
		return nil, fmt.Errorf("kubernetes: loading the client configuration%s: %w", where(s), err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wdc"
	cfg.QPS, cfg.Burst = 50, 100
	// Requests carry their own deadlines; a watch or a log stream lasts
	// as long as the worker.
	cfg.Timeout = 0
	batch, err := batchv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	coord, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	return &Clients{Batch: batch, Core: core, Coordination: coord, Namespace: ns, Server: cfg.Host}, nil
}

// where names the kubeconfig and context of a block, for messages.
func where(s *Settings) string {
	out := ""
	if s.Kubeconfig != "" {
		out += " from " + s.Kubeconfig
	}
	if s.Context != "" {
		out += " (context " + s.Context + ")"
	}
	return out
}

// errNoConfiguration means there is no client configuration at all (no
// kubeconfig, not in a cluster): a plan without cluster credentials, whose
// cluster check is skipped with a warning. A configuration that names a
// context or file that is not right is another error.
var errNoConfiguration = errors.New("no Kubernetes client configuration")

// requestTimeout bounds one API call (a create, a get, a delete).
const requestTimeout = 30 * time.Second
