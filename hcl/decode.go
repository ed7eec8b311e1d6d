package hcl

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/wdc-dev/wdc/artifact"
)

// Defaults of the configuration language.
const (
	DefaultPoolMin           = 0
	DefaultPoolMax           = 1
	DefaultPoolCapacity      = 1
	DefaultDrainTimeout      = 60 * time.Second
	DefaultHeartbeatInterval = 2 * time.Second
	DefaultHeartbeatTTL      = 10 * time.Second
	DefaultTaskTimeout       = time.Hour
	DefaultLeaseGrace        = 2 * time.Minute
	DefaultMaxAttempts       = 1
	DefaultMaxLost           = 3
	DefaultBackoff           = 5 * time.Second
	DefaultMaxBackoff        = 5 * time.Minute
	// MaxCount is the largest count a task block may have.
	MaxCount = 10000
)

type wdcBody struct {
	State     *hcl.Attribute `hcl:"state,optional"`
	Listen    *hcl.Attribute `hcl:"listen,optional"`
	Advertise *hcl.Attribute `hcl:"advertise,optional"`
	Insecure  *hcl.Attribute `hcl:"insecure,optional"`
	TLS       *tlsBody       `hcl:"tls,block"`
	// MaxArtifactSize: the largest blob a worker may upload, e.g. "1GiB".
	MaxArtifactSize *hcl.Attribute `hcl:"max_artifact_size,optional"`
	Backends        []*backendBody `hcl:"backend,block"`
}

// backendBody is the wdc block's backend "TYPE" { } block. The
// credential attributes are decoded only to be refused with a message
// that says where credentials come from.
type backendBody struct {
	Type      string         `hcl:"type,label"`
	Bucket    *hcl.Attribute `hcl:"bucket,optional"`
	Key       *hcl.Attribute `hcl:"key,optional"`
	Endpoint  *hcl.Attribute `hcl:"endpoint,optional"`
	Region    *hcl.Attribute `hcl:"region,optional"`
	PathStyle *hcl.Attribute `hcl:"path_style,optional"`
	Profile   *hcl.Attribute `hcl:"profile,optional"`
	LockTTL   *hcl.Attribute `hcl:"lock_ttl,optional"`
	AccessKey *hcl.Attribute `hcl:"access_key,optional"`
	SecretKey *hcl.Attribute `hcl:"secret_key,optional"`
	Token     *hcl.Attribute `hcl:"token,optional"`
	Body      hcl.Body       `hcl:",body"`
}

// DefaultBackendLockTTL is the backend block's lock_ttl default: a
// lock whose holder stopped renewing it expires this long after its
// last renewal.
const DefaultBackendLockTTL = 60 * time.Second

// DefaultMaxArtifactSize is max_artifact_size's default, 1 GiB.
const DefaultMaxArtifactSize = 1 << 30

type tlsBody struct {
	CertFile *hcl.Attribute `hcl:"cert_file,optional"`
	KeyFile  *hcl.Attribute `hcl:"key_file,optional"`
	Body     hcl.Body       `hcl:",body"`
}

func (l *loader) settings(blocks hcl.Blocks) {
	l.cfg.Settings.MaxArtifactSize = DefaultMaxArtifactSize
	for i, b := range blocks {
		if i > 0 {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate wdc block",
				Detail:   fmt.Sprintf("A wdc block was already declared at %s; a configuration has at most one.", rangeStart(blocks[0].DefRange)),
				Subject:  b.DefRange.Ptr(),
			})
			continue
		}
		var body wdcBody
		diags := gohcl.DecodeBody(b.Body, nil, &body)
		l.add(suggestNames(diags, impliedSchema(&body, diags))...)
		if diags.HasErrors() {
			continue
		}
		l.cfg.Settings.State = l.setting(body.State)
		if body.Listen != nil {
			if addr := l.setting(body.Listen); addr != "" {
				if msg := CheckListen(addr); msg != "" {
					l.add(attrErr(body.Listen, "Invalid listen address", msg))
				} else {
					l.cfg.Settings.Listen = addr
				}
			}
		}
		if body.State != nil {
			l.cfg.Settings.StateRange = body.State.Range
		}
		if body.Listen != nil {
			l.cfg.Settings.ListenRange = body.Listen.Range
		}
		if body.Advertise != nil {
			l.cfg.Settings.AdvertiseRange = body.Advertise.Range
			if u := l.setting(body.Advertise); u != "" {
				if msg := CheckAdvertise(u); msg != "" {
					l.add(attrErr(body.Advertise, "Invalid advertise URL", msg))
				} else {
					l.cfg.Settings.Advertise = u
				}
			}
		}
		if body.MaxArtifactSize != nil {
			if v := l.setting(body.MaxArtifactSize); v != "" {
				n, err := artifact.ParseSize(v)
				if err != nil {
					l.add(attrErr(body.MaxArtifactSize, "Invalid size", strings.TrimPrefix(err.Error(), "artifact: ")))
				} else {
					l.cfg.Settings.MaxArtifactSize = n
				}
			}
		}
		var d hcl.Diagnostics
		l.cfg.Settings.Insecure, d = l.ev.boolean(body.Insecure, scope{}, false)
		l.add(d...)
		if body.Insecure != nil {
			l.cfg.Settings.InsecureRange = body.Insecure.Range
		}
		if sb, ok := b.Body.(*hclsyntax.Body); ok {
			for _, blk := range sb.Blocks {
				if blk.Type == "tls" {
					l.cfg.Settings.TLSRange = blk.DefRange()
				}
			}
		}
		if len(body.Backends) > 0 {
			l.backend(body.Backends, body.State)
		}
		if tb := body.TLS; tb != nil {
			for _, f := range []struct {
				name string
				attr *hcl.Attribute
			}{{"cert_file", tb.CertFile}, {"key_file", tb.KeyFile}} {
				if name := f.name; f.attr == nil {
					l.add(&hcl.Diagnostic{
						Severity: hcl.DiagError,
						Summary:  "Missing required argument",
						Detail:   fmt.Sprintf("The argument %q is required in the tls block: give both the certificate chain and its key (PEM files).", name),
						Subject:  tb.Body.MissingItemRange().Ptr(),
					})
				}
			}
			t := &TLSSettings{CertFile: l.path(tb.CertFile), KeyFile: l.path(tb.KeyFile)}
			if t.CertFile != "" && t.KeyFile != "" {
				l.cfg.Settings.TLS = t
			}
		}
	}
}

// backend decodes the wdc block's backend block (at most one; state and
// backend exclude each other) into Settings.Backend.
func (l *loader) backend(blocks []*backendBody, stateAttr *hcl.Attribute) {
	bb := blocks[0]
	rng := bb.Body.MissingItemRange()
	if sb, ok := bb.Body.(*hclsyntax.Body); ok {
		rng = sb.SrcRange
	}
	for _, dup := range blocks[1:] {
		r := dup.Body.MissingItemRange()
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate backend block",
			Detail: "The wdc block has at most one backend block: the state lives in one place.", Subject: &r})
	}
	if bb.Type != "s3" {
		l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown backend type",
			Detail:  fmt.Sprintf("Backend type %q is not one this wdc has; it has \"s3\" (any S3-compatible store). Without a backend block the state is the local file.", bb.Type),
			Subject: &rng})
		return
	}
	if stateAttr != nil {
		l.add(attrErr(stateAttr, "State file and backend both set",
			"The wdc block has a backend block, which keeps the state in the store; remove state (the local file) or the backend block."))
	}
	for _, a := range []*hcl.Attribute{bb.AccessKey, bb.SecretKey, bb.Token} {
		if a != nil {
			l.add(attrErr(a, "Credentials in the configuration",
				fmt.Sprintf("%s is never read from the configuration (it would end up in git): set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN in the environment, or name a profile of the shared credentials file with profile.", a.Name)))
		}
	}
	b := &BackendSettings{Type: bb.Type, Range: rng}
	for _, f := range []struct {
		attr *hcl.Attribute
		dst  *string
		need bool
	}{{bb.Bucket, &b.Bucket, true}, {bb.Key, &b.Key, true}, {bb.Endpoint, &b.Endpoint, false}, {bb.Region, &b.Region, false}, {bb.Profile, &b.Profile, false}} {
		if f.attr == nil {
			if f.need {
				l.add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
					Detail: "The backend \"s3\" block needs bucket and key: the bucket and the object key that hold the state.", Subject: &rng})
			}
			continue
		}
		*f.dst = l.setting(f.attr)
	}
	if bb.Endpoint != nil && b.Endpoint != "" {
		if u, err := url.Parse(b.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			l.add(attrErr(bb.Endpoint, "Invalid endpoint", fmt.Sprintf("endpoint %q must be a URL of the form https://HOST[:PORT] (http:// for a store on this machine).", b.Endpoint)))
		}
	}
	if bb.Key != nil && b.Key != "" && (strings.HasPrefix(b.Key, "/") || strings.HasSuffix(b.Key, "/")) {
		l.add(attrErr(bb.Key, "Invalid key", fmt.Sprintf("key %q must not start or end with /: it names one object, e.g. \"ci/wdc/state.db\".", b.Key)))
	}
	var d hcl.Diagnostics
	b.PathStyle, d = l.ev.boolean(bb.PathStyle, scope{}, false)
	l.add(d...)
	b.LockTTL, _, d = l.ev.duration(bb.LockTTL, scope{}, DefaultBackendLockTTL)
	l.add(d...)
	if bb.LockTTL != nil && b.LockTTL > 0 && b.LockTTL < time.Second {
		l.add(attrErr(bb.LockTTL, "Lock TTL too short", "lock_ttl must be at least 1s: the lock is renewed every sixth of it."))
	}
	l.cfg.Settings.Backend = b
}

// setting evaluates a string attribute of the wdc block; "" when absent,
// null or invalid. An empty string is an error: it would silently mean
// the default.
func (l *loader) setting(attr *hcl.Attribute) string {
	s, set, diags := l.ev.str(attr, scope{})
	l.add(diags...)
	if set && s == "" {
		l.add(attrErr(attr, fmt.Sprintf("Empty %s", attr.Name),
			fmt.Sprintf("%s must not be empty; remove the attribute to use the default.", attr.Name)))
	}
	return s
}

// path evaluates a required file path attribute, absolute against the
// configuration directory; "" when invalid (an error was added).
func (l *loader) path(attr *hcl.Attribute) string {
	p := l.setting(attr)
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.cfg.Dir, p)
	}
	return p
}

// CheckAdvertise validates an advertise URL: http or https, a host, an
// optional port, nothing else. It returns an error message, or "".
func CheckAdvertise(s string) string {
	const form = `; write "https://host" or "https://host:port", as in "https://coordinator.example:7070"`
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL%s.", s, form)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q must start with https:// (or http:// with insecure = true)%s.", s, form)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Sprintf("%q has no host%s.", s, form)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Sprintf("%q must be only a scheme, host and port%s.", s, form)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: the port must be a number from 1 to 65535%s.", s, form)
		}
	}
	return ""
}

// CheckListen validates a listen address, "host" or "host:port" (the host
// may be empty in "host:port", meaning every interface), and returns an
// error message saying what is wrong and how to write it, or "". The CLI
// applies it to WDC_LISTEN too.
func CheckListen(addr string) string {
	const form = `; write "host" or "host:port", as in "127.0.0.1", "0.0.0.0:7070" or "[::1]:7070"`
	if strings.ContainsAny(addr, " \t\r\n/") {
		return fmt.Sprintf("%q is not a listen address: it holds a space or a slash%s.", addr, form)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// No port: the whole text is the host. A bare IPv6 address
		// ("::1") has colons; a bracketed one needs a port.
		switch {
		case strings.ContainsAny(addr, "[]"):
			return fmt.Sprintf("%q is not a listen address: a bracketed IPv6 address needs a port, as in \"[::1]:7070\" (or write it without brackets)%s.", addr, form)
		case strings.Contains(addr, ":") && net.ParseIP(addr) == nil:
			return fmt.Sprintf("%q is not a listen address: %s%s.", addr, strings.TrimPrefix(err.Error(), "address "+addr+": "), form)
		}
		return ""
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return fmt.Sprintf("%q is not a listen address: %q is not an IPv6 address%s.", addr, host, form)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || strings.HasPrefix(port, "+") {
		return fmt.Sprintf("%q is not a listen address: the port %q must be a number from 0 to 65535%s.", addr, port, form)
	}
	return ""
}

type poolBody struct {
	Provider     *hcl.Attribute `hcl:"provider"`
	Min          *hcl.Attribute `hcl:"min,optional"`
	Max          *hcl.Attribute `hcl:"max,optional"`
	Capacity     *hcl.Attribute `hcl:"capacity,optional"`
	Labels       *hcl.Attribute `hcl:"labels,optional"`
	DrainTimeout *hcl.Attribute `hcl:"drain_timeout,optional"`
	// LaunchTimeout: how long a launched worker has to register.
	LaunchTimeout *hcl.Attribute `hcl:"launch_timeout,optional"`
	// Confine: whether the pool's workers confine their attempts.
	Confine   *hcl.Attribute `hcl:"confine,optional"`
	Heartbeat *heartbeatBody `hcl:"heartbeat,block"`
	Remain    hcl.Body       `hcl:",remain"`
}

type heartbeatBody struct {
	Interval *hcl.Attribute `hcl:"interval,optional"`
	TTL      *hcl.Attribute `hcl:"ttl,optional"`
	Body     hcl.Body       `hcl:",body"`
}

func (l *loader) pools(blocks hcl.Blocks) {
	seen := map[string]hcl.Range{}
	for _, b := range blocks {
		if d := claimLabel("pool", b, seen); d != nil {
			l.add(d)
			continue
		}
		name := b.Labels[0]
		p := &Pool{
			Name:         name,
			Min:          DefaultPoolMin,
			Max:          DefaultPoolMax,
			Capacity:     DefaultPoolCapacity,
			Labels:       map[string]string{},
			DrainTimeout: DefaultDrainTimeout,
			Heartbeat:    Heartbeat{Interval: DefaultHeartbeatInterval, TTL: DefaultHeartbeatTTL},
			DeclRange:    b.DefRange,
		}
		p.ProviderRange, p.LabelsRange = b.DefRange, b.DefRange
		l.cfg.Pools = append(l.cfg.Pools, p)
		l.pool(p, b)
	}
}

func (l *loader) pool(p *Pool, b *hcl.Block) {
	var body poolBody
	diags := gohcl.DecodeBody(b.Body, nil, &body)
	l.add(suggestNames(diags, impliedSchema(&body, diags))...)
	if body.Provider == nil {
		if !diags.HasErrors() {
			l.add(missing("provider", b))
		}
		return
	}
	schema, providerOK := l.poolProvider(p, body.Provider)
	overridden := false
	if o, ok := l.poolProviders[p.Name]; ok {
		// A test run's override_pool: the provider the block names is
		// replaced, and so are its defaults and its block.
		p.Provider, overridden = o, true
		schema, providerOK = l.providers[o]
	}
	l.poolSize(p, b, &body)
	var d hcl.Diagnostics
	p.DrainTimeout, _, d = l.ev.duration(body.DrainTimeout, scope{}, DefaultDrainTimeout)
	l.add(d...)
	p.LaunchTimeout, _, d = l.ev.duration(body.LaunchTimeout, scope{}, schema.LaunchTimeout)
	l.add(d...)
	var confine bool
	confine, d = l.ev.boolean(body.Confine, scope{}, true)
	p.Unconfined = !confine
	l.add(d...)
	if body.Heartbeat != nil {
		l.poolHeartbeat(p, body.Heartbeat)
	}
	remain := body.Remain
	if overridden {
		remain = nil
	}
	l.poolProviderBlocks(p, b, remain, schema, providerOK)
}

// poolProvider evaluates and checks a pool's provider name and returns its
// provider's schema; ok is false when the name is not one a pool may
// give (an error says why).
func (l *loader) poolProvider(p *Pool, attr *hcl.Attribute) (schema ProviderSchema, ok bool) {
	p.ProviderRange = attr.Range
	provider, set, diags := l.ev.str(attr, scope{})
	l.add(diags...)
	p.Provider = provider
	if diags.HasErrors() {
		return ProviderSchema{}, false
	}
	return l.checkProviderName(p, attr, provider, set)
}

// poolSize decodes a pool's min, max, capacity and labels.
func (l *loader) poolSize(p *Pool, b *hcl.Block, body *poolBody) {
	sc := scope{}
	var d hcl.Diagnostics
	var minOK, maxOK bool
	p.Min, minOK, d = l.ev.integer(body.Min, sc, DefaultPoolMin, 0, math.MaxInt32)
	l.add(d...)
	p.Max, maxOK, d = l.ev.integer(body.Max, sc, DefaultPoolMax, 1, math.MaxInt32)
	l.add(d...)
	if minOK && maxOK && p.Min > p.Max {
		rng := b.DefRange
		if body.Min != nil {
			rng = body.Min.Expr.Range()
		} else if body.Max != nil {
			rng = body.Max.Expr.Range()
		}
		l.add(&hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Pool min is greater than max",
			Detail:   fmt.Sprintf("Pool %q has min = %d and max = %d; min must not be greater than max.", p.Name, p.Min, p.Max),
			Subject:  rng.Ptr(),
		})
	}
	p.Capacity, _, d = l.ev.integer(body.Capacity, sc, DefaultPoolCapacity, 1, math.MaxInt32)
	l.add(d...)
	p.Labels, d = l.ev.stringMap(body.Labels, sc)
	p.SensitiveLabels, p.SensitiveLabelKeys = l.mapSensitivity(body.Labels)
	l.add(d...)
	if body.Labels != nil {
		p.LabelsRange = body.Labels.Range
	}
}

// poolHeartbeat decodes a pool's heartbeat block.
func (l *loader) poolHeartbeat(p *Pool, hb *heartbeatBody) {
	var d hcl.Diagnostics
	var iok, tok bool
	p.Heartbeat.Interval, iok, d = l.ev.duration(hb.Interval, scope{}, DefaultHeartbeatInterval)
	l.add(d...)
	p.Heartbeat.TTL, tok, d = l.ev.duration(hb.TTL, scope{}, DefaultHeartbeatTTL)
	l.add(d...)
	if !iok || !tok || p.Heartbeat.Interval < p.Heartbeat.TTL {
		return
	}
	rng := hb.Body.MissingItemRange()
	if hb.Interval != nil {
		rng = hb.Interval.Expr.Range()
	} else if hb.TTL != nil {
		rng = hb.TTL.Expr.Range()
	}
	l.add(&hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Heartbeat interval is not shorter than its ttl",
		Detail: fmt.Sprintf("Pool %q has heartbeat interval %s and ttl %s; the interval must be shorter than the ttl, or live workers would look dead.",
			p.Name, p.Heartbeat.Interval, p.Heartbeat.TTL),
		Subject: rng.Ptr(),
	})
}

// poolProviderBlocks checks the provider blocks of a pool (at most one,
// named like its provider) and hands the pool's block, or its absence, to
// the provider when the provider is one a pool may name (providerOK).
func (l *loader) poolProviderBlocks(p *Pool, b *hcl.Block, remain hcl.Body, schema ProviderSchema, providerOK bool) {
	decoded := false
	defer func() {
		if providerOK && !decoded {
			l.decodeProviderBlock(p, schema, nil, b.Body.MissingItemRange())
		}
	}()
	if remain == nil {
		return
	}
	content, diags := remain.Content(l.providerBlockSchema())
	if diags.HasErrors() {
		// A misspelt block or argument of the pool is reported here, where
		// the pool's own are decoded already: suggest those too.
		suggest := l.providerBlockSchema()
		if ps := impliedSchema(&poolBody{}, diags); ps != nil {
			suggest.Blocks = append(suggest.Blocks, ps.Blocks...)
			suggest.Attributes = append(suggest.Attributes, ps.Attributes...)
		}
		diags = suggestNames(diags, suggest)
	}
	l.add(diags...)
	if content == nil {
		return
	}
	var seenBlock *hcl.Block
	for _, pb := range content.Blocks {
		if seenBlock != nil {
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate provider block",
				Detail:   fmt.Sprintf("Pool %q already has a %s block at %s; a pool has at most one provider block.", p.Name, seenBlock.Type, seenBlock.DefRange),
				Subject:  pb.DefRange.Ptr(),
			})
			continue
		}
		seenBlock = pb
		if p.Provider != pb.Type {
			// After an unknown, empty or null provider the mismatch
			// would only repeat that error.
			if providerOK {
				l.add(&hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Provider block does not match the provider",
					Detail: fmt.Sprintf("Pool %q uses provider %q, so it cannot have a %s block; a pool may only have a block named like its provider.",
						p.Name, p.Provider, pb.Type),
					Subject: pb.DefRange.Ptr(),
				})
			}
			continue
		}
		decoded = true
		l.decodeProviderBlock(p, schema, pb.Body, pb.DefRange)
	}
}

type taskBody struct {
	Command   *hcl.Attribute `hcl:"command"`
	Env       *hcl.Attribute `hcl:"env,optional"`
	Dir       *hcl.Attribute `hcl:"dir,optional"`
	Placement *hcl.Attribute `hcl:"placement,optional"`
	Timeout   *hcl.Attribute `hcl:"timeout,optional"`
	DependsOn *hcl.Attribute `hcl:"depends_on,optional"`
	Count     *hcl.Attribute `hcl:"count,optional"`
	// ProposedOnly: the task runs only when a proposal for it is approved.
	ProposedOnly *hcl.Attribute `hcl:"proposed_only,optional"`
	Lease        *leaseBody     `hcl:"lease,block"`
	Retry        *retryBody     `hcl:"retry,block"`
	// Inputs: patterns of files of the configuration directory; Outputs:
	// patterns of files the task produces; Mounts: input blocks mapping an
	// upstream task's outputs into a folder.
	Inputs  *hcl.Attribute `hcl:"inputs,optional"`
	Outputs *hcl.Attribute `hcl:"outputs,optional"`
	Mounts  []*mountBody   `hcl:"input,block"`
}

type mountBody struct {
	Name   string         `hcl:"name,label"`
	From   *hcl.Attribute `hcl:"from"`
	Output *hcl.Attribute `hcl:"output"`
	Body   hcl.Body       `hcl:",body"`
}

type leaseBody struct {
	Grace *hcl.Attribute `hcl:"grace,optional"`
}

type retryBody struct {
	MaxAttempts *hcl.Attribute `hcl:"max_attempts,optional"`
	MaxLost     *hcl.Attribute `hcl:"max_lost,optional"`
	Backoff     *hcl.Attribute `hcl:"backoff,optional"`
	MaxBackoff  *hcl.Attribute `hcl:"max_backoff,optional"`
}

// taskBlock is a decoded task block before dependency resolution.
type taskBlock struct {
	name      string
	block     *hcl.Block
	counted   bool
	count     int
	dependsOn *hcl.Attribute
	mounts    []*mountBody // input blocks, resolved with the dependencies
	failed    bool         // errors left the instances unknown
	// proposed is set for proposed_only = true: the block has no
	// instances, and nothing may depend on it.
	proposed  bool
	instances []*Task
}

func (l *loader) tasks(blocks hcl.Blocks) {
	seen := map[string]hcl.Range{}
	var tbs []*taskBlock
	for _, b := range blocks {
		if d := claimLabel("task", b, seen); d != nil {
			l.add(d)
			continue
		}
		name := b.Labels[0]
		tb := &taskBlock{name: name, block: b}
		tbs = append(tbs, tb)
		l.task(tb)
		l.cfg.Tasks = append(l.cfg.Tasks, tb.instances...)
	}
	l.taskBlocks = tbs
	l.dependencies(tbs)
}

// impliedSchema is the schema gohcl derives from the field tags of val, a
// pointer to a struct, for suggestions in diags: nil when diags has no
// errors (there is nothing to suggest, and deriving it costs).
func impliedSchema(val any, diags hcl.Diagnostics) *hcl.BodySchema {
	if !diags.HasErrors() {
		return nil
	}
	schema, _ := gohcl.ImpliedBodySchema(val)
	return schema
}

// taskSchema is the schema gohcl derives from taskBody's field tags. It
// derives it again for every block it decodes, which for thousands of task
// blocks costs more than the decoding.
var taskSchema, _ = gohcl.ImpliedBodySchema(&taskBody{})

// decodeTaskBody decodes a task block's body as gohcl.DecodeBody(body, nil,
// out) does, with the same diagnostics. A body without nested blocks
// (lease, retry, input) is decoded here with taskSchema: gohcl would set
// the attribute fields and nothing else. One with nested blocks is left to
// gohcl, which decodes them and reports duplicates.
func decodeTaskBody(body hcl.Body, out *taskBody) hcl.Diagnostics {
	content, diags := body.Content(taskSchema)
	if content == nil || len(content.Blocks) > 0 {
		return gohcl.DecodeBody(body, nil, out)
	}
	a := content.Attributes
	*out = taskBody{
		Command:   a["command"],
		Env:       a["env"],
		Dir:       a["dir"],
		Placement: a["placement"],
		Timeout:   a["timeout"],
		DependsOn: a["depends_on"],
		Count:     a["count"],
		Inputs:    a["inputs"],
		Outputs:   a["outputs"],

		ProposedOnly: a["proposed_only"],
	}
	return diags
}

func (l *loader) task(tb *taskBlock) {
	var body taskBody
	diags := suggestNames(decodeTaskBody(tb.block.Body, &body), taskSchema)
	l.add(diags...)
	if body.ProposedOnly != nil {
		var d hcl.Diagnostics
		tb.proposed, d = l.ev.boolean(body.ProposedOnly, scope{}, false)
		l.add(d...)
	}
	if body.Command == nil && !diags.HasErrors() {
		diags = append(diags, missing("command", tb.block))
		l.add(diags...)
	}
	if diags.HasErrors() {
		// Keep depends_on if it decoded, so other tasks' references to
		// this one still resolve, but make no instances we cannot fill.
		// Still report the errors of the arguments that decoded: one
		// unknown argument must not hide a bad timeout beside it.
		tb.dependsOn = body.DependsOn
		tb.failed = true
		if body.Count != nil {
			l.count(body.Count)
		}
		if body.Command != nil { // instance evaluates a task that has one
			l.instance(tb, &body, scope{counted: body.Count != nil}, 0)
		}
		return
	}
	if tb.proposed {
		l.proposedTask(tb, &body)
		return
	}
	tb.dependsOn = body.DependsOn
	tb.mounts = body.Mounts
	if body.Count != nil {
		n, null, ok := l.count(body.Count)
		if !ok {
			tb.failed = true
			// Still report the errors of the other arguments.
			l.instance(tb, &body, scope{counted: true}, 0)
			return
		}
		if !null { // count = null means no count
			tb.counted, tb.count = true, n
		}
	}
	if !tb.counted {
		t, _ := l.instance(tb, &body, scope{}, -1)
		tb.instances = append(tb.instances, t)
		return
	}
	for i := 0; i < tb.count; i++ {
		t, failed := l.instance(tb, &body, scope{counted: true, index: i}, i)
		tb.instances = append(tb.instances, t)
		if failed {
			// The other instances would repeat the same errors; keep their
			// addresses so dependencies resolve.
			for j := i + 1; j < tb.count; j++ {
				tb.instances = append(tb.instances, l.emptyTask(tb, j))
			}
			return
		}
	}
}

// count evaluates a task's count (0 to MaxCount, null for none) and
// reports its errors; ok is false when it has any.
func (l *loader) count(attr *hcl.Attribute) (n int, null, ok bool) {
	n, null, ok, d := l.ev.intValue(attr, scope{}, 0, MaxCount)
	for _, x := range d {
		if x.Summary == "Value out of range" && strings.Contains(x.Detail, "at least") {
			x.Summary = "Negative count"
		}
	}
	l.add(d...)
	return n, null, ok
}

func (l *loader) emptyTask(tb *taskBlock, index int) *Task {
	return &Task{
		Name:           tb.name,
		Index:          index,
		Env:            map[string]string{},
		Dir:            l.cfg.Dir,
		Placement:      map[string]string{},
		Timeout:        DefaultTaskTimeout,
		LeaseGrace:     DefaultLeaseGrace,
		Retry:          Retry{MaxAttempts: DefaultMaxAttempts, MaxLost: DefaultMaxLost, Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff},
		DeclRange:      tb.block.DefRange,
		PlacementRange: tb.block.DefRange,
	}
}

// instance evaluates one instance of a task block; failed reports errors.
func (l *loader) instance(tb *taskBlock, body *taskBody, sc scope, index int) (*Task, bool) {
	t := l.emptyTask(tb, index)
	before := len(l.diags)
	var d hcl.Diagnostics

	cmd, ok, d := l.ev.stringList(body.Command, sc)
	l.add(d...)
	if ok {
		switch {
		case cmd == nil:
			l.add(attrErr(body.Command, "Invalid command", "The command must not be null."))
		case len(cmd) == 0:
			l.add(attrErr(body.Command, "Empty command",
				"The command is an empty list; it needs at least the program to run, as in [\"make\", \"test\"]."))
		case strings.TrimSpace(cmd[0]) == "":
			l.add(attrErr(body.Command, "Empty command",
				"The first element of the command, the program to run, is empty."))
		}
	}
	t.Command = cmd
	t.Sensitive = SensitiveFields{Command: l.attrSensitive(body.Command), Dir: l.attrSensitive(body.Dir)}
	t.Sensitive.Env, t.Sensitive.EnvKeys = l.mapSensitivity(body.Env)
	t.Sensitive.Placement, t.Sensitive.PlacementKeys = l.mapSensitivity(body.Placement)
	l.sensitiveFrom(t, body)

	t.Env, d = l.ev.stringMap(body.Env, sc)
	l.add(d...)
	dir, set, d := l.ev.str(body.Dir, sc)
	l.add(d...)
	if set && dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(l.cfg.Dir, dir)
		}
		t.Dir = filepath.Clean(dir)
		t.DirSet = true
	}
	l.checkExecText(t, body, dir)
	l.files(t, body, sc)
	t.Placement, d = l.ev.stringMap(body.Placement, sc)
	l.add(d...)
	if body.Placement != nil {
		t.PlacementRange = body.Placement.Range
	}
	t.Timeout, _, d = l.ev.duration(body.Timeout, sc, DefaultTaskTimeout)
	l.add(d...)
	if body.Lease != nil {
		t.LeaseGrace, _, d = l.ev.duration(body.Lease.Grace, sc, DefaultLeaseGrace)
		l.add(d...)
	}
	if r := body.Retry; r != nil {
		t.Retry.MaxAttempts, _, d = l.ev.integer(r.MaxAttempts, sc, DefaultMaxAttempts, 1, math.MaxInt32)
		l.add(d...)
		t.Retry.MaxLost, _, d = l.ev.integer(r.MaxLost, sc, DefaultMaxLost, 0, math.MaxInt32)
		l.add(d...)
		var bok, mok bool
		// "0s" retries at once.
		t.Retry.Backoff, bok, d = l.ev.durationZeroOK(r.Backoff, sc, DefaultBackoff)
		l.add(d...)
		t.Retry.MaxBackoff, mok, d = l.ev.duration(r.MaxBackoff, sc, DefaultMaxBackoff)
		l.add(d...)
		if bok && mok && t.Retry.MaxBackoff < t.Retry.Backoff {
			rng := tb.block.DefRange
			if r.MaxBackoff != nil {
				rng = r.MaxBackoff.Expr.Range()
			} else if r.Backoff != nil {
				rng = r.Backoff.Expr.Range()
			}
			l.add(&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Retry max_backoff is shorter than backoff",
				Detail: fmt.Sprintf("Task %q has backoff %s and max_backoff %s; max_backoff caps the doubling delay, so it must be at least backoff.",
					tb.name, t.Retry.Backoff, t.Retry.MaxBackoff),
				Subject: rng.Ptr(),
			})
		}
	}
	return t, hcl.Diagnostics(l.diags[before:]).HasErrors()
}

func missing(name string, b *hcl.Block) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Missing required argument",
		Detail:   fmt.Sprintf("The argument %q is required, but no definition was found in %s %q.", name, b.Type, b.Labels[0]),
		Subject:  b.Body.MissingItemRange().Ptr(),
	}
}
