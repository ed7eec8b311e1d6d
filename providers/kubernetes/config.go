package kubernetes

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// Schema is the Kubernetes provider's configuration: a pool must have a
// kubernetes { } block (kubernetesBody), which decodes to *Settings; a
// launched worker has 5 minutes to register (a pod takes a while to be
// scheduled and to pull its image).
var Schema = wdchcl.ProviderSchema{LaunchTimeout: 5 * time.Minute, Decode: decodeBlock}

// Settings are a pool's kubernetes { } block: where and how its workers
// run as batch/v1 Jobs. Every field was checked with its range, and
// Kubernetes names, label keys and values with apimachinery's validation,
// before anything is sent.
type Settings struct {
	// Kubeconfig and Context select the cluster; "" means what kubectl
	// would use (KUBECONFIG, then ~/.kube/config, then in-cluster) and its
	// current context.
	Kubeconfig, Context string
	// Namespace is where the Jobs, Secrets and Leases go; "" means the
	// context's namespace, else "default".
	Namespace string
	// Image holds the wdc or wdc-agent binary (the container runs
	// `agent …` as the arguments of its entrypoint, or of Command);
	// ImagePullPolicy is Always, IfNotPresent or Never ("" leaves the
	// cluster's default).
	Image, ImagePullPolicy string
	// Command is the agent binary's path in the image; "" runs the
	// image's own ENTRYPOINT with the agent's arguments, as Kubernetes
	// does for a container without a command.
	Command string
	// AgentImage, when set, is an image whose entrypoint is wdc-agent (or
	// wdc): an init container runs it with `install-agent`, which copies
	// the binary into an emptyDir the agent container mounts, and the
	// agent container runs Image (the tasks' own image, which holds no
	// agent) with that copy as its command. It excludes Command.
	AgentImage string
	// ServiceAccount runs the pods ("" is the namespace's default).
	ServiceAccount string
	// Requests and Limits are Kubernetes quantities ("500m", "256Mi");
	// when only one block is given the other equals it.
	Requests, Limits Resources
	// NodeSelector, Labels and Annotations are copied onto the pods
	// (Labels and Annotations onto every object wdc creates too).
	NodeSelector, Labels, Annotations map[string]string
	Tolerations                       []Toleration
	// HostNetwork runs the pods in the node's network namespace.
	HostNetwork bool
	// ActiveDeadline bounds a Job's run (activeDeadlineSeconds): a safety
	// net if the apply dies and the agent cannot exit by itself (default
	// DefaultActiveDeadline). TTLAfterFinished is how long a finished Job
	// is kept (ttlSecondsAfterFinished, default DefaultTTLAfterFinished).
	ActiveDeadline, TTLAfterFinished time.Duration
	// AllowWrites must be true for apply to create anything in the
	// cluster (default false: apply refuses, naming the pool).
	AllowWrites bool
	// Range is the block's range (for diagnostics about the cluster).
	Range hcl.Range
}

var _ wdchcl.ProviderSettings = (*Settings)(nil)

// WritesAllowed reports allow_writes.
func (s *Settings) WritesAllowed() bool { return s.AllowWrites }

// BlockRange is the kubernetes block's range.
func (s *Settings) BlockRange() hcl.Range { return s.Range }

// Resources are a container's CPU and memory, as Kubernetes quantities;
// "" leaves one out.
type Resources struct {
	CPU, Memory string
}

// Toleration is a toleration { } block of a kubernetes block.
type Toleration struct {
	Key, Operator, Value, Effect string
	// Seconds is tolerationSeconds, or nil when not set.
	Seconds *int64
}

// Defaults of the kubernetes block.
const (
	DefaultActiveDeadline   = 24 * time.Hour
	DefaultTTLAfterFinished = 10 * time.Minute
)

// settings returns the kubernetes block a request carries.
func settings(v wdchcl.ProviderSettings) (*Settings, error) {
	s, ok := v.(*Settings)
	if !ok || s == nil {
		return nil, fmt.Errorf("kubernetes: the launch request has no kubernetes block (Settings is %T)", v)
	}
	return s, nil
}

// kubernetesBody is the kubernetes block's schema.
type kubernetesBody struct {
	Kubeconfig       *hcl.Attribute  `hcl:"kubeconfig,optional"`
	Context          *hcl.Attribute  `hcl:"context,optional"`
	Namespace        *hcl.Attribute  `hcl:"namespace,optional"`
	Image            *hcl.Attribute  `hcl:"image"`
	ImagePullPolicy  *hcl.Attribute  `hcl:"image_pull_policy,optional"`
	Command          *hcl.Attribute  `hcl:"command,optional"`
	AgentImage       *hcl.Attribute  `hcl:"agent_image,optional"`
	ServiceAccount   *hcl.Attribute  `hcl:"service_account,optional"`
	NodeSelector     *hcl.Attribute  `hcl:"node_selector,optional"`
	Labels           *hcl.Attribute  `hcl:"labels,optional"`
	Annotations      *hcl.Attribute  `hcl:"annotations,optional"`
	HostNetwork      *hcl.Attribute  `hcl:"host_network,optional"`
	ActiveDeadline   *hcl.Attribute  `hcl:"active_deadline,optional"`
	TTLAfterFinished *hcl.Attribute  `hcl:"ttl_after_finished,optional"`
	AllowWrites      *hcl.Attribute  `hcl:"allow_writes,optional"`
	Requests         *resourcesBody  `hcl:"requests,block"`
	Limits           *resourcesBody  `hcl:"limits,block"`
	Tolerations      []toleratedBody `hcl:"toleration,block"`
}

type resourcesBody struct {
	CPU    *hcl.Attribute `hcl:"cpu,optional"`
	Memory *hcl.Attribute `hcl:"memory,optional"`
	Body   hcl.Body       `hcl:",body"`
}

type toleratedBody struct {
	Key      *hcl.Attribute `hcl:"key,optional"`
	Operator *hcl.Attribute `hcl:"operator,optional"`
	Value    *hcl.Attribute `hcl:"value,optional"`
	Effect   *hcl.Attribute `hcl:"effect,optional"`
	Seconds  *hcl.Attribute `hcl:"toleration_seconds,optional"`
	Body     hcl.Body       `hcl:",body"`
}

// decodeBlock decodes and checks a pool's kubernetes block, which a pool of
// the provider must have.
func decodeBlock(b *wdchcl.ProviderBlock) wdchcl.ProviderSettings {
	if b.Body == nil {
		b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing kubernetes block",
			Detail:  fmt.Sprintf("Pool %q uses provider \"kubernetes\", so it needs a kubernetes { } block with at least image = \"…\" (an image holding the wdc binary).", b.Pool),
			Subject: b.DefRange.Ptr()})
		return nil
	}
	var body kubernetesBody
	if !b.DecodeBody(&body) {
		return nil
	}
	s := &Settings{ActiveDeadline: DefaultActiveDeadline, TTLAfterFinished: DefaultTTLAfterFinished, Range: b.DefRange}
	s.Kubeconfig, s.Context = b.String(body.Kubeconfig), b.String(body.Context)
	if s.Kubeconfig != "" {
		s.Kubeconfig = b.Path(s.Kubeconfig)
	}
	if s.Namespace = b.String(body.Namespace); s.Namespace != "" {
		checkName(b, body.Namespace, "namespace", s.Namespace, validation.IsDNS1123Label)
	}
	decodeContainer(b, &body, s)
	if s.ServiceAccount = b.String(body.ServiceAccount); s.ServiceAccount != "" {
		checkName(b, body.ServiceAccount, "service_account", s.ServiceAccount, validation.IsDNS1123Subdomain)
	}
	decodeMetadata(b, &body, s)
	s.HostNetwork = b.Bool(body.HostNetwork, false)
	s.AllowWrites = b.Bool(body.AllowWrites, false)
	decodeJobTimes(b, &body, s)
	decodeResources(b, &body, s)
	for _, tb := range body.Tolerations {
		s.Tolerations = append(s.Tolerations, toleration(b, tb))
	}
	return s
}

// decodeContainer decodes the image, its pull policy and the command.
func decodeContainer(b *wdchcl.ProviderBlock, body *kubernetesBody, s *Settings) {
	before := len(b.Diagnostics())
	s.Image = b.String(body.Image)
	if body.Image == nil {
		b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
			Detail:  fmt.Sprintf("The argument \"image\" is required: pool %q's kubernetes block must name the container image its tasks run in (holding the agent, or with agent_image beside it).", b.Pool),
			Subject: b.Body.MissingItemRange().Ptr()})
	} else if len(b.Diagnostics()) > before {
		// Its value was refused already (image = 5).
	} else if strings.TrimSpace(s.Image) == "" {
		b.Report(wdchcl.AttrError(body.Image, "Missing image", fmt.Sprintf("Pool %q: image must name the container image its tasks run in, e.g. \"registry.example.com/wdc:1.0\" (holding the agent) or \"python:3.12\" with agent_image.", b.Pool)))
	} else if strings.ContainsAny(s.Image, " \t\n") {
		b.Report(wdchcl.AttrError(body.Image, "Invalid image", fmt.Sprintf("Pool %q: image %q contains white space.", b.Pool, s.Image)))
	}
	switch s.ImagePullPolicy = b.String(body.ImagePullPolicy); s.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		b.Report(wdchcl.AttrError(body.ImagePullPolicy, "Invalid image_pull_policy",
			fmt.Sprintf("image_pull_policy must be \"Always\", \"IfNotPresent\" or \"Never\", not %q.", s.ImagePullPolicy)))
	}
	if s.Command = b.String(body.Command); body.Command != nil && s.Command == "" {
		b.Report(wdchcl.AttrError(body.Command, "Empty command", "command is the agent binary's path in the image, e.g. \"/wdc\"; leave it out to run the image's own entrypoint with the agent's arguments."))
	}
	if body.AgentImage == nil {
		return
	}
	before = len(b.Diagnostics())
	s.AgentImage = b.String(body.AgentImage)
	switch {
	case len(b.Diagnostics()) > before:
	case strings.TrimSpace(s.AgentImage) == "":
		b.Report(wdchcl.AttrError(body.AgentImage, "Missing agent_image", fmt.Sprintf("Pool %q: agent_image must name an image whose entrypoint is wdc-agent or wdc (`make image` writes one), e.g. \"registry.example.com/wdc-agent:1.0\"; leave it out when image holds the agent.", b.Pool)))
	case strings.ContainsAny(s.AgentImage, " \t\n"):
		b.Report(wdchcl.AttrError(body.AgentImage, "Invalid agent_image", fmt.Sprintf("Pool %q: agent_image %q contains white space.", b.Pool, s.AgentImage)))
	case body.Command != nil:
		b.Report(wdchcl.AttrError(body.Command, "command with agent_image", fmt.Sprintf("Pool %q: with agent_image the pod runs the agent that image brings, not a command of image; remove command, or remove agent_image to run command from image.", b.Pool)))
	}
}

// decodeMetadata decodes the node selector, the labels and the
// annotations.
func decodeMetadata(b *wdchcl.ProviderBlock, body *kubernetesBody, s *Settings) {
	s.NodeSelector = b.StringMap(body.NodeSelector)
	checkLabels(b, body.NodeSelector, "node_selector", s.NodeSelector)
	s.Labels = b.StringMap(body.Labels)
	checkLabels(b, body.Labels, "labels", s.Labels)
	for key := range s.Labels {
		if strings.HasPrefix(key, "app.kubernetes.io/managed-by") || strings.HasPrefix(key, "wdc.dev/") {
			b.Report(wdchcl.AttrError(body.Labels, "Reserved label", fmt.Sprintf("Label %q is set by wdc itself, to find what it created; choose another key.", key)))
		}
	}
	s.Annotations = b.StringMap(body.Annotations)
	for _, key := range slices.Sorted(maps.Keys(s.Annotations)) {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			b.Report(wdchcl.AttrError(body.Annotations, "Invalid annotation key", fmt.Sprintf("Annotation key %q: %s.", key, strings.Join(errs, "; "))))
		}
	}
}

// decodeJobTimes decodes active_deadline and ttl_after_finished: whole
// numbers of seconds, as the Job's fields are.
func decodeJobTimes(b *wdchcl.ProviderBlock, body *kubernetesBody, s *Settings) {
	var ok bool
	s.ActiveDeadline, ok = b.Duration(body.ActiveDeadline, DefaultActiveDeadline)
	if ok && body.ActiveDeadline != nil && (s.ActiveDeadline < time.Second || s.ActiveDeadline%time.Second != 0) {
		b.Report(wdchcl.AttrError(body.ActiveDeadline, "Invalid active_deadline", fmt.Sprintf("active_deadline is a whole number of seconds, at least 1s; got %s.", s.ActiveDeadline)))
	}
	s.TTLAfterFinished, ok = b.DurationZeroOK(body.TTLAfterFinished, DefaultTTLAfterFinished)
	if ok && (s.TTLAfterFinished%time.Second != 0 || s.TTLAfterFinished > time.Duration(math.MaxInt32)*time.Second) {
		b.Report(wdchcl.AttrError(body.TTLAfterFinished, "Invalid ttl_after_finished", fmt.Sprintf("ttl_after_finished is a whole number of seconds (\"0s\": delete at once); got %s.", s.TTLAfterFinished)))
	}
}

// decodeResources decodes the requests and limits blocks: when only one
// is given, the other equals it; a request must not exceed its limit.
func decodeResources(b *wdchcl.ProviderBlock, body *kubernetesBody, s *Settings) {
	req, reqSet := decodeQuantities(b, body.Requests, "requests")
	lim, limSet := decodeQuantities(b, body.Limits, "limits")
	switch {
	case reqSet && !limSet:
		lim = req
	case limSet && !reqSet:
		req = lim
	}
	s.Requests, s.Limits = req, lim
	if !reqSet || !limSet {
		return
	}
	for _, c := range []struct{ name, r, l string }{{"cpu", req.CPU, lim.CPU}, {"memory", req.Memory, lim.Memory}} {
		rq, e1 := resource.ParseQuantity(c.r)
		lq, e2 := resource.ParseQuantity(c.l)
		if c.r != "" && c.l != "" && e1 == nil && e2 == nil && rq.Cmp(lq) > 0 {
			b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Request above its limit",
				Detail:  fmt.Sprintf("Pool %q requests %s %s but limits it to %s; a request must not exceed its limit.", b.Pool, c.r, c.name, c.l),
				Subject: body.Requests.Body.MissingItemRange().Ptr()})
		}
	}
}

// decodeQuantities decodes a requests or limits block.
func decodeQuantities(b *wdchcl.ProviderBlock, rb *resourcesBody, name string) (Resources, bool) {
	if rb == nil {
		return Resources{}, false
	}
	var r Resources
	for _, f := range []struct {
		attr *hcl.Attribute
		dst  *string
		what string
	}{{rb.CPU, &r.CPU, "cpu"}, {rb.Memory, &r.Memory, "memory"}} {
		s, set := b.OptionalString(f.attr)
		if !set {
			continue
		}
		q, err := resource.ParseQuantity(s)
		switch {
		case err != nil:
			b.Report(wdchcl.AttrError(f.attr, "Invalid quantity", fmt.Sprintf("%s.%s %q is not a Kubernetes quantity (e.g. \"500m\" or \"2\" for cpu, \"256Mi\" or \"1Gi\" for memory).", name, f.what, s)))
		case q.Sign() <= 0:
			b.Report(wdchcl.AttrError(f.attr, "Invalid quantity", fmt.Sprintf("%s.%s must be more than zero; got %q.", name, f.what, s)))
		default:
			*f.dst = s
		}
	}
	return r, true
}

// toleration decodes a toleration block.
func toleration(b *wdchcl.ProviderBlock, tb toleratedBody) Toleration {
	t := Toleration{Key: b.String(tb.Key), Operator: b.String(tb.Operator), Value: b.String(tb.Value), Effect: b.String(tb.Effect)}
	rng := tb.Body.MissingItemRange()
	bad := func(attr *hcl.Attribute, summary, detail string) {
		if attr != nil {
			b.Report(wdchcl.AttrError(attr, summary, detail))
			return
		}
		b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()})
	}
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			bad(tb.Key, "Missing toleration key", "A toleration with operator \"Equal\" (the default) needs a key; use operator = \"Exists\" without a key to tolerate every taint.")
		}
	case "Exists":
		if t.Value != "" {
			bad(tb.Value, "Value with operator Exists", "A toleration with operator \"Exists\" must not have a value.")
		}
	default:
		bad(tb.Operator, "Invalid toleration operator", fmt.Sprintf("operator must be \"Equal\" or \"Exists\", not %q.", t.Operator))
	}
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			bad(tb.Key, "Invalid toleration key", fmt.Sprintf("Key %q: %s.", t.Key, strings.Join(errs, "; ")))
		}
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			bad(tb.Value, "Invalid toleration value", fmt.Sprintf("Value %q: %s.", t.Value, strings.Join(errs, "; ")))
		}
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		bad(tb.Effect, "Invalid toleration effect", fmt.Sprintf("effect must be \"NoSchedule\", \"PreferNoSchedule\" or \"NoExecute\" (or left out for all), not %q.", t.Effect))
	}
	if tb.Seconds != nil {
		n, null, ok := b.Int(tb.Seconds, 0, math.MaxInt32)
		if ok && !null {
			if t.Effect != "NoExecute" {
				bad(tb.Seconds, "toleration_seconds without NoExecute", "toleration_seconds only applies to effect = \"NoExecute\".")
			}
			sec := int64(n)
			t.Seconds = &sec
		}
	}
	return t
}

// checkName reports value (of attr, named what) when check refuses it.
func checkName(b *wdchcl.ProviderBlock, attr *hcl.Attribute, what, value string, check func(string) []string) {
	if errs := check(value); len(errs) > 0 {
		b.Report(wdchcl.AttrError(attr, "Invalid "+what, fmt.Sprintf("%s %q is not a valid Kubernetes name: %s.", what, value, strings.Join(errs, "; "))))
	}
}

// checkLabels reports the keys and values of a label map (attr named
// what) that Kubernetes would refuse.
func checkLabels(b *wdchcl.ProviderBlock, attr *hcl.Attribute, what string, m map[string]string) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			b.Report(wdchcl.AttrError(attr, "Invalid label key", fmt.Sprintf("%s key %q: %s.", what, key, strings.Join(errs, "; "))))
		}
		if errs := validation.IsValidLabelValue(m[key]); len(errs) > 0 {
			b.Report(wdchcl.AttrError(attr, "Invalid label value", fmt.Sprintf("%s value %q of %q: %s.", what, m[key], key, strings.Join(errs, "; "))))
		}
	}
}
