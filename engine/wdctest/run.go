package wdctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/engine/testclock"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/state"
)

// Status is how a run, a file or the whole test ended.
type Status string

// The statuses: every assertion held; one did not; the run could not be
// carried out or an assertion could not be evaluated.
const (
	StatusPass  Status = "pass"
	StatusFail  Status = "fail"
	StatusError Status = "error"
)

// Options configure Run.
type Options struct {
	// Dir is the configuration directory, absolute; DisplayDir is as the
	// user named it: the configuration's file names in diagnostics are
	// shown under it.
	Dir, DisplayDir string
	// Files are the test files to run, in order (hcl.LoadTestFiles).
	Files []*wdchcl.TestFile
	// Inputs are the configuration's inputs from outside (variables,
	// providers); each run adds its own variables and pool overrides.
	Inputs wdchcl.Inputs
	// Filters, when set, choose the runs to carry out: a run matches a
	// filter that is its name, its file's path (Path) or "PATH/NAME".
	Filters []string
	// Skip lists absolute paths inside Dir that the copies of the
	// configuration leave out (the user's state and work folder); the
	// .wdc and .git folders of Dir are always left out.
	Skip []string
	// TempDir is where the runs' temporary folders are made (default
	// os.TempDir()).
	TempDir string
	// Now is the clock of the runs' times and durations (default
	// time.Now). Each apply run has a test clock of its own
	// (testclock.Clock), on the wall clock and jumped over waits.
	Now func() time.Time
	// Redact, when set, makes the redactor of error texts workers report
	// for a configuration (apply.Operation.Redact).
	Redact func(*wdchcl.Config) func(string) string
	// View is told as runs start and end; nil tells nothing.
	View View
}

// View is told what Run does, in order, from Run's goroutine (Event also
// from the apply's, one call at a time).
type View interface {
	// RunStarted: run r of file f begins.
	RunStarted(f *wdchcl.TestFile, r *wdchcl.TestRun)
	// Planned: the run's plan (nil when planning failed) and the
	// diagnostics of planning, with the configuration it was made from.
	Planned(cfg *wdchcl.Config, p *plan.Plan, diags hcl.Diagnostics)
	// Event: progress of an apply run.
	Event(e coordinator.Event)
	// RunFinished: the run ended.
	RunFinished(f *wdchcl.TestFile, r *RunResult)
}

// Result is what Run found: a FileResult per file that had a run to
// carry out.
type Result struct {
	Files                   []*FileResult
	Passed, Failed, Errored int
	Started                 time.Time
	Duration                time.Duration
}

// Status is StatusPass when every run passed, StatusError when any had
// an error, else StatusFail.
func (r *Result) Status() Status {
	switch {
	case r.Errored > 0:
		return StatusError
	case r.Failed > 0:
		return StatusFail
	}
	return StatusPass
}

// FileResult is the result of one test file's runs.
type FileResult struct {
	File     *wdchcl.TestFile
	Runs     []*RunResult
	Started  time.Time
	Duration time.Duration
}

// Status is the worst of its runs' statuses.
func (f *FileResult) Status() Status {
	st := StatusPass
	for _, r := range f.Runs {
		switch r.Status {
		case StatusError:
			return StatusError
		case StatusFail:
			st = StatusFail
		}
	}
	return st
}

// RunResult is the result of one run block.
type RunResult struct {
	Name    string
	Command string
	Status  Status
	Started time.Time
	// Duration is the run's wall time, the copy of the configuration
	// included.
	Duration time.Duration
	// Skipped is the time the run's test clock jumped over waits that
	// only wait (package testclock): a retry's backoff, the supervisor's
	// idle delay.
	Skipped time.Duration
	// Asserts is the number of assert blocks; Failures those that did not
	// hold (or could not be evaluated), in order, then the faults that
	// never fired.
	Asserts  int
	Failures []*Failure
	// Faults are what became of the run's fault blocks, in order.
	Faults []*FaultResult
	// Diags are the errors that kept the run from being carried out (the
	// configuration does not load with the run's inputs, say), and their
	// warnings.
	Diags hcl.Diagnostics
	// Err is the apply's error, when it failed for another reason than
	// its plan's errors.
	Err error
	// Stopped is the apply's error when a disk_full fault made it stop:
	// expected, so not an error of the run (its assertions judge the state
	// the apply left).
	Stopped error
	// Apply is the apply's summary (command = apply, once it ran).
	Apply *apply.Result
	// Files are the configuration's files as loaded for the run, named as
	// Diags name them, for their snippets.
	Files map[string]*hcl.File
}

// ErrNoMatch is Run's error when Filters match no run.
var ErrNoMatch = errors.New("no run matches the filters")

// Run carries out every run of the test files that the filters choose,
// in order, each on its own copy of the configuration with a fresh
// state, and returns what it found. It stops early, with ctx's error,
// when ctx is cancelled (the run under way stops as an interrupted apply
// does). A run that fails does not stop the next.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	res := &Result{Started: opts.Now()}
	matched := false
	for _, f := range opts.Files {
		var fr *FileResult
		for _, r := range f.Runs {
			if !opts.matches(f, r) {
				continue
			}
			matched = true
			if err := ctx.Err(); err != nil {
				res.Duration = opts.Now().Sub(res.Started)
				return res, err
			}
			if fr == nil {
				fr = &FileResult{File: f, Started: opts.Now()}
				res.Files = append(res.Files, fr)
			}
			if opts.View != nil {
				opts.View.RunStarted(f, r)
			}
			rr := opts.run(ctx, f, r)
			fr.Runs = append(fr.Runs, rr)
			fr.Duration = opts.Now().Sub(fr.Started)
			switch rr.Status {
			case StatusPass:
				res.Passed++
			case StatusFail:
				res.Failed++
			default:
				res.Errored++
			}
			if opts.View != nil {
				opts.View.RunFinished(f, rr)
			}
		}
	}
	res.Duration = opts.Now().Sub(res.Started)
	if len(opts.Filters) > 0 && !matched {
		return res, ErrNoMatch
	}
	return res, ctx.Err()
}

// matches reports whether run r of file f is one the filters choose.
func (o *Options) matches(f *wdchcl.TestFile, r *wdchcl.TestRun) bool {
	if len(o.Filters) == 0 {
		return true
	}
	for _, flt := range o.Filters {
		flt = filepath.ToSlash(flt)
		if flt == r.Name || flt == f.Path || flt == f.Path+"/"+r.Name {
			return true
		}
	}
	return false
}

// run carries out one run block and evaluates its assertions.
func (o *Options) run(ctx context.Context, f *wdchcl.TestFile, r *wdchcl.TestRun) *RunResult {
	rr := &RunResult{Name: r.Name, Command: r.Command, Started: o.Now(), Asserts: len(r.Asserts)}
	defer func() { rr.Duration = o.Now().Sub(rr.Started) }()
	tmp, err := os.MkdirTemp(o.TempDir, "wdc-test-")
	if err != nil {
		rr.Status, rr.Err = StatusError, fmt.Errorf("making the run's temporary folder: %w", err)
		return rr
	}
	defer os.RemoveAll(tmp)
	configDir, workDir := filepath.Join(tmp, "config"), filepath.Join(tmp, "work")
	// The temporary folder itself may be inside the configuration
	// directory (TMPDIR there): the copy leaves it out.
	if err := CopyConfig(o.Dir, configDir, append([]string{tmp}, o.Skip...)); err != nil {
		rr.Status, rr.Err = StatusError, fmt.Errorf("copying the configuration: %w", err)
		return rr
	}
	cfg, diags := o.load(configDir, r)
	rr.Files = cfg.Files
	if f.File != nil {
		rr.Files[f.Name] = f.File
	}
	if !diags.HasErrors() {
		diags = append(diags, o.rename(checkFaultTargets(r.Faults, cfg), configDir)...)
	}
	rr.Diags = diags
	if diags.HasErrors() {
		rr.Status = StatusError
		return rr
	}
	obs := &Observed{Launched: map[string]int{}}
	if r.Command == wdchcl.TestCommandPlan {
		p, pd := plan.New(cfg, state.EmptySnapshot(), o.Now(), plan.Options{})
		pd = o.rename(pd, configDir)
		if pd.HasErrors() {
			p = nil
			obs.PlanFailed = true
		}
		obs.Plan = p
		if o.View != nil {
			o.View.Planned(cfg, p, pd)
		}
	} else if err := o.apply(ctx, cfg, configDir, workDir, r.Faults, obs, rr); err != nil || ctx.Err() != nil {
		if ctx.Err() != nil {
			// Interrupted: what the run left is not what it would have
			// left, so it is not judged.
			err = errors.New("interrupted: the run stopped before its apply finished; its assertions were not evaluated")
		}
		rr.Status, rr.Err = StatusError, err
		return rr
	}
	if err := observeState(ctx, filepath.Join(workDir, "state.db"), workDir, obs); err != nil {
		rr.Status, rr.Err = StatusError, fmt.Errorf("reading the run's state: %w", err)
		return rr
	}
	evalCtx := EvalContext(cfg, obs)
	rr.Status = StatusPass
	for _, a := range r.Asserts {
		fail := Assert(a, evalCtx, f.File.Bytes)
		if fail == nil {
			continue
		}
		rr.Failures = append(rr.Failures, fail)
		if fail.Diags.HasErrors() {
			rr.Status = StatusError
		} else if rr.Status == StatusPass {
			rr.Status = StatusFail
		}
	}
	for _, fr := range rr.Faults {
		if !fr.Fired {
			rr.Failures = append(rr.Failures, neverFired(fr))
			if rr.Status == StatusPass {
				rr.Status = StatusFail
			}
		}
	}
	return rr
}

// load loads the copy of the configuration with the run's inputs, as a
// test runs it: on a local temporary state, listening on loopback, with
// no backend. Its files and diagnostics are named as the user's.
func (o *Options) load(configDir string, r *wdchcl.TestRun) (*wdchcl.Config, hcl.Diagnostics) {
	in := o.Inputs
	in.TestVariables = r.Variables
	if len(r.OverridePools) > 0 {
		in.PoolProviders = map[string]string{}
		for _, ov := range r.OverridePools {
			in.PoolProviders[ov.Pool] = ov.Provider
		}
	}
	cfg, diags := wdchcl.Load(configDir, in)
	files := map[string]*hcl.File{}
	for name, f := range cfg.Files {
		files[o.renamePath(name, configDir)] = f
	}
	cfg.Files = files
	if !diags.HasErrors() {
		cfg.Settings.Backend = nil
		cfg.Settings.State, cfg.Settings.Listen, cfg.Settings.Advertise = "", "", ""
		cfg.Settings.TLS, cfg.Settings.Insecure = nil, false
		if r.Command == wdchcl.TestCommandApply {
			// What apply refuses before it starts: placement no pool can
			// satisfy, and a pool that would write to a cluster without
			// saying so (an override_pool runs it locally instead). A
			// plan run's plan reports its own errors, as plan.exit_code.
			diags = append(diags, plan.Validate(cfg)...)
			diags = append(diags, plan.ClusterWriteDiags(cfg)...)
		}
	}
	return cfg, o.rename(diags, configDir)
}

// rename names the files of diags as the user's configuration directory
// names them, instead of the run's copy.
func (o *Options) rename(diags hcl.Diagnostics, configDir string) hcl.Diagnostics {
	for _, d := range diags {
		for _, r := range []*hcl.Range{d.Subject, d.Context} {
			if r != nil {
				r.Filename = o.renamePath(r.Filename, configDir)
			}
		}
		d.Summary = strings.ReplaceAll(d.Summary, configDir+string(filepath.Separator), o.displayPrefix())
		d.Detail = strings.ReplaceAll(d.Detail, configDir+string(filepath.Separator), o.displayPrefix())
	}
	return diags
}

func (o *Options) displayPrefix() string {
	if o.DisplayDir == "" || o.DisplayDir == "." {
		return ""
	}
	return strings.TrimSuffix(o.DisplayDir, string(filepath.Separator)) + string(filepath.Separator)
}

func (o *Options) renamePath(name, configDir string) string {
	if rel, ok := strings.CutPrefix(name, configDir+string(filepath.Separator)); ok {
		return o.displayPrefix() + rel
	}
	return name
}

// apply carries the run out as `wdc apply --auto-approve` would, on a
// fresh state in workDir.
func (o *Options) apply(ctx context.Context, cfg *wdchcl.Config, configDir, workDir string, faults []*wdchcl.TestFault, obs *Observed, rr *RunResult) error {
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return err
	}
	v := &operationView{opts: o, cfg: cfg, configDir: configDir, obs: obs}
	clock := &testclock.Clock{}
	op := &apply.Operation{Config: cfg, StatePath: filepath.Join(workDir, "state.db"), View: v, SkipWaits: clock}
	if o.Redact != nil {
		op.Redact = o.Redact(cfg)
	}
	var in *injector
	if len(faults) > 0 {
		in = newInjector(faults, clock.Now)
		op.Faults = in
	}
	// An interrupt stops a test run at once: its workers are killed, not
	// drained (the state is the run's own, and thrown away after it).
	abort := make(chan struct{})
	defer context.AfterFunc(ctx, func() { close(abort) })()
	op.Abort = abort
	res, err := op.Run(ctx)
	rr.Apply, rr.Skipped = res, clock.Skipped()
	if in != nil {
		rr.Faults = in.outcome()
	}
	switch {
	case errors.Is(err, apply.ErrPlanFailed):
		obs.PlanFailed = true
		return nil
	case err != nil && in != nil && in.diskFullFired() && errors.Is(err, state.ErrDiskFull):
		// What disk_full is for: the apply stopped as on a full disk;
		// the assertions judge the state it left.
		rr.Stopped = err
		return nil
	case err != nil:
		return err
	}
	return nil
}

// operationView is what a run's apply operation tells: the plan and the
// launches are kept for the assertions, the plan and events go on to the
// View.
type operationView struct {
	opts      *Options
	cfg       *wdchcl.Config
	configDir string
	obs       *Observed
}

var _ apply.OperationView = (*operationView)(nil)

func (v *operationView) LockWaiting(state.Lock, time.Duration) {}
func (v *operationView) LockLost()                             {}
func (v *operationView) TookOver(state.Lock, bool)             {}
func (v *operationView) Reclaimed(apply.ReclaimResult, error)  {}
func (v *operationView) Recovered(int, int)                    {}
func (v *operationView) Started()                              {}
func (v *operationView) Serving(*httpapi.Endpoint)             {}
func (v *operationView) Planned(p *plan.Plan, d hcl.Diagnostics) error {
	d = v.opts.rename(d, v.configDir)
	if d.HasErrors() {
		p = nil
	}
	v.obs.Plan = p
	if v.opts.View != nil {
		v.opts.View.Planned(v.cfg, p, d)
	}
	return nil
}

func (v *operationView) Event(e coordinator.Event) {
	if e.Kind == apply.EventLaunched {
		v.obs.Launched[e.Pool]++
	}
	if v.opts.View != nil {
		v.opts.View.Event(e)
	}
}

// maxOutputBytes is the most of one output an assertion sees.
const maxOutputBytes = 1 << 20

// observeState reads what a run left in its state at path (none for a
// plan run): tasks, attempts, workers' pools, outputs, proposals.
func observeState(ctx context.Context, path, workDir string, obs *Observed) error {
	obs.Tasks, obs.Attempts, obs.WorkerPools, obs.Outputs = map[string]state.Task{}, map[string][]state.Attempt{}, map[string]string{}, map[string]map[string]string{}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	st, err := state.OpenReadOnly(ctx, path)
	if err != nil {
		return err
	}
	defer st.Close()
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return err
	}
	for _, w := range snap.Workers {
		obs.WorkerPools[w.ID] = w.Pool
	}
	obs.Proposals = snap.Proposals
	blobs, _ := artifact.OpenForReading(apply.ArtifactFolder(workDir))
	for _, t := range snap.Tasks {
		obs.Tasks[t.Address] = t
		attempts, err := st.Attempts(ctx, t.Address)
		if err != nil {
			return err
		}
		obs.Attempts[t.Address] = attempts
		if t.Status != state.TaskSucceeded || blobs == nil {
			continue
		}
		for i := len(attempts) - 1; i >= 0; i-- {
			a := attempts[i]
			if a.FailureClass != "" || a.EndedAt.IsZero() {
				continue
			}
			outs := map[string]string{}
			for _, x := range a.Artifacts {
				if x.Kind != state.ArtifactOutput {
					continue
				}
				if b, err := readBlob(blobs, x.SHA256); err == nil {
					outs[x.Name] = b
				}
			}
			obs.Outputs[t.Address] = outs
			break
		}
	}
	return nil
}

// readBlob reads at most maxOutputBytes of a blob.
func readBlob(s *artifact.Store, hash string) (string, error) {
	f, _, err := s.Open(hash)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxOutputBytes))
	return string(b), err
}
