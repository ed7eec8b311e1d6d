package hcl

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// KubernetesPool is a pool's kubernetes { } block: where and how its
// workers run as batch/v1 Jobs. Every field was checked with its range, and
// Kubernetes names, label keys and values with apimachinery's validation,
// before anything is sent.
type KubernetesPool struct {
	// Kubeconfig and Context select the cluster; "" means what kubectl
	// would use (KUBECONFIG, then ~/.kube/config, then in-cluster) and its
	// current context.
	Kubeconfig, Context string
	// Namespace is where the Jobs, Secrets and Leases go; "" means the
	// context's namespace, else "default".
	Namespace string
	// Image holds the wdc binary (the container runs `wdc agent …`);
	// ImagePullPolicy is Always, IfNotPresent or Never ("" leaves the
	// cluster's default).
	Image, ImagePullPolicy string
	// Command is the wdc binary's path in the image (default "wdc", looked
	// up in the image's PATH).
	Command string
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
	// 24h). TTLAfterFinished is how long a finished Job is kept
	// (ttlSecondsAfterFinished, default 10m).
	ActiveDeadline, TTLAfterFinished time.Duration
	// AllowWrites must be true for apply to create anything in the
	// cluster (default false: apply refuses, naming the pool).
	AllowWrites bool
	// Range is the block's range (for diagnostics about the cluster).
	Range hcl.Range
}

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
	DefaultKubernetesActiveDeadline   = 24 * time.Hour
	DefaultKubernetesTTLAfterFinished = 10 * time.Minute
)

type kubernetesBody struct {
	Kubeconfig       *hcl.Attribute  `hcl:"kubeconfig,optional"`
	Context          *hcl.Attribute  `hcl:"context,optional"`
	Namespace        *hcl.Attribute  `hcl:"namespace,optional"`
	Image            *hcl.Attribute  `hcl:"image"`
	ImagePullPolicy  *hcl.Attribute  `hcl:"image_pull_policy,optional"`
	Command          *hcl.Attribute  `hcl:"command,optional"`
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

// kubernetes decodes and checks a pool's kubernetes block.
func (l *loader) kubernetes(p *Pool, pb *hcl.Block, sc scope) {
	var body kubernetesBody
	d := gohcl.DecodeBody(pb.Body, nil, &body)
	l.add(d...)
	if d.HasErrors() {
		return
	}
	k := &KubernetesPool{ActiveDeadline: DefaultKubernetesActiveDeadline, TTLAfterFinished: DefaultKubernetesTTLAfterFinished, Range: pb.DefRange}
	k.Kubeconfig, k.Context = l.str(body.Kubeconfig, sc), l.str(body.Context, sc)
	if k.Kubeconfig != "" {
		k.Kubeconfig = resolvePath(l.cfg.Dir, k.Kubeconfig)
	}
	if k.Namespace = l.str(body.Namespace, sc); k.Namespace != "" {
		l.checkNames(body.Namespace, "namespace", k.Namespace, validation.IsDNS1123Label)
	}
	k.Image = l.str(body.Image, sc)
	if body.Image == nil {
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
			Detail:  fmt.Sprintf("The argument \"image\" is required: pool %q's kubernetes block must name the container image that holds the wdc binary.", p.Name),
			Subject: pb.Body.MissingItemRange().Ptr()})
	} else if strings.TrimSpace(k.Image) == "" {
		l.add(attrErr(body.Image, "Missing image", fmt.Sprintf("Pool %q: image must name the container image that holds the wdc binary, e.g. \"registry.example.com/wdc:1.0\".", p.Name)))
	} else if strings.ContainsAny(k.Image, " \t\n") {
		l.add(attrErr(body.Image, "Invalid image", fmt.Sprintf("Pool %q: image %q contains white space.", p.Name, k.Image)))
	}
	switch k.ImagePullPolicy = l.str(body.ImagePullPolicy, sc); k.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		l.add(attrErr(body.ImagePullPolicy, "Invalid image_pull_policy",
			fmt.Sprintf("image_pull_policy must be \"Always\", \"IfNotPresent\" or \"Never\", not %q.", k.ImagePullPolicy)))
	}
	if k.Command = l.str(body.Command, sc); body.Command != nil && k.Command == "" {
		l.add(attrErr(body.Command, "Empty command", "command is the wdc binary's path in the image, e.g. \"/wdc\"; leave it out for \"wdc\" in the image's PATH."))
	}
	if k.ServiceAccount = l.str(body.ServiceAccount, sc); k.ServiceAccount != "" {
		l.checkNames(body.ServiceAccount, "service_account", k.ServiceAccount, validation.IsDNS1123Subdomain)
	}
	var md hcl.Diagnostics
	k.NodeSelector, md = l.ev.stringMap(body.NodeSelector, sc)
	l.add(md...)
	l.checkLabels(body.NodeSelector, "node_selector", k.NodeSelector)
	k.Labels, md = l.ev.stringMap(body.Labels, sc)
	l.add(md...)
	l.checkLabels(body.Labels, "labels", k.Labels)
	for key := range k.Labels {
		if strings.HasPrefix(key, "app.kubernetes.io/managed-by") || strings.HasPrefix(key, "wdc.dev/") {
			l.add(attrErr(body.Labels, "Reserved label", fmt.Sprintf("Label %q is set by wdc itself, to find what it created; choose another key.", key)))
		}
	}
	k.Annotations, md = l.ev.stringMap(body.Annotations, sc)
	l.add(md...)
	for _, key := range sortedKeys(k.Annotations) {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			l.add(attrErr(body.Annotations, "Invalid annotation key", fmt.Sprintf("Annotation key %q: %s.", key, strings.Join(errs, "; "))))
		}
	}
	k.HostNetwork, md = l.ev.boolean(body.HostNetwork, sc, false)
	l.add(md...)
	k.AllowWrites, md = l.ev.boolean(body.AllowWrites, sc, false)
	l.add(md...)
	var ok bool
	k.ActiveDeadline, ok, md = l.ev.duration(body.ActiveDeadline, sc, DefaultKubernetesActiveDeadline)
	l.add(md...)
	if ok && body.ActiveDeadline != nil && (k.ActiveDeadline < time.Second || k.ActiveDeadline%time.Second != 0) {
		l.add(attrErr(body.ActiveDeadline, "Invalid active_deadline", fmt.Sprintf("active_deadline is a whole number of seconds, at least 1s; got %s.", k.ActiveDeadline)))
	}
	k.TTLAfterFinished, ok, md = l.ev.durationZeroOK(body.TTLAfterFinished, sc, DefaultKubernetesTTLAfterFinished)
	l.add(md...)
	if ok && (k.TTLAfterFinished%time.Second != 0 || k.TTLAfterFinished > time.Duration(math.MaxInt32)*time.Second) {
		l.add(attrErr(body.TTLAfterFinished, "Invalid ttl_after_finished", fmt.Sprintf("ttl_after_finished is a whole number of seconds (\"0s\": delete at once); got %s.", k.TTLAfterFinished)))
	}
	req, reqSet := l.resources(body.Requests, "requests", sc)
	lim, limSet := l.resources(body.Limits, "limits", sc)
	switch {
	case reqSet && !limSet:
		lim = req
	case limSet && !reqSet:
		req = lim
	}
	k.Requests, k.Limits = req, lim
	if reqSet && limSet {
		for _, c := range []struct{ name, r, l string }{{"cpu", req.CPU, lim.CPU}, {"memory", req.Memory, lim.Memory}} {
			rq, e1 := resource.ParseQuantity(c.r)
			lq, e2 := resource.ParseQuantity(c.l)
			if c.r != "" && c.l != "" && e1 == nil && e2 == nil && rq.Cmp(lq) > 0 {
				l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Request above its limit",
					Detail:  fmt.Sprintf("Pool %q requests %s %s but limits it to %s; a request must not exceed its limit.", p.Name, c.r, c.name, c.l),
					Subject: body.Requests.Body.MissingItemRange().Ptr()})
			}
		}
	}
	for _, tb := range body.Tolerations {
		k.Tolerations = append(k.Tolerations, l.toleration(tb, sc))
	}
	p.Kubernetes = k
}

// resources decodes a requests or limits block.
func (l *loader) resources(b *resourcesBody, name string, sc scope) (Resources, bool) {
	if b == nil {
		return Resources{}, false
	}
	var r Resources
	for _, f := range []struct {
		attr *hcl.Attribute
		dst  *string
		what string
	}{{b.CPU, &r.CPU, "cpu"}, {b.Memory, &r.Memory, "memory"}} {
		s, set, d := l.ev.str(f.attr, sc)
		l.add(d...)
		if !set {
			continue
		}
		q, err := resource.ParseQuantity(s)
		switch {
		case err != nil:
			l.add(attrErr(f.attr, "Invalid quantity", fmt.Sprintf("%s.%s %q is not a Kubernetes quantity (e.g. \"500m\" or \"2\" for cpu, \"256Mi\" or \"1Gi\" for memory).", name, f.what, s)))
		case q.Sign() <= 0:
			l.add(attrErr(f.attr, "Invalid quantity", fmt.Sprintf("%s.%s must be more than zero; got %q.", name, f.what, s)))
		default:
			*f.dst = s
		}
	}
	return r, true
}

// toleration decodes a toleration block.
func (l *loader) toleration(b toleratedBody, sc scope) Toleration {
	t := Toleration{Key: l.str(b.Key, sc), Operator: l.str(b.Operator, sc), Value: l.str(b.Value, sc), Effect: l.str(b.Effect, sc)}
	rng := b.Body.MissingItemRange()
	bad := func(attr *hcl.Attribute, summary, detail string) {
		if attr != nil {
			l.add(attrErr(attr, summary, detail))
			return
		}
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()})
	}
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			bad(b.Key, "Missing toleration key", "A toleration with operator \"Equal\" (the default) needs a key; use operator = \"Exists\" without a key to tolerate every taint.")
		}
	case "Exists":
		if t.Value != "" {
			bad(b.Value, "Value with operator Exists", "A toleration with operator \"Exists\" must not have a value.")
		}
	default:
		bad(b.Operator, "Invalid toleration operator", fmt.Sprintf("operator must be \"Equal\" or \"Exists\", not %q.", t.Operator))
	}
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			bad(b.Key, "Invalid toleration key", fmt.Sprintf("Key %q: %s.", t.Key, strings.Join(errs, "; ")))
		}
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			bad(b.Value, "Invalid toleration value", fmt.Sprintf("Value %q: %s.", t.Value, strings.Join(errs, "; ")))
		}
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		bad(b.Effect, "Invalid toleration effect", fmt.Sprintf("effect must be \"NoSchedule\", \"PreferNoSchedule\" or \"NoExecute\" (or left out for all), not %q.", t.Effect))
	}
	if b.Seconds != nil {
		n, null, ok, d := l.ev.intValue(b.Seconds, sc, 0, math.MaxInt32)
		l.add(d...)
		if ok && !null {
			if t.Effect != "NoExecute" {
				bad(b.Seconds, "toleration_seconds without NoExecute", "toleration_seconds only applies to effect = \"NoExecute\".")
			}
			s := int64(n)
			t.Seconds = &s
		}
	}
	return t
}

// str evaluates an optional string attribute (nil → ""), reporting its
// diagnostics.
func (l *loader) str(attr *hcl.Attribute, sc scope) string {
	s, _, d := l.ev.str(attr, sc)
	l.add(d...)
	return s
}

// checkNames reports value (of attr, named what) when check refuses it.
func (l *loader) checkNames(attr *hcl.Attribute, what, value string, check func(string) []string) {
	if errs := check(value); len(errs) > 0 {
		l.add(attrErr(attr, "Invalid "+what, fmt.Sprintf("%s %q is not a valid Kubernetes name: %s.", what, value, strings.Join(errs, "; "))))
	}
}

// checkLabels reports the keys and values of a label map (attr named
// what) that Kubernetes would refuse.
func (l *loader) checkLabels(attr *hcl.Attribute, what string, m map[string]string) {
	for _, key := range sortedKeys(m) {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			l.add(attrErr(attr, "Invalid label key", fmt.Sprintf("%s key %q: %s.", what, key, strings.Join(errs, "; "))))
		}
		if errs := validation.IsValidLabelValue(m[key]); len(errs) > 0 {
			l.add(attrErr(attr, "Invalid label value", fmt.Sprintf("%s value %q of %q: %s.", what, m[key], key, strings.Join(errs, "; "))))
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// resolvePath makes a path of the configuration absolute: "~/" is the
// user's home folder, a relative path is joined to dir.
func resolvePath(dir, p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}
