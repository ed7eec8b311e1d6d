package hcl

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Config is a decoded and validated configuration directory: every
// *.wdc.hcl file in it, with variables resolved, locals and count expanded.
// Every object keeps the source range of its declaration so later stages
// (placement checks, planning) can report diagnostics that point at it.
type Config struct {
	// Dir is the absolute path of the configuration directory (path.root).
	Dir string
	// Files maps each loaded file name (as given to the parser) to its parsed
	// form; a diagnostic renderer needs it to print source snippets.
	Files map[string]*hcl.File
	// Settings holds the wdc { } block.
	Settings Settings
	// Variables holds every declared variable by name, with its final value.
	Variables map[string]*Variable
	// Locals holds the value of every local value that evaluated without
	// errors.
	Locals map[string]cty.Value
	// Pools in declaration order.
	Pools []*Pool
	// Tasks holds every task instance in declaration order; a counted task
	// contributes one instance per index, in ascending index order. Tasks
	// with proposed_only = true are not among them: see ProposedTasks.
	Tasks []*Task
	// ProposedTasks holds the task blocks with proposed_only = true, in
	// declaration order. The plan never runs them on its own: each runs
	// when a proposal for it is approved (RenderProposal makes its
	// instance).
	ProposedTasks []*ProposedTask
	// Edges holds the edge blocks in declaration order.
	Edges []*Edge
}

// Settings is the content of the wdc { } block. Empty strings mean "not set":
// the caller applies the precedence flag > environment > block > default.
type Settings struct {
	// State is the state file path as written (relative paths are relative
	// to Dir), or "".
	State string
	// Listen is the coordinator's listen address (host or host:port), or "".
	Listen string
	// Advertise is the URL workers are told to use to reach the
	// coordinator (a pod reaches it by another name than the one it binds),
	// or "" to derive it from Listen.
	Advertise string
	// Insecure allows plain HTTP on a non-loopback listen address.
	Insecure bool
	// TLS is the tls { } block: the server certificate to serve HTTPS with
	// instead of one from the state's own CA; nil when absent.
	TLS *TLSSettings
	// MaxArtifactSize is the largest log or output a worker may upload, in
	// bytes (max_artifact_size, default DefaultMaxArtifactSize).
	MaxArtifactSize int64
	// Backend is the backend block: where the state is kept instead of
	// the local file; nil without one (the state is the local file).
	Backend *BackendSettings
	// StateRange, ListenRange and AdvertiseRange are the ranges of the
	// attributes, or the zero Range when they are absent.
	StateRange     hcl.Range
	ListenRange    hcl.Range
	AdvertiseRange hcl.Range
	// InsecureRange is the range of insecure, TLSRange that of the tls
	// block's header (zero when absent).
	InsecureRange hcl.Range
	TLSRange      hcl.Range
}

// BackendSettings is the wdc block's backend "s3" { } block. Credentials
// are never in it: they come from the environment or a profile.
type BackendSettings struct {
	Type      string // "s3"
	Bucket    string
	Key       string // the state object's key; the lock is KEY.lock
	Endpoint  string // the store's URL, or "" for AWS S3
	Region    string // or "" for the default
	PathStyle bool
	Profile   string // a profile of the shared credentials file, or ""
	// LockTTL is lock_ttl (default DefaultBackendLockTTL).
	LockTTL time.Duration
	// Range is the block's range.
	Range hcl.Range
}

// TLSSettings is the wdc block's tls { } block. Relative paths are made
// absolute against the configuration directory.
type TLSSettings struct {
	CertFile string // PEM certificate chain, leaf first
	KeyFile  string // PEM private key of the leaf
}

// Variable is one declared input variable.
type Variable struct {
	Name        string
	Type        cty.Type // cty.DynamicPseudoType when no type was given
	Default     cty.Value
	HasDefault  bool
	Description string
	Sensitive   bool
	// Value is the final value after defaults, WDC_VAR_ environment
	// variables, --var-file files and --var flags, converted to Type.
	Value     cty.Value
	DeclRange hcl.Range
}

// Heartbeat is a pool's heartbeat timing.
type Heartbeat struct {
	Interval time.Duration // default 2s
	TTL      time.Duration // default 10s
}

// Pool is one pool "NAME" block.
type Pool struct {
	Name         string
	Provider     string
	Min          int               // default 0
	Max          int               // default 1
	Capacity     int               // attempts one worker runs at once; default 1
	Labels       map[string]string // never nil
	DrainTimeout time.Duration     // default 60s
	// LaunchTimeout is how long a launched worker has to register; for an
	// external pool, how long apply waits for a worker to join. Its
	// default is the provider's (ProviderSchema.LaunchTimeout). Zero only
	// when the provider is unknown or unchecked (Inputs.Providers).
	LaunchTimeout time.Duration
	// Unconfined is true when the pool says confine = false: its workers
	// run attempts without confinement (the default confines them where
	// the worker's machine allows; docs/configuration.md).
	Unconfined bool
	Heartbeat  Heartbeat
	// Settings are the pool's provider block (kubernetes { }, ray { },
	// local { }) as its provider decoded it (ProviderSchema.Decode); nil
	// when the provider returned none (no block, or one with errors).
	Settings ProviderSettings
	// SensitiveLabels is true when labels as a whole are computed from a
	// sensitive variable; SensitiveLabelKeys names single labels whose
	// values are. Outputs show "(sensitive)" instead of those values.
	SensitiveLabels    bool
	SensitiveLabelKeys map[string]bool
	DeclRange          hcl.Range
	// ProviderRange is the range of the provider attribute (DeclRange when
	// it is missing); LabelsRange that of labels (DeclRange when absent).
	ProviderRange hcl.Range
	LabelsRange   hcl.Range
}

// Address returns the pool's address, "pool.NAME".
func (p *Pool) Address() string { return "pool." + p.Name }

// Retry is a task's retry { } block.
type Retry struct {
	MaxAttempts int           // attempts that may end in failure; default 1
	MaxLost     int           // attempts that may be lost; default 3
	Backoff     time.Duration // first delay, doubling each retry; default 5s
	MaxBackoff  time.Duration // cap on the delay; default 5m
}

// Task is one instance of a task "NAME" block. A block with count = N
// gives N instances with Index 0..N-1; a block without count gives one
// instance with Index -1.
type Task struct {
	Name    string
	Index   int // -1 when the block has no count
	Command []string
	Env     map[string]string // never nil
	// Dir is the absolute working directory of the command (default: the
	// configuration directory; a task with inputs, outputs or input
	// blocks and no dir runs in its attempt's directory). DirSet says the
	// block set dir.
	Dir    string
	DirSet bool
	// Inputs are the files of the configuration directory the task reads:
	// its inputs patterns resolved, "/"-separated paths relative to Dir of
	// the configuration, sorted, without duplicates. Outputs are the
	// patterns of the files it produces, relative to its attempt's
	// directory. Mounts are its input blocks.
	Inputs  []string
	Outputs []string
	Mounts  []Mount
	// InputsRange is the range of the inputs attribute (DeclRange when absent).
	InputsRange hcl.Range
	Placement   map[string]string // never nil; label requirements
	Timeout     time.Duration     // default 1h
	// LeaseGrace is added to Timeout to bound a lease's life; default 2m.
	LeaseGrace time.Duration
	Retry      Retry
	// DependsOn lists the addresses of the task instances this one waits
	// for, sorted and without duplicates ([task.x] expands to every instance
	// of a counted task x); nil when there are none. The instances of one
	// block share this slice: treat it as read-only.
	DependsOn []string
	DeclRange hcl.Range
	// PlacementRange is the range of the placement attribute, or DeclRange
	// when it is absent.
	PlacementRange hcl.Range
	// Sensitive says which attributes are computed from a sensitive
	// variable; outputs show "(sensitive)" instead of their values.
	Sensitive SensitiveFields
}

// Mount is an input block of a task: the accepted outputs of the task From
// (one instance's address) that match Output go into the folder Name of
// the attempt's directory. From is also a dependency of the task.
type Mount struct {
	Name   string
	From   string
	Output string
	// FromRange is the range of the from expression.
	FromRange hcl.Range
}

// SensitiveFields flags the task attributes whose expressions use a
// sensitive variable (directly or through local values). For env and
// placement, the bool means the whole map; EnvKeys and PlacementKeys name
// single entries whose values are sensitive (the other entries stay
// visible).
type SensitiveFields struct {
	Command, Env, Dir, Placement bool
	EnvKeys, PlacementKeys       map[string]bool
	// From names, for each sensitive part of the task's definition —
	// "command", "dir", "env" (the whole map) and "env.NAME" (one entry),
	// the part names of package protocol — the sensitive references its
	// expression uses ("var.token", "local.auth"), sorted; nil when no
	// part is sensitive.
	From map[string][]string
}

// Any reports whether any part of the task is computed from a sensitive
// variable.
func (s SensitiveFields) Any() bool {
	return s.Command || s.Env || s.Dir || s.Placement || len(s.EnvKeys) > 0 || len(s.PlacementKeys) > 0
}

// Address returns "task.NAME" or "task.NAME[INDEX]".
func (t *Task) Address() string {
	if t.Index < 0 {
		return "task." + t.Name
	}
	return fmt.Sprintf("task.%s[%d]", t.Name, t.Index)
}
