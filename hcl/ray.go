package hcl

import (
	"fmt"
	"math"
	"math/big"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"
)

// RayPool is a pool's ray { } block: which Ray cluster runs its workers
// as Ray jobs, and how. Every field was checked with its range before
// anything is sent.
type RayPool struct {
	// Address is the Ray dashboard's URL, where the Jobs REST API is
	// (http or https, e.g. "http://127.0.0.1:8265"), without a trailing
	// slash.
	Address string
	// TokenFile holds the token of Ray's token authentication, sent as
	// "Authorization: Bearer <token>" (absolute: resolved against the
	// configuration's folder). "" means the RAY_AUTH_TOKEN environment
	// variable of apply, or no token when it is unset. The file is read
	// when the provider first talks to Ray, not when the configuration
	// loads.
	TokenFile string
	// WdcPath is the wdc binary on the Ray nodes: an absolute path, or a
	// bare name looked up in the PATH of the node's job.
	WdcPath string
	// EntrypointNumCPUs and EntrypointNumGPUs are the CPUs and GPUs Ray
	// reserves for each worker's entrypoint (>= 0; 0, Ray's default,
	// reserves none). EntrypointMemory is the memory it reserves, in
	// bytes (>= 0). EntrypointResources are custom resources (each >= 0).
	EntrypointNumCPUs, EntrypointNumGPUs float64
	EntrypointMemory                     int64
	EntrypointResources                  map[string]float64
	// Env is extra environment for the agent (runtime_env.env_vars); it
	// must not set WDC_LAUNCH_CREDENTIAL. Never nil.
	Env map[string]string
	// Metadata is extra job metadata; keys starting with "wdc." are wdc's
	// own (it finds its jobs by them). Never nil.
	Metadata map[string]string
	// AllowWrites must be true for apply to submit jobs to the cluster
	// (default false: apply refuses, naming the pool).
	AllowWrites bool
	// Range is the block's range (for diagnostics about the cluster).
	Range hcl.Range
}

type rayBody struct {
	Address             *hcl.Attribute `hcl:"address,optional"`
	TokenFile           *hcl.Attribute `hcl:"token_file,optional"`
	WdcPath             *hcl.Attribute `hcl:"wdc_path,optional"`
	EntrypointNumCPUs   *hcl.Attribute `hcl:"entrypoint_num_cpus,optional"`
	EntrypointNumGPUs   *hcl.Attribute `hcl:"entrypoint_num_gpus,optional"`
	EntrypointMemory    *hcl.Attribute `hcl:"entrypoint_memory,optional"`
	EntrypointResources *hcl.Attribute `hcl:"entrypoint_resources,optional"`
	Env                 *hcl.Attribute `hcl:"env,optional"`
	Metadata            *hcl.Attribute `hcl:"metadata,optional"`
	AllowWrites         *hcl.Attribute `hcl:"allow_writes,optional"`
}

// rayEnvName is what an environment variable's name may be.
var rayEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// rayCredentialEnv is protocol.LaunchCredentialEnv (hcl imports no
// protocol): the variable the provider sets itself.
const rayCredentialEnv = "WDC_LAUNCH_CREDENTIAL"

// ray decodes and checks a pool's ray block.
func (l *loader) ray(p *Pool, pb *hcl.Block, sc scope) {
	var body rayBody
	d := gohcl.DecodeBody(pb.Body, nil, &body)
	l.add(d...)
	if d.HasErrors() {
		return
	}
	r := &RayPool{Range: pb.DefRange}
	missing := func(name, what string) {
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
			Detail:  fmt.Sprintf("The argument %q is required: pool %q's ray block must name %s.", name, p.Name, what),
			Subject: pb.Body.MissingItemRange().Ptr()})
	}
	r.Address = strings.TrimRight(l.str(body.Address, sc), "/")
	if body.Address == nil {
		missing("address", "the Ray dashboard's URL, e.g. \"http://127.0.0.1:8265\"")
	} else if msg := rayAddressProblem(r.Address); msg != "" {
		l.add(attrErr(body.Address, "Invalid address", fmt.Sprintf("Pool %q: %s", p.Name, msg)))
	}
	if r.TokenFile = l.str(body.TokenFile, sc); body.TokenFile != nil {
		if strings.TrimSpace(r.TokenFile) == "" {
			l.add(attrErr(body.TokenFile, "Empty token_file", "token_file names the file holding Ray's auth token; leave it out to use the RAY_AUTH_TOKEN environment variable."))
		} else {
			r.TokenFile = resolvePath(l.cfg.Dir, r.TokenFile)
		}
	}
	r.WdcPath = l.str(body.WdcPath, sc)
	switch {
	case body.WdcPath == nil:
		missing("wdc_path", "the wdc binary on the Ray nodes, e.g. \"/usr/local/bin/wdc\"")
	case strings.TrimSpace(r.WdcPath) == "":
		l.add(attrErr(body.WdcPath, "Missing wdc_path", fmt.Sprintf("Pool %q: wdc_path must name the wdc binary on the Ray nodes, e.g. \"/usr/local/bin/wdc\".", p.Name)))
	case strings.ContainsAny(r.WdcPath, "\x00\n\r"):
		l.add(attrErr(body.WdcPath, "Invalid wdc_path", fmt.Sprintf("Pool %q: wdc_path %q contains a NUL or a line break.", p.Name, r.WdcPath)))
	case strings.Contains(r.WdcPath, "/") && !path.IsAbs(r.WdcPath):
		l.add(attrErr(body.WdcPath, "Relative wdc_path", fmt.Sprintf("Pool %q: wdc_path %q is relative, and a Ray job's folder is not the configuration's: give an absolute path, or a bare name found in the nodes' PATH.", p.Name, r.WdcPath)))
	}
	r.EntrypointNumCPUs = l.rayNumber(body.EntrypointNumCPUs, sc)
	r.EntrypointNumGPUs = l.rayNumber(body.EntrypointNumGPUs, sc)
	r.EntrypointMemory = l.rayBytes(body.EntrypointMemory, sc)
	r.EntrypointResources = l.rayResources(body.EntrypointResources, sc)

	var md hcl.Diagnostics
	r.Env, md = l.ev.stringMap(body.Env, sc)
	l.add(md...)
	for _, k := range sortedKeys(r.Env) {
		switch {
		case !rayEnvName.MatchString(k):
			l.add(attrErr(body.Env, "Invalid environment variable name", fmt.Sprintf("env key %q is not a variable name: letters, digits and underscores, not starting with a digit.", k)))
		case k == rayCredentialEnv:
			l.add(attrErr(body.Env, "Reserved environment variable", fmt.Sprintf("env must not set %s: wdc sets it to the worker's one-time launch credential.", k)))
		}
	}
	r.Metadata, md = l.ev.stringMap(body.Metadata, sc)
	l.add(md...)
	for _, k := range sortedKeys(r.Metadata) {
		switch {
		case k == "":
			l.add(attrErr(body.Metadata, "Empty metadata key", "A metadata key must not be empty."))
		case strings.HasPrefix(k, "wdc."):
			l.add(attrErr(body.Metadata, "Reserved metadata key", fmt.Sprintf("Metadata key %q is set by wdc itself, to find the jobs it submitted; choose a key that does not start with \"wdc.\".", k)))
		}
	}
	r.AllowWrites, md = l.ev.boolean(body.AllowWrites, sc, false)
	l.add(md...)
	p.Ray = r
}

// rayAddressProblem says what is wrong with a ray block's address, or "".
func rayAddressProblem(a string) string {
	if a == "" {
		return "address must be the Ray dashboard's URL, e.g. \"http://127.0.0.1:8265\"."
	}
	u, err := url.Parse(a)
	switch {
	case err != nil:
		return fmt.Sprintf("address %q is not a URL: %v.", a, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("address %q must start with http:// or https:// (the dashboard's Jobs API, e.g. \"http://127.0.0.1:8265\"; not a ray:// client address).", a)
	case u.Host == "":
		return fmt.Sprintf("address %q names no host.", a)
	case u.User != nil:
		return fmt.Sprintf("address %q holds a user name or password: put Ray's token in token_file instead.", a)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("address %q must not have a query or a fragment.", a)
	}
	return ""
}

// rayNumber evaluates an optional number attribute that must be finite
// and >= 0; absent or null is 0.
func (l *loader) rayNumber(attr *hcl.Attribute, sc scope) float64 {
	if attr == nil {
		return 0
	}
	v, ok, d := l.ev.typed(attr, sc, cty.Number)
	l.add(d...)
	if !ok || v.IsNull() {
		return 0
	}
	f, _ := v.AsBigFloat().Float64()
	if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		l.add(attrErr(attr, "Value out of range", fmt.Sprintf("%q must be a number of at least 0; got %s.", attr.Name, v.AsBigFloat().Text('g', -1))))
		return 0
	}
	return f
}

// rayBytes evaluates an optional whole number of bytes >= 0 (up to
// 2^53, what a JSON number carries exactly); absent or null is 0.
func (l *loader) rayBytes(attr *hcl.Attribute, sc scope) int64 {
	if attr == nil {
		return 0
	}
	v, ok, d := l.ev.typed(attr, sc, cty.Number)
	l.add(d...)
	if !ok || v.IsNull() {
		return 0
	}
	bf := v.AsBigFloat()
	const maxBytes = 1 << 53
	if !bf.IsInt() {
		l.add(attrErr(attr, "Invalid number", fmt.Sprintf("%q is a whole number of bytes; got %s.", attr.Name, bf.Text('g', -1))))
		return 0
	}
	if bf.Sign() < 0 || bf.Cmp(big.NewFloat(maxBytes)) > 0 {
		l.add(attrErr(attr, "Value out of range", fmt.Sprintf("%q must be between 0 and %d bytes; got %s.", attr.Name, int64(maxBytes), bf.Text('f', 0))))
		return 0
	}
	n, _ := bf.Int64()
	return n
}

// rayResources evaluates entrypoint_resources: a map of custom resource
// names to amounts >= 0. Never nil.
func (l *loader) rayResources(attr *hcl.Attribute, sc scope) map[string]float64 {
	out := map[string]float64{}
	if attr == nil {
		return out
	}
	v, ok, d := l.ev.typed(attr, sc, cty.Map(cty.Number))
	l.add(d...)
	if !ok || v.IsNull() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		name := k.AsString()
		switch {
		case ev.IsNull():
			l.add(attrErr(attr, "Invalid attribute value", fmt.Sprintf("The amount of resource %q must not be null.", name)))
			continue
		case name == "":
			l.add(attrErr(attr, "Empty resource name", "A resource name must not be empty."))
			continue
		case name == "CPU" || name == "GPU" || name == "memory":
			l.add(attrErr(attr, "Built-in resource in entrypoint_resources", fmt.Sprintf("Resource %q has its own attribute: use entrypoint_num_cpus, entrypoint_num_gpus or entrypoint_memory.", name)))
			continue
		}
		f, _ := ev.AsBigFloat().Float64()
		if f < 0 || math.IsInf(f, 0) {
			l.add(attrErr(attr, "Value out of range", fmt.Sprintf("The amount of resource %q must be at least 0; got %s.", name, ev.AsBigFloat().Text('g', -1))))
			continue
		}
		out[name] = f
	}
	return out
}
