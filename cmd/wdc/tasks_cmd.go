package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// TasksListCmd lists the tasks recorded in the state.
type TasksListCmd struct {
	JSON bool `name:"json" help:"Print a JSON array instead of a table."`
}

// Run prints one row per task: address, status, attempts, short def_hash and
// last error.
func (c *TasksListCmd) Run(e *env) error {
	snap, path, err := e.readStateSnapshot()
	if err != nil {
		return err
	}
	if c.JSON {
		out := make([]views.TaskJSON, 0, len(snap.Tasks))
		for _, t := range snap.Tasks {
			out = append(out, views.NewTaskJSON(t))
		}
		return views.WriteJSON(e.stdout, out)
	}
	if len(snap.Tasks) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No tasks in the state"+noStateHint(snap.Lineage != "", path)+".")
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "ADDRESS\tSTATUS\tATTEMPTS\tDEF_HASH\tLAST ERROR")
	for _, t := range snap.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.Address, t.Status, t.Attempts, protocol.ShortHash(t.DefHash), views.OrDash(views.OneLine(t.LastError)))
	}
	return tw.Flush()
}

// TasksShowCmd shows one task with its attempts and events.
type TasksShowCmd struct {
	Address string `arg:"" name:"address" predictor:"address" help:"Task address (task.NAME, task.NAME[INDEX]) or bare name (NAME, NAME[INDEX])."`
	JSON    bool   `name:"json" help:"Print JSON instead of text."`
}

// Run prints the task, each attempt (worker, fencing token, start, end, exit
// code, failure class, log paths) and the task's events.
func (c *TasksShowCmd) Run(e *env) error {
	ctx := context.Background()
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	st, err := openForReading(ctx, path)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("no task %s: there is no state file at %s", c.Address, path)
	}
	defer st.Close()
	d, err := e.readTaskDetail(ctx, st, path, normalizeAddress(c.Address))
	if err != nil {
		return err
	}
	if c.JSON {
		return d.WriteJSON(e.stdout)
	}
	return d.WriteText(e.stdout)
}

// readTaskDetail reads the task at addr and what happened to it. A
// counted task's name, a proposal not run yet and an unknown address each
// get an error saying what to ask instead.
func (e *env) readTaskDetail(ctx context.Context, st *state.Store, path, addr string) (*views.TaskDetail, error) {
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	d := &views.TaskDetail{}
	found := false
	for i := range snap.Tasks {
		if snap.Tasks[i].Address == addr {
			d.Task, found = snap.Tasks[i], true
		}
	}
	if !found {
		return nil, unknownTask(snap, path, addr, "wdc tasks show")
	}
	if d.Attempts, err = st.Attempts(ctx, addr); err != nil {
		return nil, err
	}
	if d.Events, err = st.Events(ctx, addr); err != nil {
		return nil, err
	}
	if d.Results, err = st.Results(ctx, addr); err != nil {
		return nil, err
	}
	d.StderrTails = e.stderrTails(path, d.Attempts)
	return d, nil
}

// unknownTask is the error of a command (verb, e.g. "wdc logs") given an
// address the state snap at path has no task of: for a counted task's
// name, to name an instance, listing them (the first ten); for a proposal
// not run yet, why; else that there is none.
func unknownTask(snap *state.Snapshot, path, addr, verb string) error {
	var instances []string
	for _, t := range snap.Tasks {
		if strings.HasPrefix(t.Address, addr+"[") {
			instances = append(instances, t.Address)
		}
	}
	if len(instances) > 0 {
		list := strings.Join(instances, ", ")
		if len(instances) > maxInstancesNamed {
			list = strings.Join(instances[:maxInstancesNamed], ", ") + fmt.Sprintf(", … (%d in all: wdc tasks list)", len(instances))
		}
		return fmt.Errorf("%s is a counted task: name one instance, e.g. %s %s (instances: %s)", addr, verb, instances[0], list)
	}
	if why := notRunYet(snap, addr); why != "" {
		return errors.New(why)
	}
	return fmt.Errorf("no task %s in the state %s (see wdc tasks list)", addr, path)
}

// maxInstancesNamed is how many instances of a counted task an error names.
const maxInstancesNamed = 10

// normalizeAddress turns a bare task name ("build", "build[2]") into an
// address ("task.build", "task.build[2]").
func normalizeAddress(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "task.") || strings.HasPrefix(s, "proposal.") {
		return s
	}
	return "task." + s
}

// notRunYet explains an address that names a proposal no apply has run
// yet, or "" when it names none.
func notRunYet(snap *state.Snapshot, addr string) string {
	id, ok := coordinator.ProposalID(addr)
	if !ok {
		return ""
	}
	for _, p := range snap.Proposals {
		if p.ID != id {
			continue
		}
		switch {
		case p.Status == state.ProposalPending:
			return fmt.Sprintf("%s has not run: it waits for approval (wdc proposals show %d; wdc approve %d)", addr, id, id)
		case p.Status == state.ProposalRejected:
			return fmt.Sprintf("%s never runs: it was rejected by %s: %s", addr, p.DecidedBy, p.Reason)
		}
		return fmt.Sprintf("%s is approved and has not run yet: the next wdc apply runs it (wdc proposals show %d)", addr, id)
	}
	return ""
}

// readStateSnapshot resolves the state path for a read command and returns
// it with a snapshot; an absent state file is an empty state (lineage "").
func (e *env) readStateSnapshot() (*state.Snapshot, string, error) {
	path, err := e.statePathForReading()
	if err != nil {
		return nil, "", err
	}
	snap, err := readSnapshot(context.Background(), path)
	return snap, path, err
}

// stderrTails returns the last lines of the stderr of each failed attempt
// (by number), redacted with the configuration's sensitive values; none
// when the configuration does not load (nothing could be redacted).
func (e *env) stderrTails(statePath string, attempts []state.Attempt) map[int]string {
	out := map[int]string{}
	redact := e.quietRedactor()
	if redact == nil {
		return out
	}
	var store *artifact.Store
	for _, a := range attempts {
		if a.FailureClass != state.FailureClassFailure {
			continue
		}
		for _, x := range a.Artifacts {
			if x.Kind != state.ArtifactLog || x.Name != "stderr" {
				continue
			}
			if store == nil {
				s, err := artifact.OpenForReading(apply.ArtifactFolder(filepath.Dir(statePath)))
				if err != nil {
					return out
				}
				store = s
			}
			if tail, err := coordinator.TailBlob(store, x.SHA256, coordinator.StderrTailLines); err == nil && tail != "" {
				out[a.Number] = redact(tail)
			}
		}
	}
	return out
}

// quietRedactor loads the configuration without printing anything and
// returns the function that hides its sensitive values, or nil when it
// does not load.
func (e *env) quietRedactor() func(string) string {
	dir, err := e.configDir()
	if err != nil {
		return nil
	}
	varFiles := make([]string, len(e.flags.VarFile))
	for i, f := range e.flags.VarFile {
		varFiles[i] = resolve(dir, f)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Vars: e.flags.Var, VarFiles: varFiles, Environ: e.environ, Providers: providers.Schemas()})
	if diags.HasErrors() || cfg == nil {
		return nil
	}
	return jsonplan.NewRedactor(cfg).Text
}
