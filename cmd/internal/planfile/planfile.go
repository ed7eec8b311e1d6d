package planfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Write writes doc to path as indented JSON with a final newline,
// atomically and synced to disk before apply may read it, with mode 0600.
// Missing folders are made; a path that holds anything but a regular file
// (an earlier plan) is refused. Its error starts "writing plan file".
func Write(path string, doc *jsonplan.Plan) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	// A plan replaces an earlier plan file, never something else: a
	// directory, a FIFO or a device at path is refused, not swapped away.
	if fi, err := os.Stat(path); err == nil {
		if err := regularfile.Check(path, fi.Mode()); err != nil {
			return fmt.Errorf("writing plan file: %w: give --out the path of a file", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing plan file: %w", err)
	}
	// renameio syncs the file before it renames it into place: a crash
	// leaves the old plan or the whole new one, never a torn one. Mode 0600
	// as before: a plan may name what only its user should read.
	if err := renameio.WriteFile(path, append(b, '\n'), 0o600, renameio.WithStaticPermissions(0o600)); err != nil {
		return fmt.Errorf("writing plan file: %w", err)
	}
	return nil
}

// MaxBytes is the most Read reads of a saved plan (docs/cli.md, "wdc
// plan"): the plan of 10,000 tasks is about 5 MB.
const MaxBytes = 128 << 20

// Read reads a saved plan: a regular file of at most MaxBytes, opened
// without blocking. Errors say what is wrong with the file: it cannot be
// read, is not a regular file, is too large, is not a plan, or has another
// major format version than jsonplan.FormatVersion.
func Read(path string) (*jsonplan.Plan, error) {
	b, err := regularfile.Read(path, MaxBytes)
	var notRegular *regularfile.NotRegularError
	var tooLarge *regularfile.TooLargeError
	switch {
	case errors.As(err, &notRegular), errors.As(err, &tooLarge):
		return nil, fmt.Errorf("plan file %w", err)
	case err != nil:
		return nil, fmt.Errorf("reading plan file: %w", err)
	}
	var doc jsonplan.Plan
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("plan file %s is not a wdc plan (%v): write one with wdc plan --out FILE", path, err)
	}
	if doc.FormatVersion == "" {
		return nil, fmt.Errorf("plan file %s is not a wdc plan (no format_version): write one with wdc plan --out FILE", path)
	}
	if major(doc.FormatVersion) != major(jsonplan.FormatVersion) {
		return nil, fmt.Errorf("plan file %s has format version %s; this wdc reads %s: make the plan again with this wdc", path, doc.FormatVersion, jsonplan.FormatVersion)
	}
	return &doc, nil
}

func major(v string) string {
	if i := strings.IndexByte(v, '.'); i >= 0 {
		return v[:i]
	}
	return v
}

// CheckFresh refuses a saved plan that went stale: written by another wdc
// than wdcVersion, computed from other configuration files or variable
// values than cfg's (the values of sensitive variables compared by their
// keyed hashes under the hash key of the plan's state, which stateKey
// returns once the version and the configuration are checked: nil for a
// plan made with no state; its error is returned as it is). What moved and
// what to do are in the error. It returns the key.
func CheckFresh(doc *jsonplan.Plan, cfg *wdchcl.Config, wdcVersion string, stateKey func() ([]byte, error)) ([]byte, error) {
	if doc.WDCVersion != wdcVersion {
		return nil, fmt.Errorf("the plan was made by wdc %s and this is wdc %s: make the plan again with this wdc (wdc plan --out FILE)", doc.WDCVersion, wdcVersion)
	}
	files, hash := jsonplan.ConfigHash(cfg)
	if hash != doc.Configuration.Hash {
		return nil, fmt.Errorf("the configuration changed since the plan was made (%s): review and save a new plan (wdc plan --out FILE)",
			configChange(doc.Configuration.Files, files))
	}
	key, err := stateKey()
	if err != nil {
		return nil, err
	}
	sensitive, err := jsonplan.SensitiveVariables(cfg, key)
	if err != nil {
		return nil, err
	}
	if changed := changedSensitive(doc.Configuration.SensitiveVariables, sensitive); len(changed) > 0 {
		what := "the value of the sensitive variable " + changed[0] + " differs from the one"
		if len(changed) > 1 {
			what = "the values of the sensitive variables " + strings.Join(changed, ", ") + " differ from those"
		}
		return nil, fmt.Errorf("%s the plan was made with (compared by their keyed hashes): give apply the same --var, --var-file and WDC_VAR_ inputs as the plan, or save a new plan", what)
	}
	varsHash, err := jsonplan.VariablesHash(cfg, doc.Configuration.VariablesSalt, key)
	if err != nil {
		return nil, err
	}
	if varsHash != doc.Configuration.VariablesHash {
		return nil, fmt.Errorf("the variable values differ from those the plan was made with: give apply the same --var, --var-file and WDC_VAR_ inputs as the plan, or save a new plan")
	}
	return key, nil
}

// configChange says how the configuration's files moved between a plan's
// record and now: the files added and removed, or, the same files, that
// their content changed (the plan keeps one hash of them all, so which one
// is not known).
func configChange(planned, now []string) string {
	var added, removed []string
	for _, f := range now {
		if !slices.Contains(planned, f) {
			added = append(added, f)
		}
	}
	for _, f := range planned {
		if !slices.Contains(now, f) {
			removed = append(removed, f)
		}
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "added: "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed: "+strings.Join(removed, ", "))
	}
	if len(parts) == 0 {
		return "the content of " + strings.Join(now, ", ") + " changed"
	}
	return strings.Join(parts, "; ")
}

// changedSensitive names, sorted, the variables var.NAME whose keyed hash
// differs between a plan's record and now (one that is sensitive only on
// one side changed the configuration, which CheckFresh reports first).
func changedSensitive(planned, now map[string]string) []string {
	var out []string
	for name, h := range now {
		if p, ok := planned[name]; ok && p != h {
			out = append(out, "var."+name)
		}
	}
	sort.Strings(out)
	return out
}

// Rebuild rebuilds the plan apply carries out from a saved plan: its
// recorded changes and worker counts; the task definitions come from cfg
// (already checked to hash the same as when the plan was made, CheckFresh)
// keyed with key (as CheckFresh), and must give the recorded definition
// hashes. An error starts "plan file:" and names the task, and the inputs
// that changed when those are why its definition did.
func Rebuild(doc *jsonplan.Plan, cfg *wdchcl.Config, key []byte) (*plan.Plan, error) {
	p := &plan.Plan{Lineage: doc.State.Lineage, Serial: doc.State.Serial, CreatedAt: doc.CreatedAt, Key: key, Definitions: plan.Definitions(cfg, key)}
	for _, pd := range doc.Pools {
		p.Pools = append(p.Pools, plan.PoolChange{Name: pd.Name, Provider: pd.Provider, Workers: pd.Workers, Tasks: pd.Tasks, Ready: pd.ReadyTasks, QueuedAtStart: pd.QueuedAtStart, Capacity: pd.Capacity, Min: pd.Min, Max: pd.Max})
	}
	for _, cd := range doc.Changes {
		tc, err := rebuildChange(cd, p.Definitions)
		if err != nil {
			return nil, err
		}
		p.Tasks = append(p.Tasks, tc)
	}
	return p, nil
}

// rebuildChange is the engine's change of one recorded change; defs are
// the configuration's definitions.
func rebuildChange(cd jsonplan.Change, defs map[string]plan.TaskDefinition) (plan.TaskChange, error) {
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
		// Its definition is the state's (engine.AttachProposals).
		if cd.After == nil {
			return tc, fmt.Errorf("plan file: %s has no definition hash", cd.Address)
		}
		tc.NewHash = cd.After.DefHash
		return tc, nil
	}
	switch tc.Action {
	case plan.ActionRun, plan.ActionReplace, plan.ActionRetry:
		def, ok := defs[cd.Address]
		if !ok || cd.After == nil || def.Hash != cd.After.DefHash {
			if ok && cd.After != nil {
				if changed := changedInputs(cd.After.Inputs, def.Definition.Inputs); len(changed) > 0 {
					return tc, fmt.Errorf("plan file: the inputs of %s changed since the plan was made (%s): save a new plan", cd.Address, strings.Join(changed, ", "))
				}
			}
			return tc, fmt.Errorf("plan file: %s no longer has the definition the plan recorded: save a new plan", cd.Address)
		}
		tc.NewHash = def.Hash
	case plan.ActionCancel:
	default:
		return tc, fmt.Errorf("plan file: %s has an unknown action %q", cd.Address, cd.Action)
	}
	return tc, nil
}

// changedInputs names the input files whose content differs between a
// saved plan's definition and the current one.
func changedInputs(planned []jsonplan.Input, now []protocol.InputFile) []string {
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
