package providers

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// SourceBuiltIn is the Source of a provider compiled into wdc.
const SourceBuiltIn = "built-in"

// Info describes a provider for the registry and `wdc providers`: what it
// is called, where it comes from and what it can do. A provider package
// passes it to Register; Lookup and Validate check that the provider keeps
// its promises (Check).
type Info struct {
	// Name is the provider's name as pools write it: ^[a-z][a-z0-9-]*$,
	// and what the provider's Name method returns.
	Name string
	// Source says where the provider comes from: SourceBuiltIn for the
	// providers compiled into wdc. It must not be empty, so a listing can
	// always say it.
	Source string
	// Summary says in a few words what the provider launches workers as,
	// for the listing ("worker processes on this machine").
	Summary string
	// Capabilities are what the provider can do beyond the Provider
	// interface.
	Capabilities Capabilities
	// Creates says what the provider's launches create on a shared
	// cluster, for messages: "Jobs, Secrets and Leases in a Kubernetes
	// cluster". "" for a provider without Capabilities.ClusterWrites.
	Creates string
	// Schema is the provider's configuration: what a pool's provider
	// block of its name holds, decoded and checked by the provider into
	// its own settings (which every LaunchRequest of the pool carries
	// back to it), and the pool defaults that are the provider's. Nil: the
	// provider takes no settings, and its pools' launch_timeout defaults
	// to DefaultLaunchTimeout.
	Schema *wdchcl.ProviderSchema
}

// DefaultLaunchTimeout is the launch_timeout of the pools of a provider
// whose Schema gives none, and LaunchTimeout's answer for a name no
// provider has: a pod or a Ray job takes a while to start.
const DefaultLaunchTimeout = 5 * time.Minute

// Capabilities are what a provider can do beyond launching, watching and
// stopping workers. A capability that needs a method is a promise: the
// provider must implement the optional interface it names, and must not
// implement that interface without claiming the capability.
type Capabilities struct {
	// Render: the provider can show the launch it would make without
	// making it. It must implement Renderer.
	Render bool
	// DryRun: the provider can check a launch against its target without
	// launching. It must implement DryRunner.
	DryRun bool
	// ClusterWrites: the provider creates objects on a shared cluster
	// (Kubernetes Jobs and Leases, Ray jobs), which a configuration must
	// enable for each pool before apply writes any (docs/design.md §3,
	// invariant 10). No method goes with it.
	ClusterWrites bool
}

// Status is a registry entry's status.
type Status string

// The statuses of registry entries.
const (
	// StatusAvailable: registered, and it keeps its contract.
	StatusAvailable Status = "available"
	// StatusPlanned: the registry was made to list it (NewRegistry), but
	// it is not part of this program; a pool cannot name it.
	StatusPlanned Status = "planned"
	// StatusInvalid: registered, but it fails its contract (Entry.Err
	// says how); Lookup refuses it.
	StatusInvalid Status = "invalid"
)

// Entry is one provider of the registry's listing.
type Entry struct {
	// Info is what the provider registered with; for a planned provider,
	// its name and summary only (Source is "", Capabilities are unknown).
	Info   Info
	Status Status
	// Err says how the provider fails its contract; nil unless Status is
	// StatusInvalid.
	Err *ContractError
}

// Rule names the part of the provider contract a ContractError is about.
type Rule string

// The rules of the provider contract that the registry checks.
const (
	// RuleName: Info.Name is a valid name (^[a-z][a-z0-9-]*$), and the
	// provider's Name method returns it.
	RuleName Rule = "name"
	// RuleSource: Info.Source is not empty.
	RuleSource Rule = "source"
	// RuleFactory: the factory is not nil, and returns a provider without
	// panicking.
	RuleFactory Rule = "factory"
	// RuleRender: the provider implements Renderer exactly when Info
	// claims Capabilities.Render.
	RuleRender Rule = "render"
	// RuleDryRun: the provider implements DryRunner exactly when Info
	// claims Capabilities.DryRun.
	RuleDryRun Rule = "dry_run"
)

// ContractError says that a provider fails its contract: which provider,
// which rule, and how. Register returns it for what it can check without
// making the provider (its name, source and factory); Lookup, List and
// Validate for what the provider it makes does.
type ContractError struct {
	// Provider is the name the provider registered with (possibly the
	// invalid one).
	Provider string
	Rule     Rule
	// Detail says what is wrong, a sentence for people.
	Detail string
}

// Error reports the provider, the rule and the detail.
func (e *ContractError) Error() string {
	return fmt.Sprintf("provider %q fails its contract (%s): %s", e.Provider, e.Rule, e.Detail)
}

// Errors from Lookup and Register.
var (
	// ErrUnknown means no provider has the name.
	ErrUnknown = errors.New("unknown provider")
	// ErrNotBuilt means the provider is planned (a name NewRegistry was
	// given) but not built into this program.
	ErrNotBuilt = errors.New("provider not built yet")
	// ErrDuplicate means a provider of that name is registered already.
	ErrDuplicate = errors.New("provider registered twice")
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Registry holds providers by name, with what they registered with, and
// the planned providers that are not built. Its methods are safe for
// concurrent use. Programs use the package's registry through Register,
// Lookup, Names, List and Validate; NewRegistry makes others (tests).
type Registry struct {
	mu      sync.Mutex
	entries map[string]registered
	planned map[string]Info
}

// registered is one provider of a Registry.
type registered struct {
	info    Info
	factory func() Provider
}

// NewRegistry returns an empty registry that lists the planned providers
// given (by Name and Summary) until a provider of their name registers.
func NewRegistry(planned ...Info) *Registry {
	r := &Registry{entries: map[string]registered{}, planned: map[string]Info{}}
	for _, p := range planned {
		r.planned[p.Name] = Info{Name: p.Name, Summary: p.Summary}
	}
	return r
}

// Register adds a provider under info.Name. It returns a *ContractError
// when info or factory fails the contract (RuleName, RuleSource,
// RuleFactory) and an error wrapping ErrDuplicate when the name is taken;
// then nothing is registered. It does not call factory: Lookup, List and
// Validate check what the factory makes. A factory must be cheap and must
// not reach the launch target (List calls it for `wdc providers`);
// providers connect when they launch.
func (r *Registry) Register(info Info, factory func() Provider) error {
	switch {
	case !nameRE.MatchString(info.Name):
		return &ContractError{Provider: info.Name, Rule: RuleName,
			Detail: "the name " + strconv.Quote(info.Name) + " is not a provider name: it must match ^[a-z][a-z0-9-]*$"}
	case info.Source == "":
		return &ContractError{Provider: info.Name, Rule: RuleSource,
			Detail: "Info.Source is empty: say where the provider comes from (providers.SourceBuiltIn for one compiled into wdc)"}
	case factory == nil:
		return &ContractError{Provider: info.Name, Rule: RuleFactory, Detail: "the factory is nil"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[info.Name]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicate, info.Name)
	}
	r.entries[info.Name] = registered{info: info, factory: factory}
	return nil
}

// Lookup returns a new instance of the provider registered as name. The
// error is a *ContractError when the provider it makes fails its contract
// (Check); it wraps ErrNotBuilt for a planned provider that is not built
// and ErrUnknown for any other unknown name, and then lists the available
// names.
func (r *Registry) Lookup(name string) (Provider, error) {
	r.mu.Lock()
	reg, ok := r.entries[name]
	_, planned := r.planned[name]
	r.mu.Unlock()
	if ok {
		p, cerr := reg.make()
		if cerr != nil {
			return nil, cerr
		}
		return p, nil
	}
	if planned {
		return nil, fmt.Errorf("%w: %q is planned but not part of this wdc; available: %v", ErrNotBuilt, name, r.Names())
	}
	return nil, fmt.Errorf("%w %q; available: %v", ErrUnknown, name, r.Names())
}

// Names returns the registered provider names, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Describe returns the Info the provider name registered with, without
// making the provider; false when no provider registered the name.
func (r *Registry) Describe(name string) (Info, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.entries[name]
	return reg.info, ok
}

// Schemas returns the configuration schema of every registered provider by
// name (Info.Schema; a provider without one takes no settings and has the
// DefaultLaunchTimeout), as the configuration language takes them
// (hcl.Inputs.Providers).
func (r *Registry) Schemas() map[string]wdchcl.ProviderSchema {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]wdchcl.ProviderSchema, len(r.entries))
	for name, reg := range r.entries {
		out[name] = reg.info.schema()
	}
	return out
}

// schema is info's Schema, or what a provider without one gets.
func (info Info) schema() wdchcl.ProviderSchema {
	if info.Schema == nil {
		return wdchcl.ProviderSchema{LaunchTimeout: DefaultLaunchTimeout}
	}
	return *info.Schema
}

// List returns every registered provider, checked as Lookup checks it
// (StatusAvailable or StatusInvalid), and every planned provider no
// registered one replaces (StatusPlanned), sorted by name.
func (r *Registry) List() []Entry {
	r.mu.Lock()
	regs := make([]registered, 0, len(r.entries))
	for _, reg := range r.entries {
		regs = append(regs, reg)
	}
	var planned []Info
	for n, info := range r.planned {
		if _, ok := r.entries[n]; !ok {
			planned = append(planned, info)
		}
	}
	r.mu.Unlock()
	out := make([]Entry, 0, len(regs)+len(planned))
	for _, reg := range regs {
		e := Entry{Info: reg.info, Status: StatusAvailable}
		if _, cerr := reg.make(); cerr != nil {
			e.Status, e.Err = StatusInvalid, cerr
		}
		out = append(out, e)
	}
	for _, info := range planned {
		out = append(out, Entry{Info: info, Status: StatusPlanned})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Name < out[j].Info.Name })
	return out
}

// Validate checks every registered provider as Lookup does and returns
// their contract errors joined (each a *ContractError), or nil when every
// one keeps its contract.
func (r *Registry) Validate() error {
	var errs []error
	for _, e := range r.List() {
		if e.Err != nil {
			errs = append(errs, e.Err)
		}
	}
	return errors.Join(errs...)
}

// make calls the factory and checks what it returns. A factory that
// panics, returns nil or a provider that breaks a promise of its Info is a
// contract error, not a crash.
func (reg registered) make() (p Provider, cerr *ContractError) {
	defer func() {
		if v := recover(); v != nil {
			p, cerr = nil, &ContractError{Provider: reg.info.Name, Rule: RuleFactory, Detail: fmt.Sprintf("making or checking the provider panicked: %v", v)}
		}
	}()
	p = reg.factory()
	if cerr := check(reg.info, p); cerr != nil {
		return nil, cerr
	}
	return p, nil
}

// Check returns a *ContractError saying how p breaks a promise info
// makes, or nil when it keeps them all: p is not nil, its Name is
// info.Name, and it implements Renderer and DryRunner exactly when info
// claims Capabilities.Render and Capabilities.DryRun. The registry checks
// every provider it makes this way; the conformance suite
// (providers/providertest) checks the providers it tests.
func Check(info Info, p Provider) error {
	if cerr := check(info, p); cerr != nil {
		return cerr
	}
	return nil
}

func check(info Info, p Provider) *ContractError {
	fail := func(rule Rule, format string, args ...any) *ContractError {
		return &ContractError{Provider: info.Name, Rule: rule, Detail: fmt.Sprintf(format, args...)}
	}
	if p == nil {
		return fail(RuleFactory, "the factory returned no provider (nil)")
	}
	if got := p.Name(); got != info.Name {
		return fail(RuleName, "its Name method returns %q, but it is registered as %q", got, info.Name)
	}
	_, renders := p.(Renderer)
	if info.Capabilities.Render && !renders {
		return fail(RuleRender, "Info claims Render, but %T has no RenderLaunch method (providers.Renderer)", p)
	}
	if !info.Capabilities.Render && renders {
		return fail(RuleRender, "%T implements providers.Renderer, but Info does not claim Render", p)
	}
	_, dryRuns := p.(DryRunner)
	if info.Capabilities.DryRun && !dryRuns {
		return fail(RuleDryRun, "Info claims DryRun, but %T has no DryRunLaunch method (providers.DryRunner)", p)
	}
	if !info.Capabilities.DryRun && dryRuns {
		return fail(RuleDryRun, "%T implements providers.DryRunner, but Info does not claim DryRun", p)
	}
	return nil
}

// defaultRegistry is the registry provider packages register into from
// init and apply looks providers up in.
var defaultRegistry = NewRegistry()

// Register makes a provider available to Lookup under info.Name. Provider
// packages call it from init (providers/local registers "local"), so a
// program that imports a provider package can look it up; package
// providers/builtin imports every built-in one. It panics with
// Registry.Register's error (a *ContractError for an invalid name, an
// empty Source or a nil factory; ErrDuplicate for a name registered
// twice): that is a programming error.
func Register(info Info, factory func() Provider) {
	if err := defaultRegistry.Register(info, factory); err != nil {
		panic(fmt.Errorf("providers: %w", err))
	}
}

// Lookup returns a new instance of the provider registered as name (see
// Registry.Lookup): a *ContractError when it fails its contract, and an
// error wrapping ErrUnknown for a name no provider registered (a program
// that does not import its package); its message lists the known names.
func Lookup(name string) (Provider, error) { return defaultRegistry.Lookup(name) }

// Names returns the registered provider names, sorted.
func Names() []string { return defaultRegistry.Names() }

// List returns every registered provider with its status, sorted by name
// (see Registry.List); `wdc providers` prints it.
func List() []Entry { return defaultRegistry.List() }

// Validate checks every registered provider (see Registry.Validate).
func Validate() error { return defaultRegistry.Validate() }

// Describe returns the Info a provider registered with (see
// Registry.Describe); the external pseudo-provider is not in the
// registry.
func Describe(name string) (Info, bool) { return defaultRegistry.Describe(name) }

// Schemas returns what the configuration language needs of every provider a
// pool may name, by name (hcl.Inputs.Providers): the registered providers'
// schemas (Registry.Schemas) and the external pseudo-provider's.
func Schemas() map[string]wdchcl.ProviderSchema {
	out := defaultRegistry.Schemas()
	out[External] = externalSchema
	return out
}

// LaunchTimeout returns the default launch_timeout of a provider's pools:
// its schema's (external's too), or DefaultLaunchTimeout for a name no
// provider has.
func LaunchTimeout(provider string) time.Duration {
	if s, ok := Schemas()[provider]; ok {
		return s.LaunchTimeout
	}
	return DefaultLaunchTimeout
}
