package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/engine/supervise"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// planFormatVersion is the format_version of the plan document (`wdc plan
// --json`, `wdc plan --out`, `wdc show FILE --json`); docs/json.md and
// docs/schema/plan.schema.json describe it. A reader refuses another major
// version.
const planFormatVersion = "1.5"

// sensitiveText stands in for a sensitive variable's value in every output
// and in plan files.
const sensitiveText = "(sensitive)"

// planDoc is the plan document: what `wdc plan --json` prints and what a
// saved plan file holds. It records what the plan was computed from (the
// state's lineage and serial, hashes of the configuration files and of the
// variable values, the wdc version and the time), the changes, the
// placement preview and the summary.
type planDoc struct {
	FormatVersion string            `json:"format_version"`
	WDCVersion    string            `json:"wdc_version"`
	CreatedAt     time.Time         `json:"created_at"`
	State         stateRef          `json:"state"`
	Configuration configRef         `json:"configuration"`
	Variables     map[string]varDoc `json:"variables"`
	Replace       []string          `json:"replace"`
	Pools         []poolDoc         `json:"pools"`
	Changes       []changeDoc       `json:"changes"`
	// WaitingProposals are the proposals waiting for approval: not
	// changes, they run once approved (1.5).
	WaitingProposals []proposalRefDoc `json:"waiting_proposals"`
	Summary          summaryDoc       `json:"summary"`
}

// proposalRefDoc is a proposal as a plan names it (1.5).
type proposalRefDoc struct {
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

func newProposalRefDoc(p state.Proposal) proposalRefDoc {
	return proposalRefDoc{ID: p.ID, Address: p.Address(), Status: string(p.Status), Edge: p.Edge, Task: p.Propose,
		SourceTask: p.SourceTask, SourceAttempt: p.SourceAttempt, DecidedBy: p.DecidedBy, Earned: p.Earned}
}

// stateRef identifies the state snapshot a plan was computed from; an
// absent state is lineage "" and serial 0.
type stateRef struct {
	Lineage string `json:"lineage"`
	Serial  int64  `json:"serial"`
}

// configRef identifies the configuration and variable values a plan was
// computed from.
type configRef struct {
	// Hash is the SHA-256 of the configuration files (name and content, by
	// name).
	Hash  string   `json:"hash"`
	Files []string `json:"files"`
	// VariablesSalt and VariablesHash: SHA-256 of the salt followed by every
	// variable's name and JSON value, so sensitive values are not
	// recoverable from the file.
	VariablesSalt string `json:"variables_salt"`
	VariablesHash string `json:"variables_hash"`
}

type varDoc struct {
	// Value is the variable's value as JSON, or "(sensitive)".
	Value     json.RawMessage `json:"value"`
	Sensitive bool            `json:"sensitive"`
}

// poolDoc is one pool of the placement preview: how many workers apply
// launches for it, and why.
type poolDoc struct {
	Address  string            `json:"address"`
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	Labels   map[string]string `json:"labels"`
	Workers  int               `json:"workers"`
	// InitialWorkers is how many of them apply starts with; the
	// supervisor grows the pool from there up to Workers (1.2).
	InitialWorkers int `json:"initial_workers"`
	Tasks          int `json:"tasks"`
	Capacity       int `json:"capacity"`
	Min            int `json:"min"`
	Max            int `json:"max"`
	// LaunchPreview is what each launch of the pool creates on its
	// target, as `wdc plan` renders it (1.3): set only by plan, for pools
	// whose provider creates objects (kubernetes), omitted otherwise.
	LaunchPreview []launchObjectDoc `json:"launch_preview,omitempty"`
}

// launchObjectDoc is one object a launch creates (1.3).
type launchObjectDoc struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Body is the object as the provider sends it (YAML), every secret
	// value shown as "(sensitive)".
	Body string `json:"body"`
}

// addLaunchPreviews puts the rendered launches into the plan document's
// pools.
func addLaunchPreviews(doc *planDoc, previews []plan.LaunchPreview) {
	for _, lp := range previews {
		for i := range doc.Pools {
			if doc.Pools[i].Name != lp.Pool {
				continue
			}
			for _, o := range lp.Objects {
				doc.Pools[i].LaunchPreview = append(doc.Pools[i].LaunchPreview, launchObjectDoc{Kind: o.Kind, Name: o.Name, Body: o.Body})
			}
		}
	}
}

// changeDoc is one change: what happens to one task and why.
type changeDoc struct {
	Address string `json:"address"`
	Action  string `json:"action"`
	Symbol  string `json:"symbol"`
	Reason  string `json:"reason"`
	// Pool is the pool the task counts toward for sizing; Candidates every
	// pool that could run it, in declaration order.
	Pool       string     `json:"pool,omitempty"`
	Candidates []string   `json:"candidates"`
	Before     *beforeDoc `json:"before"`
	After      *afterDoc  `json:"after"`
	// Proposal is set on the run of an approved proposal (1.5).
	Proposal *proposalRefDoc `json:"proposal,omitempty"`
}

type beforeDoc struct {
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
	Inputs  []inputDoc       `json:"inputs,omitempty"`
	Outputs []string         `json:"outputs,omitempty"`
	Mounts  []protocol.Mount `json:"mounts,omitempty"`
}

type afterDoc struct {
	DefHash   string            `json:"def_hash"`
	Command   []string          `json:"command"`
	Env       map[string]string `json:"env"`
	Dir       string            `json:"dir"`
	DependsOn []string          `json:"depends_on"`
	Placement map[string]string `json:"placement"`
	// Inputs are the files the task reads, with the hashes apply stores
	// and checks; Outputs its output patterns; Mounts its input blocks (1.1).
	Inputs  []inputDoc       `json:"inputs,omitempty"`
	Outputs []string         `json:"outputs,omitempty"`
	Mounts  []protocol.Mount `json:"mounts,omitempty"`
}

// inputDoc is one input file of a definition.
type inputDoc struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

func newInputDocs(fs []protocol.InputFile) []inputDoc {
	var out []inputDoc
	for _, f := range fs {
		out = append(out, inputDoc{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
	}
	return out
}

type summaryDoc struct {
	WorkersToLaunch int    `json:"workers_to_launch"`
	Run             int    `json:"run"`
	Replace         int    `json:"replace"`
	Retry           int    `json:"retry"`
	Cancel          int    `json:"cancel"`
	Total           int    `json:"total"`
	HasChanges      bool   `json:"has_changes"`
	Text            string `json:"text"`
}

// newPlanDoc builds the document of p, computed from cfg with the given
// --replace targets. Sensitive variable values are replaced by
// "(sensitive)" wherever they appear.
func newPlanDoc(cfg *wdchcl.Config, p *plan.Plan, replace []string) (*planDoc, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	vars, varsHash, err := variablesDoc(cfg, hex.EncodeToString(salt))
	if err != nil {
		return nil, err
	}
	red := newRedactor(cfg)
	files, cfgHash := configHash(cfg)
	doc := &planDoc{
		FormatVersion: planFormatVersion,
		WDCVersion:    Version,
		CreatedAt:     p.CreatedAt.UTC(),
		State:         stateRef{Lineage: p.Lineage, Serial: p.Serial},
		Configuration: configRef{Hash: cfgHash, Files: files, VariablesSalt: hex.EncodeToString(salt), VariablesHash: varsHash},
		Variables:     vars,
		Replace:       append([]string{}, replace...),
		Pools:         make([]poolDoc, 0, len(p.Pools)),
		Changes:       make([]changeDoc, 0, len(p.Tasks)),

		WaitingProposals: make([]proposalRefDoc, 0, len(p.Waiting)),
	}
	for _, w := range p.Waiting {
		doc.WaitingProposals = append(doc.WaitingProposals, newProposalRefDoc(w))
	}
	provider := map[string]*wdchcl.Pool{}
	for _, pool := range cfg.Pools {
		provider[pool.Name] = pool
	}
	for _, pc := range p.Pools {
		pd := poolDoc{Address: "pool." + pc.Name, Name: pc.Name, Workers: pc.Workers, InitialWorkers: supervise.InitialWorkers(pc.Workers, pc.Min), Tasks: pc.Tasks,
			Capacity: pc.Capacity, Min: pc.Min, Max: pc.Max, Labels: map[string]string{}}
		if pool := provider[pc.Name]; pool != nil {
			pd.Provider = pool.Provider
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
		cd := changeDoc{Address: tc.Address, Action: string(tc.Action), Symbol: tc.Action.Symbol(), Reason: tc.Reason,
			Pool: tc.Pool, Candidates: append([]string{}, tc.Candidates...)}
		if tc.PriorStatus != "" {
			cd.Before = &beforeDoc{Status: string(tc.PriorStatus), DefHash: tc.OldHash}
			var old protocol.Definition
			if len(tc.OldSpec) > 0 && json.Unmarshal(tc.OldSpec, &old) == nil {
				cd.Before.Command, cd.Before.Env, cd.Before.Dir = red.list(old.Command), red.env(old.Env), red.text(old.Dir)
				cd.Before.DependsOn = old.DependsOn
				cd.Before.Inputs, cd.Before.Outputs, cd.Before.Mounts = newInputDocs(old.Inputs), old.Outputs, old.Mounts
				if t := tasks[tc.Address]; t != nil {
					if t.Sensitive.Command {
						cd.Before.Command = []string{sensitiveText}
					}
					cd.Before.Env = hideParts(cd.Before.Env, t.Sensitive.Env, t.Sensitive.EnvKeys)
					if t.Sensitive.Dir {
						cd.Before.Dir = sensitiveText
					}
				}
			}
		}
		if def, ok := p.Definitions[tc.Address]; ok && tc.Action != plan.ActionCancel {
			a := &afterDoc{DefHash: def.Hash, Command: red.list(def.Definition.Command), Env: red.env(def.Definition.Env),
				Dir: red.text(def.Definition.Dir), DependsOn: append([]string{}, def.Definition.DependsOn...), Placement: map[string]string{},
				Inputs: newInputDocs(def.Definition.Inputs), Outputs: def.Definition.Outputs, Mounts: def.Definition.Mounts}
			if t := tasks[tc.Address]; t != nil {
				a.Placement = red.env(t.Placement)
				// Values computed from a sensitive variable are hidden
				// whole: a derived value (upper(var.token)) would not
				// match the text of the secret.
				if t.Sensitive.Command {
					a.Command = []string{sensitiveText}
				}
				a.Env = hideParts(a.Env, t.Sensitive.Env, t.Sensitive.EnvKeys)
				if t.Sensitive.Dir {
					a.Dir = sensitiveText
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
			ref := newProposalRefDoc(*tc.Proposal)
			cd.Proposal = &ref
		}
		doc.Changes = append(doc.Changes, cd)
	}
	s := p.Summary()
	doc.Summary = summaryDoc{WorkersToLaunch: s.WorkersToLaunch, Run: s.Run, Replace: s.Replace, Retry: s.Retry,
		Cancel: s.Cancel, Total: s.Total, HasChanges: p.HasChanges(), Text: s.String()}
	return doc, nil
}

// configHash returns the configuration file names (sorted) and the SHA-256
// of their names and contents. Variable files are not included: their
// values are covered by the variables hash.
func configHash(cfg *wdchcl.Config) ([]string, string) {
	var names []string
	for name := range cfg.Files {
		if strings.HasSuffix(name, wdchcl.FileSuffix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	base := make([]string, len(names))
	for i, name := range names {
		base[i] = filepath.Base(name)
	}
	sort.Strings(base)
	byBase := map[string]string{}
	for _, name := range names {
		byBase[filepath.Base(name)] = name
	}
	for _, b := range base {
		content := cfg.Files[byBase[b]].Bytes
		fmt.Fprintf(h, "%s\x00%d\x00", b, len(content))
		h.Write(content)
	}
	return base, hex.EncodeToString(h.Sum(nil))
}

// variablesDoc returns every variable's value for the document (sensitive
// ones as "(sensitive)") and the salted hash over all of their values.
func variablesDoc(cfg *wdchcl.Config, salt string) (map[string]varDoc, string, error) {
	names := make([]string, 0, len(cfg.Variables))
	for name := range cfg.Variables {
		names = append(names, name)
	}
	sort.Strings(names)
	out := map[string]varDoc{}
	h := sha256.New()
	h.Write([]byte(salt))
	for _, name := range names {
		v := cfg.Variables[name]
		raw, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			return nil, "", fmt.Errorf("variable %s: %w", name, err)
		}
		fmt.Fprintf(h, "\x00%s\x00%s", name, raw)
		if v.Sensitive {
			raw, _ = json.Marshal(sensitiveText)
		}
		out[name] = varDoc{Value: raw, Sensitive: v.Sensitive}
	}
	return out, hex.EncodeToString(h.Sum(nil)), nil
}

// redactor replaces the text of sensitive variable values.
type redactor struct{ secrets []string }

func newRedactor(cfg *wdchcl.Config) *redactor {
	r := &redactor{}
	for _, v := range cfg.Variables {
		if !v.Sensitive || v.Value.IsNull() || !v.Value.IsKnown() {
			continue
		}
		raw, err := ctyjson.Marshal(v.Value, v.Value.Type())
		if err != nil {
			continue
		}
		var any interface{}
		if json.Unmarshal(raw, &any) == nil {
			r.collect(any)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

func (r *redactor) collect(v interface{}) {
	switch x := v.(type) {
	case string:
		if x != "" {
			r.secrets = append(r.secrets, x)
		}
	case float64, bool:
		r.secrets = append(r.secrets, fmt.Sprint(x))
	case []interface{}:
		for _, e := range x {
			r.collect(e)
		}
	case map[string]interface{}:
		for _, e := range x {
			r.collect(e)
		}
	}
}

func (r *redactor) text(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, sensitiveText)
	}
	return s
}

func (r *redactor) list(items []string) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = r.text(s)
	}
	return out
}

// env redacts the keys and values of a string map (env, labels,
// placement).
func (r *redactor) env(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[r.text(k)] = r.text(v)
	}
	return out
}

// hiddenMap stands in for a map computed from a sensitive value: keys and
// values may both give it away, so one "(sensitive)" entry replaces them.
func hiddenMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return map[string]string{}
	}
	return map[string]string{sensitiveText: sensitiveText}
}

// hideParts hides the sensitive parts of a map: all of it (whole) or the
// values of the named keys.
func hideParts(m map[string]string, whole bool, keys map[string]bool) map[string]string {
	if whole {
		return hiddenMap(m)
	}
	if len(keys) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if keys[k] {
			v = sensitiveText
		}
		out[k] = v
	}
	return out
}

// writePlanFile writes doc to path as indented JSON, atomically and synced
// to disk before apply may read it.
func writePlanFile(path string, doc *planDoc) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	// renameio syncs the file before it renames it into place: a crash
	// leaves the old plan or the whole new one, never a torn one. Mode 0600
	// as before: a plan may name what only its user should read.
	if err := renameio.WriteFile(path, append(b, '\n'), 0o600, renameio.WithStaticPermissions(0o600)); err != nil {
		return fmt.Errorf("writing plan file: %w", err)
	}
	return nil
}

// readPlanFile reads a saved plan. Errors say what is wrong with the file:
// not a plan, another format version, another wdc version.
func readPlanFile(path string) (*planDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading plan file: %w", err)
	}
	var doc planDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("plan file %s is not a wdc plan (%v): write one with wdc plan --out FILE", path, err)
	}
	if doc.FormatVersion == "" {
		return nil, fmt.Errorf("plan file %s is not a wdc plan (no format_version): write one with wdc plan --out FILE", path)
	}
	if major(doc.FormatVersion) != major(planFormatVersion) {
		return nil, fmt.Errorf("plan file %s has format version %s; this wdc reads %s: make the plan again with this wdc", path, doc.FormatVersion, planFormatVersion)
	}
	return &doc, nil
}

func major(v string) string {
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// checkPlanFresh refuses a saved plan that went stale: written by another
// wdc, computed from other configuration files or variable values. What
// moved and what to do are in the error.
func checkPlanFresh(doc *planDoc, cfg *wdchcl.Config) error {
	if doc.WDCVersion != Version {
		return fmt.Errorf("the plan was made by wdc %s and this is wdc %s: make the plan again with this wdc (wdc plan --out FILE)", doc.WDCVersion, Version)
	}
	files, hash := configHash(cfg)
	if hash != doc.Configuration.Hash {
		return fmt.Errorf("the configuration changed since the plan was made (plan: %s; now: %s): review and save a new plan (wdc plan --out FILE)",
			strings.Join(doc.Configuration.Files, ", "), strings.Join(files, ", "))
	}
	_, varsHash, err := variablesDoc(cfg, doc.Configuration.VariablesSalt)
	if err != nil {
		return err
	}
	if varsHash != doc.Configuration.VariablesHash {
		return fmt.Errorf("the variable values differ from those the plan was made with: give apply the same --var, --var-file and WDC_VAR_ inputs as the plan, or save a new plan")
	}
	return nil
}

// planFromDoc rebuilds the plan apply carries out from a saved plan: its
// recorded changes and worker counts; the task definitions come from cfg
// (already checked to hash the same as when the plan was made) and must
// give the recorded definition hashes.
func planFromDoc(doc *planDoc, cfg *wdchcl.Config) (*plan.Plan, error) {
	p := &plan.Plan{Lineage: doc.State.Lineage, Serial: doc.State.Serial, CreatedAt: doc.CreatedAt, Definitions: plan.Definitions(cfg)}
	for _, pd := range doc.Pools {
		p.Pools = append(p.Pools, plan.PoolChange{Name: pd.Name, Provider: pd.Provider, Workers: pd.Workers, Tasks: pd.Tasks, Capacity: pd.Capacity, Min: pd.Min, Max: pd.Max})
	}
	for _, cd := range doc.Changes {
		tc := plan.TaskChange{Address: cd.Address, Action: plan.Action(cd.Action), Reason: cd.Reason, Pool: cd.Pool, Candidates: cd.Candidates}
		if cd.Before != nil {
			tc.PriorStatus = state.TaskStatus(cd.Before.Status)
			tc.OldHash = cd.Before.DefHash
		}
		_, isProposal := coordinator.ProposalID(cd.Address)
		switch tc.Action {
		case plan.ActionRun, plan.ActionRetry, plan.ActionReplace:
			if !isProposal {
				break
			}
			// Its definition is the state's (plan.AttachProposals).
			if cd.After == nil {
				return nil, fmt.Errorf("plan file: %s has no definition hash", cd.Address)
			}
			tc.NewHash = cd.After.DefHash
			p.Tasks = append(p.Tasks, tc)
			continue
		}
		switch tc.Action {
		case plan.ActionRun, plan.ActionReplace, plan.ActionRetry:
			def, ok := p.Definitions[cd.Address]
			if !ok || cd.After == nil || def.Hash != cd.After.DefHash {
				if ok && cd.After != nil {
					if changed := changedInputs(cd.After.Inputs, def.Definition.Inputs); len(changed) > 0 {
						return nil, fmt.Errorf("plan file: the inputs of %s changed since the plan was made (%s): save a new plan", cd.Address, strings.Join(changed, ", "))
					}
				}
				return nil, fmt.Errorf("plan file: %s no longer has the definition the plan recorded: save a new plan", cd.Address)
			}
			tc.NewHash = def.Hash
		case plan.ActionCancel:
		default:
			return nil, fmt.Errorf("plan file: %s has an unknown action %q", cd.Address, cd.Action)
		}
		p.Tasks = append(p.Tasks, tc)
	}
	return p, nil
}

// changedInputs names the input files whose content differs between a
// saved plan's definition and the current one.
func changedInputs(planned []inputDoc, now []protocol.InputFile) []string {
	cur := map[string]string{}
	for _, f := range now {
		cur[f.Path] = f.SHA256
	}
	var out []string
	for _, f := range planned {
		switch h, ok := cur[f.Path]; {
		case !ok:
			out = append(out, f.Path+" is gone")
		case h != f.SHA256:
			out = append(out, f.Path+" changed")
		}
		delete(cur, f.Path)
	}
	for p := range cur {
		out = append(out, p+" is new")
	}
	sort.Strings(out)
	return out
}
