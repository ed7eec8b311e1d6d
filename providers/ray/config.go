package ray

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
)

// Schema is the Ray provider's configuration: a pool must have a ray { }
// block (rayBody), which decodes to *Settings; a launched worker has 5
// minutes to register (a Ray job waits for an entrypoint slot and starts
// its runtime environment).
var Schema = wdchcl.ProviderSchema{LaunchTimeout: 5 * time.Minute, Decode: decodeBlock}

// Settings are a pool's ray { } block: which Ray cluster runs its workers
// as Ray jobs, and how. Every field was checked with its range before
// anything is sent.
type Settings struct {
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
	// bare name looked up in the PATH of the node's job. "" means the
	// agent travels with the jobs: apply uploads it to the head as a Ray
	// package (Package), and each job's runtime_env.working_dir names it.
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

var _ wdchcl.ProviderSettings = (*Settings)(nil)

// WritesAllowed reports allow_writes.
func (s *Settings) WritesAllowed() bool { return s.AllowWrites }

// BlockRange is the ray block's range.
func (s *Settings) BlockRange() hcl.Range { return s.Range }

// settings returns the ray block a request carries.
func settings(v wdchcl.ProviderSettings) (*Settings, error) {
	s, ok := v.(*Settings)
	if !ok || s == nil {
		return nil, fmt.Errorf("ray: the launch request has no ray block (Settings is %T)", v)
	}
	return s, nil
}

// rayBody is the ray block's schema.
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

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeBlock decodes and checks a pool's ray block, which a pool of the
// provider must have.
func decodeBlock(b *wdchcl.ProviderBlock) wdchcl.ProviderSettings {
	if b.Body == nil {
		b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing ray block",
			Detail:  fmt.Sprintf("Pool %q uses provider \"ray\", so it needs a ray { } block with at least address = \"http://…:8265\" (the Ray dashboard).", b.Pool),
			Subject: b.DefRange.Ptr()})
		return nil
	}
	var body rayBody
	if !b.DecodeBody(&body) {
		return nil
	}
	s := &Settings{Range: b.DefRange}
	decodeHead(b, &body, s)
	decodeWdcPath(b, &body, s)
	s.EntrypointNumCPUs = number(b, body.EntrypointNumCPUs)
	s.EntrypointNumGPUs = number(b, body.EntrypointNumGPUs)
	s.EntrypointMemory = byteCount(b, body.EntrypointMemory)
	s.EntrypointResources = customResources(b, body.EntrypointResources)
	decodeEnv(b, &body, s)
	decodeMetadata(b, &body, s)
	s.AllowWrites = b.Bool(body.AllowWrites, false)
	return s
}

// missing reports a required attribute the block lacks.
func missing(b *wdchcl.ProviderBlock, name, what string) {
	b.Report(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
		Detail:  fmt.Sprintf("The argument %q is required: pool %q's ray block must name %s.", name, b.Pool, what),
		Subject: b.Body.MissingItemRange().Ptr()})
}

// decodeHead decodes the address of the Ray head and its token_file.
func decodeHead(b *wdchcl.ProviderBlock, body *rayBody, s *Settings) {
	before := len(b.Diagnostics())
	s.Address = strings.TrimRight(b.String(body.Address), "/")
	if body.Address == nil {
		missing(b, "address", "the Ray dashboard's URL, e.g. \"http://127.0.0.1:8265\"")
	} else if len(b.Diagnostics()) > before {
		// Its value was refused already (address = 8265).
	} else if msg := addressProblem(s.Address); msg != "" {
		b.Report(wdchcl.AttrError(body.Address, "Invalid address", fmt.Sprintf("Pool %q: %s", b.Pool, msg)))
	}
	if s.TokenFile = b.String(body.TokenFile); body.TokenFile != nil {
		if strings.TrimSpace(s.TokenFile) == "" {
			b.Report(wdchcl.AttrError(body.TokenFile, "Empty token_file", "token_file names the file holding Ray's auth token; leave it out to use the RAY_AUTH_TOKEN environment variable."))
		} else {
			s.TokenFile = b.Path(s.TokenFile)
		}
	}
}

// decodeWdcPath decodes wdc_path: absolute, or a bare name the nodes'
// PATH finds; left out, the agent is uploaded with the jobs.
func decodeWdcPath(b *wdchcl.ProviderBlock, body *rayBody, s *Settings) {
	before := len(b.Diagnostics())
	s.WdcPath = b.String(body.WdcPath)
	switch {
	case body.WdcPath == nil:
		// The agent travels with the jobs, as a Ray package.
	case len(b.Diagnostics()) > before:
		// Its value was refused already (wdc_path = 5).
	case strings.TrimSpace(s.WdcPath) == "":
		b.Report(wdchcl.AttrError(body.WdcPath, "Missing wdc_path", fmt.Sprintf("Pool %q: wdc_path must name the wdc binary on the Ray nodes, e.g. \"/usr/local/bin/wdc\"; leave it out to have apply upload the agent with the jobs.", b.Pool)))
	case strings.ContainsAny(s.WdcPath, "\x00\n\r"):
		b.Report(wdchcl.AttrError(body.WdcPath, "Invalid wdc_path", fmt.Sprintf("Pool %q: wdc_path %q contains a NUL or a line break.", b.Pool, s.WdcPath)))
	case strings.Contains(s.WdcPath, "/") && !path.IsAbs(s.WdcPath):
		b.Report(wdchcl.AttrError(body.WdcPath, "Relative wdc_path", fmt.Sprintf("Pool %q: wdc_path %q is relative, and a Ray job's folder is not the configuration's: give an absolute path, or a bare name found in the nodes' PATH.", b.Pool, s.WdcPath)))
	}
}

// decodeEnv decodes env: variable names, never the launch credential's.
func decodeEnv(b *wdchcl.ProviderBlock, body *rayBody, s *Settings) {
	s.Env = b.StringMap(body.Env)
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		switch {
		case !envName.MatchString(k):
			b.Report(wdchcl.AttrError(body.Env, "Invalid environment variable name", fmt.Sprintf("env key %q is not a variable name: letters, digits and underscores, not starting with a digit.", k)))
		case k == protocol.LaunchCredentialEnv:
			b.Report(wdchcl.AttrError(body.Env, "Reserved environment variable", fmt.Sprintf("env must not set %s: wdc sets it to the worker's one-time launch credential.", k)))
		}
	}
}

// decodeMetadata decodes metadata: none of wdc's own keys.
func decodeMetadata(b *wdchcl.ProviderBlock, body *rayBody, s *Settings) {
	s.Metadata = b.StringMap(body.Metadata)
	for _, k := range slices.Sorted(maps.Keys(s.Metadata)) {
		switch {
		case k == "":
			b.Report(wdchcl.AttrError(body.Metadata, "Empty metadata key", "A metadata key must not be empty."))
		case strings.HasPrefix(k, "wdc."):
			b.Report(wdchcl.AttrError(body.Metadata, "Reserved metadata key", fmt.Sprintf("Metadata key %q is set by wdc itself, to find the jobs it submitted; choose a key that does not start with \"wdc.\".", k)))
		}
	}
}

// addressProblem says what is wrong with a ray block's address, or "".
func addressProblem(a string) string {
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

// number evaluates an optional number attribute that must be finite and
// >= 0; absent or null is 0.
func number(b *wdchcl.ProviderBlock, attr *hcl.Attribute) float64 {
	if attr == nil {
		return 0
	}
	v, ok := b.Value(attr, cty.Number)
	if !ok || v.IsNull() {
		return 0
	}
	f, _ := v.AsBigFloat().Float64()
	if f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		b.Report(wdchcl.AttrError(attr, "Value out of range", fmt.Sprintf("%q must be a number of at least 0; got %s.", attr.Name, v.AsBigFloat().Text('g', -1))))
		return 0
	}
	return f
}

// byteCount evaluates an optional whole number of bytes >= 0 (up to
// 2^53, what a JSON number carries exactly); absent or null is 0.
func byteCount(b *wdchcl.ProviderBlock, attr *hcl.Attribute) int64 {
	if attr == nil {
		return 0
	}
	v, ok := b.Value(attr, cty.Number)
	if !ok || v.IsNull() {
		return 0
	}
	bf := v.AsBigFloat()
	const maxBytes = 1 << 53
	if !bf.IsInt() {
		b.Report(wdchcl.AttrError(attr, "Invalid number", fmt.Sprintf("%q is a whole number of bytes; got %s.", attr.Name, bf.Text('g', -1))))
		return 0
	}
	if bf.Sign() < 0 || bf.Cmp(big.NewFloat(maxBytes)) > 0 {
		b.Report(wdchcl.AttrError(attr, "Value out of range", fmt.Sprintf("%q must be between 0 and %d bytes; got %s.", attr.Name, int64(maxBytes), bf.Text('f', 0))))
		return 0
	}
	n, _ := bf.Int64()
	return n
}

// customResources evaluates entrypoint_resources: a map of custom
// resource names to amounts >= 0. Never nil.
func customResources(b *wdchcl.ProviderBlock, attr *hcl.Attribute) map[string]float64 {
	out := map[string]float64{}
	if attr == nil {
		return out
	}
	v, ok := b.Value(attr, cty.Map(cty.Number))
	if !ok || v.IsNull() {
		return out
	}
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		name := k.AsString()
		switch {
		case ev.IsNull():
			b.Report(wdchcl.AttrError(attr, "Invalid attribute value", fmt.Sprintf("The amount of resource %q must not be null.", name)))
			continue
		case name == "":
			b.Report(wdchcl.AttrError(attr, "Empty resource name", "A resource name must not be empty."))
			continue
		case name == "CPU" || name == "GPU" || name == "memory":
			b.Report(wdchcl.AttrError(attr, "Built-in resource in entrypoint_resources", fmt.Sprintf("Resource %q has its own attribute: use entrypoint_num_cpus, entrypoint_num_gpus or entrypoint_memory.", name)))
			continue
		}
		f, _ := ev.AsBigFloat().Float64()
		if f < 0 || math.IsInf(f, 0) {
			b.Report(wdchcl.AttrError(attr, "Value out of range", fmt.Sprintf("The amount of resource %q must be at least 0; got %s.", name, ev.AsBigFloat().Text('g', -1))))
			continue
		}
		out[name] = f
	}
	return out
}
