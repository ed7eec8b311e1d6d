package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/placement"
	"github.com/wdc-dev/wdc/engine/supervise"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// Action is what a plan does to one object. The set is closed.
type Action string

const (
	// ActionLaunch starts workers for a pool ("+").
	ActionLaunch Action = "launch"
	// ActionRun runs a task that has no result yet ("+").
	ActionRun Action = "run"
	// ActionReplace runs a task again because its definition hash changed,
	// a dependency is replaced, or --replace asked for it ("-/+").
	ActionReplace Action = "replace"
	// ActionRetry runs a task again with a fresh retry budget after it
	// failed, was cancelled, or lost its lease ("~").
	ActionRetry Action = "retry"
	// ActionCancel cancels an unfinished task that is no longer in the
	// configuration ("-").
	ActionCancel Action = "cancel"
)

// Symbol returns the action's plan symbol, as in Terraform's plan output.
func (a Action) Symbol() string {
	switch a {
	case ActionLaunch, ActionRun:
		return "+"
	case ActionReplace:
		return "-/+"
	case ActionRetry:
		return "~"
	case ActionCancel:
		return "-"
	}
	return "?"
}

// TaskChange is the plan's decision for one task instance.
type TaskChange struct {
	// Address is "task.NAME" or "task.NAME[INDEX]".
	Address string
	Action  Action
	// Reason is a short phrase saying why, e.g. "new task" or
	// "definition changed".
	Reason string
	// PriorStatus is the task's status in the state, "" when it has none.
	PriorStatus state.TaskStatus
	// OldHash and NewHash are the full def_hashes before and after; OldHash
	// is "" for a new task, NewHash "" for a cancelled one.
	OldHash, NewHash string
	// OldSpec is the canonical definition (protocol.Definition as JSON) the
	// state recorded, so a replace can show what changed; nil when none.
	OldSpec []byte
	// Pool is the name of the pool the task counts toward for sizing (the
	// first pool in declaration order that can run it); "" for a cancel.
	Pool string
	// Candidates names every pool, in declaration order, that can run it.
	Candidates []string
	// Proposal is set for the run of an approved proposal (Address
	// "proposal.N"): the task it renders, where it came from and who
	// approved it.
	Proposal *state.Proposal
}

// PoolChange is the plan's decision for one pool: how many workers apply
// launches for it and why.
type PoolChange struct {
	// Name is the pool's name; its address is "pool."+Name.
	Name string
	// Provider is the pool's provider; an external pool's workers join by
	// themselves instead of being launched.
	Provider string
	// Workers is the number of workers the pool gets:
	// clamp(ceil(Tasks / Capacity), Min, Max) when Tasks > 0, else 0.
	// Apply launches them, or for an external pool waits for them to join.
	Workers int
	// Tasks is the number of planned task runs counted toward this pool.
	Tasks int
	// Ready is how many of them can start as soon as apply does: none of
	// their dependencies runs in this plan.
	Ready int
	// QueuedAtStart is how many planned task runs this pool can run that
	// can start as soon as apply does: Ready, and the ready ones counted
	// toward an earlier pool that this one can run too. Each is queued for
	// every pool that can run it, and each of those pools' supervisors
	// sees it at their first step: apply starts the pool with
	// supervise.InitialWorkers(Workers, Min, QueuedAtStart, Capacity)
	// workers.
	QueuedAtStart      int
	Capacity, Min, Max int
}

// Plan is the value `wdc plan` computes and `wdc apply` carries out: the
// changes to make, and what they were computed from.
type Plan struct {
	// Lineage and Serial identify the state snapshot the plan was computed
	// from; an absent state is lineage "" and serial 0.
	Lineage string
	Serial  int64
	// CreatedAt is the `now` the plan was computed at.
	CreatedAt time.Time
	// Pools holds one entry per pool, in declaration order, including pools
	// that launch nothing.
	Pools []PoolChange
	// Tasks holds the changes in configuration order, then cancellations in
	// address order. Tasks left as they are do not appear.
	Tasks []TaskChange
	// Definitions maps each configured task address, and each approved
	// proposal's that the plan runs, to its canonical definition and
	// def_hash, as apply will record them.
	Definitions map[string]TaskDefinition
	// Waiting lists the proposals waiting for approval, by id: they run in
	// an apply after they are approved (wdc approve).
	Waiting []state.Proposal
	// Key is the state's hash key the definitions' sensitive parts are
	// keyed with (nil for a plan made with no state). It is no secret
	// that unlocks anything, but it is never shown: without it a keyed
	// hash a plan document shows cannot be tested against guesses.
	Key []byte `json:"-"`
}

// TaskDefinition is a task instance's canonical definition and its hash.
type TaskDefinition struct {
	Definition protocol.Definition
	Hash       string
	// Err is set when an input file could not be read to hash it; the
	// plan reports it as an error.
	Err error
}

// Summary counts a plan's changes.
type Summary struct {
	WorkersToLaunch int
	// WorkersAtStart is how many of WorkersToLaunch apply starts with
	// (PoolChange.InitialWorkers of each pool): the supervisors grow the
	// pools from there as work waits.
	WorkersAtStart                     int
	Run, Replace, Retry, Cancel, Total int
}

// Summary returns the counts of p's changes.
func (p *Plan) Summary() Summary {
	var s Summary
	for _, pc := range p.Pools {
		if pc.Provider != providers.External {
			s.WorkersToLaunch += pc.Workers
			s.WorkersAtStart += pc.InitialWorkers()
		}
	}
	for _, tc := range p.Tasks {
		switch tc.Action {
		case ActionRun:
			s.Run++
		case ActionReplace:
			s.Replace++
		case ActionRetry:
			s.Retry++
		case ActionCancel:
			s.Cancel++
		}
	}
	s.Total = s.Run + s.Replace + s.Retry + s.Cancel
	return s
}

// HasChanges reports whether applying p would change anything.
func (p *Plan) HasChanges() bool {
	s := p.Summary()
	return s.Total > 0 || s.WorkersToLaunch > 0
}

// String renders the summary line of docs/design.md §6, zeros left out:
// "Plan: 2 workers to launch, 3 tasks to run, 1 to replace, 1 to retry, 1 to cancel."
// or "No changes.". Pools that start smaller than they may grow make the
// first part "up to 3 workers (1 at start) to launch".
func (s Summary) String() string {
	var parts []string
	if s.WorkersToLaunch > 0 {
		workers := fmt.Sprintf("%d %s", s.WorkersToLaunch, plural.Word(s.WorkersToLaunch, "worker", "workers"))
		if s.WorkersAtStart < s.WorkersToLaunch {
			workers = fmt.Sprintf("up to %s (%d at start)", workers, s.WorkersAtStart)
		}
		parts = append(parts, workers+" to launch")
	}
	first := true
	for _, item := range []struct {
		n    int
		verb string
	}{{s.Run, "run"}, {s.Replace, "replace"}, {s.Retry, "retry"}, {s.Cancel, "cancel"}} {
		if item.n == 0 {
			continue
		}
		if first {
			parts = append(parts, fmt.Sprintf("%d %s to %s", item.n, plural.Word(item.n, "task", "tasks"), item.verb))
			first = false
		} else {
			parts = append(parts, fmt.Sprintf("%d to %s", item.n, item.verb))
		}
	}
	if len(parts) == 0 {
		return "No changes."
	}
	return "Plan: " + strings.Join(parts, ", ") + "."
}

// Options are the user's choices that shape a plan.
type Options struct {
	// Replace lists addresses (or bare task names) of tasks to run again
	// even though they succeeded with their current definition. A bare name
	// or "task.NAME" of a counted task means every instance.
	Replace []string
}

// New computes the changes that would bring snap to what cfg declares.
// It is pure: it reads only its arguments. cfg must have been loaded
// without errors. The diagnostics carry errors for --replace addresses that
// name no configured task, and placement errors (a task no pool can run).
func New(cfg *wdchcl.Config, snap *state.Snapshot, now time.Time, opts Options) (*Plan, hcl.Diagnostics) {
	pools := newPoolIndex(cfg.Pools)
	diags := checkPlacement(cfg, pools)

	replace, rdiags := resolveReplace(cfg, opts.Replace)
	diags = append(diags, rdiags...)

	p := &Plan{
		Lineage:     snap.Lineage,
		Serial:      snap.Serial,
		CreatedAt:   now,
		Key:         snap.HashKey,
		Definitions: Definitions(cfg, snap.HashKey),
	}
	for _, t := range cfg.Tasks {
		if err := p.Definitions[t.Address()].Err; err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unreadable input",
				Detail: err.Error() + ".", Subject: t.InputsRange.Ptr()})
		}
	}

	prior := make(map[string]*state.Task, len(snap.Tasks))
	for i := range snap.Tasks {
		prior[snap.Tasks[i].Address] = &snap.Tasks[i]
	}
	leases := latestLeases(snap)

	configured := make(map[string]bool, len(cfg.Tasks))
	changes := make(map[string]*TaskChange, len(cfg.Tasks))
	decided := make([]TaskChange, 0, len(cfg.Tasks)) // what changes points into
	// cfg.Tasks is not necessarily in dependency order; decide in
	// topological order so a replaced dependency is known before its
	// dependents are looked at.
	for _, t := range topoOrder(cfg.Tasks) {
		addr := t.Address()
		configured[addr] = true
		tc, changed := taskChange(t, p.Definitions[addr], prior[addr], leases[addr], pools, changes, replace[addr], now)
		if changed {
			decided = append(decided, tc)
			changes[addr] = &decided[len(decided)-1]
		}
	}

	if len(changes) > 0 {
		p.Tasks = make([]TaskChange, 0, len(changes))
	}
	for _, t := range cfg.Tasks {
		if c, ok := changes[t.Address()]; ok {
			p.Tasks = append(p.Tasks, *c)
		}
	}
	runs, pdiags := p.proposalChanges(cfg, snap, prior, leases, pools, configured, replace, now)
	p.Tasks = append(p.Tasks, runs...)
	diags = append(diags, pdiags...)
	p.Tasks = append(p.Tasks, cancellations(snap, configured)...)
	p.Pools = poolChanges(cfg.Pools, p.Tasks, p.Definitions)
	return p, diags
}

// taskChange decides what the plan does with configured task t, whose
// definition is def: old is its record in the state (nil for a new task),
// lease its latest lease, changes what was decided for the tasks before it
// in dependency order, replace whether --replace names it. changed is
// false when the task is in its desired state (succeeded with this
// definition, nothing upstream replaced or run).
func taskChange(t *wdchcl.Task, def TaskDefinition, old *state.Task, lease *state.Lease, pools *poolIndex,
	changes map[string]*TaskChange, replace bool, now time.Time) (tc TaskChange, changed bool) {
	tc = TaskChange{Address: t.Address(), NewHash: def.Hash}
	for _, pool := range pools.candidates(t.Placement) {
		tc.Candidates = append(tc.Candidates, pool.Name)
	}
	if len(tc.Candidates) > 0 {
		tc.Pool = tc.Candidates[0]
	}
	var upstream, replacedUp, newUp []string
	for _, dep := range t.DependsOn {
		if c, ok := changes[dep]; ok && (c.Action == ActionReplace || c.Action == ActionRun) {
			upstream = append(upstream, dep)
			if c.Action == ActionReplace {
				replacedUp = append(replacedUp, dep)
			} else {
				newUp = append(newUp, dep)
			}
		}
	}
	if old == nil {
		tc.Action, tc.Reason = ActionRun, "new task"
		return tc, true
	}
	tc.PriorStatus = old.Status
	tc.OldHash = old.DefHash
	tc.OldSpec = old.Spec
	switch {
	case old.DefHash != def.Hash || (len(upstream) > 0 && old.Status == state.TaskSucceeded):
		tc.Action = ActionReplace
		var why []string
		if string(old.Spec) != string(def.Definition.Canonical()) || len(upstream) == 0 {
			if files := inputChanges(old.Spec, def.Definition); len(files) > 0 {
				why = append(why, "definition changed: "+strings.Join(files, ", "))
			} else {
				why = append(why, "definition changed")
			}
		}
		if len(replacedUp) > 0 {
			why = append(why, fmt.Sprintf("depends on %s, which %s replaced", strings.Join(replacedUp, ", "), plural.Word(len(replacedUp), "is", "are")))
		}
		if len(newUp) > 0 {
			why = append(why, fmt.Sprintf("depends on %s, which %s to run", strings.Join(newUp, ", "), plural.Word(len(newUp), "is", "are")))
		}
		tc.Reason = strings.Join(why, "; ")
	case replace && old.Status == state.TaskSucceeded:
		tc.Action, tc.Reason = ActionReplace, "replacement requested with --replace"
	case old.Status == state.TaskSucceeded:
		return tc, false // in its desired state
	case old.Status == state.TaskFailed:
		tc.Action, tc.Reason = ActionRetry, "failed earlier"+suffix(old.LastError)
	case old.Status == state.TaskCancelled:
		tc.Action, tc.Reason = ActionRetry, "cancelled earlier"+suffix(old.LastError)
	case old.Status == state.TaskRunning:
		tc.Action, tc.Reason = ActionRetry, runningReason(lease, now)
	case old.LastError != "": // queued again after an attempt that did not succeed (revoked, lost, failed)
		tc.Action, tc.Reason = ActionRetry, "an earlier apply stopped before it finished: "+old.LastError
	case lease != nil && lease.Status == state.LeaseReleased:
		// Queued again after its attempt was handed back: an
		// interrupted apply gave it up; it starts over.
		tc.Action, tc.Reason = ActionRetry, interruptedReason(lease)
	default: // pending or queued: an earlier apply stopped before running it
		tc.Action, tc.Reason = ActionRun, fmt.Sprintf("left %s by an earlier apply that stopped before running it", old.Status)
	}
	return tc, true
}

// cancellations are the unfinished tasks of the state that are no longer
// configured, by address.
func cancellations(snap *state.Snapshot, configured map[string]bool) []TaskChange {
	var cancels []TaskChange
	for i := range snap.Tasks {
		old := &snap.Tasks[i]
		if configured[old.Address] || old.Status.Finished() {
			continue
		}
		cancels = append(cancels, TaskChange{
			Address:     old.Address,
			Action:      ActionCancel,
			Reason:      "no longer in the configuration",
			PriorStatus: old.Status,
			OldHash:     old.DefHash,
		})
	}
	sort.Slice(cancels, func(i, j int) bool { return cancels[i].Address < cancels[j].Address })
	return cancels
}

// InitialWorkers is how many workers apply starts pc with
// (supervise.InitialWorkers).
func (pc PoolChange) InitialWorkers() int {
	return supervise.InitialWorkers(pc.Workers, pc.Min, pc.QueuedAtStart, pc.Capacity)
}

// poolChanges sizes every pool, in declaration order, for the tasks
// counted toward it (WorkersFor), and counts those of them ready at the
// start (none of their dependencies, in defs, is planned to run) and the
// ready tasks it can run, those counted toward an earlier pool among them.
// A pool with no work launches none.
func poolChanges(pools []*wdchcl.Pool, tasks []TaskChange, defs map[string]TaskDefinition) []PoolChange {
	runs := map[string]bool{}
	for _, tc := range tasks {
		if tc.Action != ActionCancel {
			runs[tc.Address] = true
		}
	}
	counted, ready, queued := map[string]int{}, map[string]int{}, map[string]int{}
	for _, tc := range tasks {
		if tc.Action == ActionCancel || tc.Pool == "" {
			continue
		}
		counted[tc.Pool]++
		if slices.ContainsFunc(defs[tc.Address].Definition.DependsOn, func(dep string) bool { return runs[dep] }) {
			continue
		}
		ready[tc.Pool]++
		// A ready task is queued for every pool that can run it, and
		// each of their supervisors sees it at the first step.
		for _, name := range tc.Candidates {
			queued[name]++
		}
	}
	var out []PoolChange
	for _, pool := range pools {
		n := counted[pool.Name]
		out = append(out, PoolChange{
			Name:          pool.Name,
			Provider:      pool.Provider,
			Tasks:         n,
			Ready:         ready[pool.Name],
			QueuedAtStart: queued[pool.Name],
			Workers:       WorkersFor(n, pool.Capacity, pool.Min, pool.Max),
			Capacity:      pool.Capacity,
			Min:           pool.Min,
			Max:           pool.Max,
		})
	}
	return out
}

// proposalChanges are the runs of approved proposals, by id: an approved
// proposal runs like a task whose definition never changes (it was
// rendered when it was proposed), until its run finishes — succeeded,
// failed or cancelled; replace (--replace proposal.N) runs a finished one
// again. Pending proposals go to p.Waiting. configured gets the addresses
// of those it keeps (so they are not cancelled). An approved proposal no
// pool can run, or whose proposed task left the configuration, is left
// out with a warning. A --replace of a proposal that is not approved is
// an error.
func (p *Plan) proposalChanges(cfg *wdchcl.Config, snap *state.Snapshot, prior map[string]*state.Task, leases map[string]*state.Lease,
	pools *poolIndex, configured, replace map[string]bool, now time.Time) ([]TaskChange, hcl.Diagnostics) {
	var out []TaskChange
	var diags hcl.Diagnostics
	approved := map[string]bool{}
	for i := range snap.Proposals {
		prop := snap.Proposals[i]
		addr := prop.Address()
		switch {
		case prop.Status == state.ProposalPending:
			p.Waiting = append(p.Waiting, prop)
			continue
		case !prop.Status.Approved():
			continue
		}
		approved[addr] = true
		old, ran := prior[addr]
		if ran && old.Status.Finished() && !replace[addr] {
			configured[addr] = true
			continue // its run is over; --replace runs it again
		}
		if cfg.ProposedTask(strings.TrimPrefix(prop.Propose, "task.")) == nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Approved proposal will not run",
				Detail: fmt.Sprintf("%s was approved, but %s is no longer a proposed_only task of the configuration, so it does not run (declare it again to run it).",
					addr, prop.Propose)})
			continue
		}
		def, err := proposalDefinition(prop)
		if err != nil {
			def.Err = err
		}
		if len(def.Definition.Sensitive) > 0 {
			// The state keeps no sensitive value: the run needs the
			// configuration to render them again, as they were.
			if _, err := coordinator.RevealProposal(prop, cfg, snap.HashKey); err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Approved proposal will not run", Detail: err.Error() + "."})
				configured[addr] = true // not cancelled: it runs once the configuration gives its values again
				continue
			}
		}
		configured[addr] = true
		tc := TaskChange{Address: addr, NewHash: prop.DefHash, Proposal: &snap.Proposals[i]}
		var settings coordinator.ProposalSettings
		if err := json.Unmarshal(prop.Settings, &settings); err == nil {
			for _, pool := range pools.candidates(settings.Placement) {
				tc.Candidates = append(tc.Candidates, pool.Name)
			}
		}
		if len(tc.Candidates) == 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Approved proposal cannot run",
				Detail: fmt.Sprintf("%s (%s) was approved, but no pool's labels satisfy its placement %s; it runs once a pool does.",
					addr, prop.Propose, placement.Text(settings.Placement))})
			continue
		}
		tc.Pool = tc.Candidates[0]
		origin := coordinator.ProposalOrigin(prop)
		switch {
		case !ran:
			tc.Action, tc.Reason = ActionRun, origin
		default:
			tc.PriorStatus, tc.OldHash, tc.OldSpec = old.Status, old.DefHash, old.Spec
			switch {
			case old.Status == state.TaskSucceeded:
				tc.Action, tc.Reason = ActionReplace, origin+"; replacement requested with --replace"
			case old.Status == state.TaskFailed:
				tc.Action, tc.Reason = ActionRetry, origin+"; failed earlier"+suffix(old.LastError)+"; --replace runs it again"
			case old.Status == state.TaskCancelled:
				tc.Action, tc.Reason = ActionRetry, origin+"; cancelled earlier"+suffix(old.LastError)+"; --replace runs it again"
			case old.Status == state.TaskRunning:
				tc.Action, tc.Reason = ActionRetry, origin+"; "+runningReason(leases[addr], now)
			default:
				tc.Action, tc.Reason = ActionRun, origin+fmt.Sprintf("; left %s by an earlier apply", old.Status)
			}
		}
		p.Definitions[addr] = def
		out = append(out, tc)
	}
	for addr := range replace {
		if _, ok := coordinator.ProposalID(addr); ok && !approved[addr] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid --replace address",
				Detail: fmt.Sprintf("%s is not an approved proposal in the state (wdc proposals list shows them).", addr)})
		}
	}
	return out, diags
}

// WorkersFor returns how many workers a pool with the given capacity, min
// and max launches for tasks planned runs: clamp(ceil(tasks/capacity), min,
// max), or 0 when tasks is 0 (a pool with no work launches none).
func WorkersFor(tasks, capacity, min, max int) int {
	if tasks <= 0 {
		return 0
	}
	n := supervise.Fill(tasks, capacity)
	if n < min {
		n = min
	}
	if n > max {
		n = max
	}
	return n
}

// Definitions computes the canonical definition and def_hash of every task
// instance of cfg. Dependencies are hashed first, so each hash covers the
// hashes of everything upstream of it. The parts computed from a sensitive
// variable are covered by their keyed hash under key, the state's hash
// key (protocol.Definition.Protect): nil for a plan made with no state.
func Definitions(cfg *wdchcl.Config, key []byte) map[string]TaskDefinition {
	out := make(map[string]TaskDefinition, len(cfg.Tasks))
	hashes := make(map[string]string, len(cfg.Tasks))
	files := map[string]protocol.InputFile{} // by path: a file is hashed once
	for _, t := range topoOrder(cfg.Tasks) {
		d := protocol.Definition{
			Command:   t.Command,
			Env:       t.Env,
			Dir:       protocol.DefinitionDir(cfg.Dir, t.Dir),
			DependsOn: t.DependsOn,
			Outputs:   t.Outputs,
		}
		var ferr error
		for _, p := range t.Inputs {
			f, ok := files[p]
			if !ok {
				full := filepath.Join(cfg.Dir, filepath.FromSlash(p))
				h, size, err := artifact.HashFile(full)
				if err != nil && ferr == nil {
					ferr = fmt.Errorf("input %s of %s: %w", p, t.Address(), err)
				}
				f = protocol.InputFile{Path: p, SHA256: h, Size: size}
				if fi, err := os.Stat(full); err == nil && fi.Mode()&0o111 != 0 {
					f.Executable = true
				}
				files[p] = f
			}
			d.Inputs = append(d.Inputs, f)
		}
		for _, m := range t.Mounts {
			d.Mounts = append(d.Mounts, protocol.Mount{Name: m.Name, From: m.From, Output: m.Output})
		}
		if !t.DirSet && (len(d.Inputs) > 0 || len(d.Outputs) > 0 || len(d.Mounts) > 0) {
			d.Dir = "" // it runs in its attempt's directory
		}
		d = d.Protect(key, t.Sensitive.From)
		h := protocol.DefinitionHash(d, hashes)
		hashes[t.Address()] = h
		out[t.Address()] = TaskDefinition{Definition: d, Hash: h, Err: ferr}
	}
	return out
}

// Rekey computes the plan's definitions and definition hashes again with
// the state's hash key key, and makes the hashes its task changes carry
// them: for a plan made with no state (which had no key) that the apply
// about to record it carries out against the state it just created. The
// input files are not read again; the plan's Key becomes key.
func Rekey(p *Plan, cfg *wdchcl.Config, key []byte) {
	hashes := make(map[string]string, len(p.Definitions))
	for _, t := range topoOrder(cfg.Tasks) {
		td, ok := p.Definitions[t.Address()]
		if !ok {
			continue
		}
		td.Definition = td.Definition.Rekey(key)
		td.Hash = protocol.DefinitionHash(td.Definition, hashes)
		hashes[t.Address()] = td.Hash
		p.Definitions[t.Address()] = td
	}
	for i := range p.Tasks {
		tc := &p.Tasks[i]
		if td, ok := p.Definitions[tc.Address]; ok && tc.Action != ActionCancel && tc.Proposal == nil {
			tc.NewHash = td.Hash
		}
	}
	p.Key = key
}

// DependencyHashes returns the definition hashes of the dependencies of a
// task, by address, from the plan's definitions: with the task's
// definition, what its hash covers.
func DependencyHashes(defs map[string]TaskDefinition, d protocol.Definition) map[string]string {
	out := make(map[string]string, len(d.DependsOn))
	for _, a := range d.DependsOn {
		out[a] = defs[a].Hash
	}
	return out
}

// inputChanges says which input files differ between a task's recorded
// spec and its new definition: "input data/a.txt changed", "… added",
// "… removed".
func inputChanges(oldSpec []byte, d protocol.Definition) []string {
	var old protocol.Definition
	if len(oldSpec) == 0 || json.Unmarshal(oldSpec, &old) != nil {
		return nil
	}
	before := map[string]string{}
	for _, f := range old.Inputs {
		before[f.Path] = f.SHA256
	}
	var out []string
	for _, f := range d.Inputs {
		switch h, ok := before[f.Path]; {
		case !ok:
			out = append(out, "input "+f.Path+" added")
		case h != f.SHA256:
			out = append(out, "input "+f.Path+" changed")
		}
		delete(before, f.Path)
	}
	var gone []string
	for p := range before {
		gone = append(gone, p)
	}
	sort.Strings(gone)
	for _, p := range gone {
		out = append(out, "input "+p+" removed")
	}
	return out
}

// topoOrder returns tasks ordered so that every task comes after the tasks
// it depends on, keeping configuration order otherwise. The hcl package has
// already refused cycles; should one slip through, the remaining tasks are
// appended in configuration order.
func topoOrder(tasks []*wdchcl.Task) []*wdchcl.Task {
	byAddr := make(map[string]*wdchcl.Task, len(tasks))
	for _, t := range tasks {
		byAddr[t.Address()] = t
	}
	const (
		unvisited = iota
		visiting
		done
	)
	mark := make(map[string]int, len(tasks))
	out := make([]*wdchcl.Task, 0, len(tasks))
	var visit func(t *wdchcl.Task)
	visit = func(t *wdchcl.Task) {
		addr := t.Address()
		if mark[addr] != unvisited {
			return
		}
		mark[addr] = visiting
		for _, dep := range t.DependsOn {
			if d, ok := byAddr[dep]; ok {
				visit(d)
			}
		}
		mark[addr] = done
		out = append(out, t)
	}
	for _, t := range tasks {
		visit(t)
	}
	return out
}

func resolveReplace(cfg *wdchcl.Config, targets []string) (map[string]bool, hcl.Diagnostics) {
	out := map[string]bool{}
	var diags hcl.Diagnostics
	for _, target := range targets {
		if _, ok := coordinator.ProposalID(target); ok {
			out[target] = true // checked against the state's proposals (proposalChanges)
			continue
		}
		matched := false
		for _, t := range cfg.Tasks {
			if MatchesAddress(t, target) {
				out[t.Address()] = true
				matched = true
			}
		}
		if !matched {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid --replace address",
				Detail:   fmt.Sprintf("No task in the configuration has the address %q. Use task.NAME, task.NAME[INDEX] or a bare task name, or proposal.N for an approved proposal.", target),
			})
		}
	}
	return out, diags
}

// MatchesAddress reports whether target names task instance t: its full
// address ("task.build[2]"), the address of its block ("task.build", every
// instance of a counted task) or the bare block name ("build"), or the bare
// name with an index ("build[2]").
func MatchesAddress(t *wdchcl.Task, target string) bool {
	target = strings.TrimSpace(target)
	if !strings.HasPrefix(target, "task.") {
		target = "task." + target
	}
	return target == t.Address() || target == "task."+t.Name
}

// latestLeases maps each task to its latest lease: the snapshot's latest
// leases, and its active ones (a hand-made snapshot may list only those).
func latestLeases(snap *state.Snapshot) map[string]*state.Lease {
	out := map[string]*state.Lease{}
	for _, list := range [][]state.Lease{snap.LatestLeases, snap.Leases} {
		for i := range list {
			l := &list[i]
			if cur, ok := out[l.Task]; !ok || l.Token > cur.Token {
				out[l.Task] = l
			}
		}
	}
	return out
}

// runningReason says why a task the state records as running is retried.
// An active lease is revoked by the next apply (the events say "revoked"),
// even when its expiry has passed: only a lease the state records as
// expired is called expired.
func runningReason(l *state.Lease, now time.Time) string {
	switch {
	case l == nil:
		return "was running when an earlier apply stopped"
	case l.Status == state.LeaseExpired:
		return fmt.Sprintf("lease of attempt %d (fencing token %d) expired", l.Attempt, l.Token)
	case l.Status == state.LeaseActive:
		return fmt.Sprintf("attempt %d (fencing token %d) was running when an earlier apply stopped; apply revokes its lease first", l.Attempt, l.Token)
	default:
		return fmt.Sprintf("attempt %d (fencing token %d) was running when an earlier apply stopped", l.Attempt, l.Token)
	}
}

// interruptedReason says why a queued task whose latest lease was handed
// back (released) runs again: an earlier apply was interrupted while the
// attempt ran, and it starts again from the beginning.
func interruptedReason(l *state.Lease) string {
	return fmt.Sprintf("attempt %d (fencing token %d) was interrupted when an earlier apply stopped; it runs again from the start", l.Attempt, l.Token)
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
