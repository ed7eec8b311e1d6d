package jsonplan

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// FormatVersion is the format_version of the plan document (`wdc plan
// --json`, `wdc plan --out`, `wdc show FILE --json`); docs/json.md and
// docs/schema/plan.schema.json describe it. A reader refuses another major
// version.
const FormatVersion = "1.12"

// Plan is the plan document: what `wdc plan --json` prints and what a
// saved plan file holds. It records what the plan was computed from (the
// state's lineage and serial, hashes of the configuration files and of the
// variable values, the wdc version and the time), the changes, the
// placement preview and the summary.
type Plan struct {
	FormatVersion string              `json:"format_version"`
	WDCVersion    string              `json:"wdc_version"`
	CreatedAt     time.Time           `json:"created_at"`
	State         StateRef            `json:"state"`
	Configuration ConfigRef           `json:"configuration"`
	Variables     map[string]Variable `json:"variables"`
	Replace       []string            `json:"replace"`
	Pools         []Pool              `json:"pools"`
	Changes       []Change            `json:"changes"`
	// WaitingProposals are the proposals waiting for approval: not
	// changes, they run once approved (1.5).
	WaitingProposals []ProposalRef `json:"waiting_proposals"`
	Summary          Summary       `json:"summary"`
}

// ProposalRef is a proposal as a plan names it (1.5).
type ProposalRef struct {
	ID            int64  `json:"id"`
	Address       string `json:"address"`
	Status        string `json:"status"`
	Edge          string `json:"edge"`
	Task          string `json:"task"`
	SourceTask    string `json:"source_task"`
	SourceAttempt int    `json:"source_attempt"`
	DecidedBy     string `json:"decided_by,omitempty"`
	Earned        string `json:"earned,omitempty"`
}

func newProposalRef(p state.Proposal) ProposalRef {
	return ProposalRef{ID: p.ID, Address: p.Address(), Status: string(p.Status), Edge: p.Edge, Task: p.Propose,
		SourceTask: p.SourceTask, SourceAttempt: p.SourceAttempt, DecidedBy: p.DecidedBy, Earned: p.Earned}
}

// StateRef identifies the state snapshot a plan was computed from; an
// absent state is lineage "" and serial 0. The state document of `wdc show
// --json` names its state the same way.
type StateRef struct {
	Lineage string `json:"lineage"`
	Serial  int64  `json:"serial"`
	// Backend, when the state was read from a backend (1.8), names it
	// and the state object's ETag as read; nil for a local state file.
	Backend *BackendRef `json:"backend,omitempty"`
}

// BackendRef names the backend a plan read its state from.
type BackendRef struct {
	Name string `json:"name"` // s3://BUCKET/KEY
	// ETag is the state object's ETag as read, "" when the key held
	// nothing.
	ETag string `json:"etag"`
}

// ConfigRef identifies the configuration and variable values a plan was
// computed from.
type ConfigRef struct {
	// Hash is the SHA-256 of the configuration files (name and content, by
	// name): ConfigHash.
	Hash  string   `json:"hash"`
	Files []string `json:"files"`
	// VariablesSalt and VariablesHash: SHA-256 of the salt followed by every
	// variable's name and JSON value, a sensitive one's keyed hash instead
	// of its value (1.7): VariablesHash.
	VariablesSalt string `json:"variables_salt"`
	VariablesHash string `json:"variables_hash"`
	// SensitiveVariables holds the keyed hash of each sensitive variable's
	// value, by name, under the state's hash key (1.7): apply of a saved
	// plan reads the values again and refuses one that changed, and
	// nobody without the state can test a guess against it.
	SensitiveVariables map[string]string `json:"sensitive_variables"`
}

// Variable is one variable's value as the plan records it.
type Variable struct {
	// Value is the variable's value as JSON, or "(sensitive)".
	Value     json.RawMessage `json:"value"`
	Sensitive bool            `json:"sensitive"`
}

// Pool is one pool of the placement preview: how many workers apply
// launches for it, and why.
type Pool struct {
	Address  string            `json:"address"`
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	Labels   map[string]string `json:"labels"`
	Workers  int               `json:"workers"`
	// InitialWorkers is how many of them apply starts with; the
	// supervisor grows the pool from there up to Workers (1.2).
	InitialWorkers int `json:"initial_workers"`
	Tasks          int `json:"tasks"`
	// ReadyTasks is how many of Tasks can start when apply does (none of
	// their dependencies runs in this plan) (1.11).
	ReadyTasks int `json:"ready_tasks"`
	// QueuedAtStart is how many planned task runs the pool can run can
	// start when apply does: ReadyTasks and the ready ones counted toward
	// an earlier pool that this one can run too (each is queued for every
	// pool that can run it). What InitialWorkers is sized for (1.12).
	QueuedAtStart int `json:"queued_at_start"`
	Capacity      int `json:"capacity"`
	Min           int `json:"min"`
	Max           int `json:"max"`
	// LaunchPreview is what each launch of the pool creates on its
	// target, as `wdc plan` renders it (1.3): set only by plan, for pools
	// whose provider creates objects (kubernetes), omitted otherwise.
	LaunchPreview []LaunchObject `json:"launch_preview,omitempty"`
	// Unconfined is true when the pool says confine = false: its workers
	// run attempts without confinement (1.6); omitted otherwise.
	Unconfined bool `json:"unconfined,omitempty"`
}

// LaunchObject is one object a launch creates (1.3).
type LaunchObject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Body is the object as the provider sends it (YAML), every secret
	// value shown as "(sensitive)".
	Body string `json:"body"`
}

// AddLaunchPreviews puts the rendered launches into the document's pools,
// by pool name.
func (doc *Plan) AddLaunchPreviews(previews []plan.LaunchPreview) {
	for _, lp := range previews {
		for i := range doc.Pools {
			if doc.Pools[i].Name != lp.Pool {
				continue
			}
			for _, o := range lp.Objects {
				doc.Pools[i].LaunchPreview = append(doc.Pools[i].LaunchPreview, LaunchObject{Kind: o.Kind, Name: o.Name, Body: o.Body})
			}
		}
	}
}

// Change is one change: what happens to one task and why.
type Change struct {
	Address string `json:"address"`
	Action  string `json:"action"`
	Symbol  string `json:"symbol"`
	Reason  string `json:"reason"`
	// Pool is the pool the task counts toward for sizing; Candidates every
	// pool that could run it, in declaration order.
	Pool       string   `json:"pool,omitempty"`
	Candidates []string `json:"candidates"`
	Before     *Before  `json:"before"`
	After      *After   `json:"after"`
	// Proposal is set on the run of an approved proposal (1.5).
	Proposal *ProposalRef `json:"proposal,omitempty"`
}

// Before is what the state recorded of a changed task.
type Before struct {
	Status  string `json:"status"`
	DefHash string `json:"def_hash"`
	// The definition the state recorded (absent when it has none): what a
	// replace changes. Values computed from a sensitive variable now are
	// hidden in the old definition too.
	Command   []string          `json:"command,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	DependsOn []string          `json:"depends_on,omitempty"`
	// Inputs, Outputs and Mounts as the state recorded them (1.1).
	Inputs  []Input          `json:"inputs,omitempty"`
	Outputs []string         `json:"outputs,omitempty"`
	Mounts  []protocol.Mount `json:"mounts,omitempty"`
}

// After is the definition a changed task runs with.
type After struct {
	DefHash   string            `json:"def_hash"`
	Command   []string          `json:"command"`
	Env       map[string]string `json:"env"`
	Dir       string            `json:"dir"`
	DependsOn []string          `json:"depends_on"`
	Placement map[string]string `json:"placement"`
	// Inputs are the files the task reads, with the hashes apply stores
	// and checks; Outputs its output patterns; Mounts its input blocks (1.1).
	Inputs  []Input          `json:"inputs,omitempty"`
	Outputs []string         `json:"outputs,omitempty"`
	Mounts  []protocol.Mount `json:"mounts,omitempty"`
}

// Input is one input file of a definition.
type Input struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

func newInputs(fs []protocol.InputFile) []Input {
	var out []Input
	for _, f := range fs {
		out = append(out, Input{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
	}
	return out
}

// Summary counts the changes; Text is the summary line of the text plan.
type Summary struct {
	WorkersToLaunch int    `json:"workers_to_launch"`
	Run             int    `json:"run"`
	Replace         int    `json:"replace"`
	Retry           int    `json:"retry"`
	Cancel          int    `json:"cancel"`
	Total           int    `json:"total"`
	HasChanges      bool   `json:"has_changes"`
	Text            string `json:"text"`
}

// New builds the document of p, computed from cfg with the given --replace
// targets, by wdc wdcVersion. Sensitive variable values are replaced by
// "(sensitive)" wherever they appear. It fails only when the system's
// random source or a variable's JSON form does.
func New(cfg *wdchcl.Config, p *plan.Plan, replace []string, wdcVersion string) (*Plan, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	vars, varsHash, err := variables(cfg, hex.EncodeToString(salt), p.Key)
	if err != nil {
		return nil, err
	}
	sensitive, err := SensitiveVariables(cfg, p.Key)
	if err != nil {
		return nil, err
	}
	red := NewRedactor(cfg)
	files, cfgHash := ConfigHash(cfg)
	doc := &Plan{
		FormatVersion: FormatVersion,
		WDCVersion:    wdcVersion,
		CreatedAt:     p.CreatedAt.UTC(),
		State:         StateRef{Lineage: p.Lineage, Serial: p.Serial},
		Configuration: ConfigRef{Hash: cfgHash, Files: files, VariablesSalt: hex.EncodeToString(salt), VariablesHash: varsHash,
			SensitiveVariables: sensitive},
		Variables: vars,
		Replace:   append([]string{}, replace...),
		Pools:     make([]Pool, 0, len(p.Pools)),
		Changes:   make([]Change, 0, len(p.Tasks)),

		WaitingProposals: make([]ProposalRef, 0, len(p.Waiting)),
	}
	for _, w := range p.Waiting {
		doc.WaitingProposals = append(doc.WaitingProposals, newProposalRef(w))
	}
	pools := map[string]*wdchcl.Pool{}
	for _, pool := range cfg.Pools {
		pools[pool.Name] = pool
	}
	for _, pc := range p.Pools {
		pd := Pool{Address: "pool." + pc.Name, Name: pc.Name, Workers: pc.Workers, InitialWorkers: pc.InitialWorkers(), Tasks: pc.Tasks, ReadyTasks: pc.Ready, QueuedAtStart: pc.QueuedAtStart,
			Capacity: pc.Capacity, Min: pc.Min, Max: pc.Max, Labels: map[string]string{}}
		if pool := pools[pc.Name]; pool != nil {
			pd.Provider = pool.Provider
			pd.Unconfined = pool.Unconfined
			pd.Labels = red.env(pool.Labels)
			pd.Labels = hideParts(pd.Labels, pool.SensitiveLabels, pool.SensitiveLabelKeys)
		}
		doc.Pools = append(doc.Pools, pd)
	}
	tasks := make(map[string]*wdchcl.Task, len(cfg.Tasks))
	for _, t := range cfg.Tasks {
		tasks[t.Address()] = t
	}
	for _, tc := range p.Tasks {
		doc.Changes = append(doc.Changes, newChange(tc, p.Definitions, tasks[tc.Address], red))
	}
	s := p.Summary()
	doc.Summary = Summary{WorkersToLaunch: s.WorkersToLaunch, Run: s.Run, Replace: s.Replace, Retry: s.Retry,
		Cancel: s.Cancel, Total: s.Total, HasChanges: p.HasChanges(), Text: s.String()}
	return doc, nil
}

// newChange is the document of one task change; t is the task's
// configuration (nil when the task left it), whose sensitive parts are
// hidden before and after.
func newChange(tc plan.TaskChange, defs map[string]plan.TaskDefinition, t *wdchcl.Task, red *Redactor) Change {
	cd := Change{Address: tc.Address, Action: string(tc.Action), Symbol: tc.Action.Symbol(), Reason: tc.Reason,
		Pool: tc.Pool, Candidates: append([]string{}, tc.Candidates...)}
	if tc.PriorStatus != "" {
		cd.Before = &Before{Status: string(tc.PriorStatus), DefHash: tc.OldHash}
		var old protocol.Definition
		if len(tc.OldSpec) > 0 && json.Unmarshal(tc.OldSpec, &old) == nil {
			cd.Before.Command, cd.Before.Env, cd.Before.Dir = red.list(old.Command), red.env(old.Env), red.Text(old.Dir)
			cd.Before.DependsOn = old.DependsOn
			cd.Before.Inputs, cd.Before.Outputs, cd.Before.Mounts = newInputs(old.Inputs), old.Outputs, old.Mounts
			if t != nil {
				if t.Sensitive.Command {
					cd.Before.Command = []string{Sensitive}
				}
				cd.Before.Env = hideParts(cd.Before.Env, t.Sensitive.Env, t.Sensitive.EnvKeys)
				if t.Sensitive.Dir {
					cd.Before.Dir = Sensitive
				}
			}
		}
	}
	if def, ok := defs[tc.Address]; ok && tc.Action != plan.ActionCancel {
		// Every part the definition records as sensitive is hidden, a
		// proposal's too (which has no task configuration here).
		def.Definition = def.Definition.Redacted()
		a := &After{DefHash: def.Hash, Command: red.list(def.Definition.Command), Env: red.env(def.Definition.Env),
			Dir: red.Text(def.Definition.Dir), DependsOn: append([]string{}, def.Definition.DependsOn...), Placement: map[string]string{},
			Inputs: newInputs(def.Definition.Inputs), Outputs: def.Definition.Outputs, Mounts: def.Definition.Mounts}
		if t != nil {
			a.Placement = red.env(t.Placement)
			// Values computed from a sensitive variable are hidden
			// whole: a derived value (upper(var.token)) would not
			// match the text of the secret.
			if t.Sensitive.Command {
				a.Command = []string{Sensitive}
			}
			a.Env = hideParts(a.Env, t.Sensitive.Env, t.Sensitive.EnvKeys)
			if t.Sensitive.Dir {
				a.Dir = Sensitive
			}
			a.Placement = hideParts(a.Placement, t.Sensitive.Placement, t.Sensitive.PlacementKeys)
		}
		if tc.Proposal != nil {
			var settings coordinator.ProposalSettings
			if json.Unmarshal(tc.Proposal.Settings, &settings) == nil && settings.Placement != nil {
				a.Placement = red.env(settings.Placement)
			}
		}
		cd.After = a
	}
	if tc.Proposal != nil {
		ref := newProposalRef(*tc.Proposal)
		cd.Proposal = &ref
	}
	return cd
}
