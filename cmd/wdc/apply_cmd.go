package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/planfile"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/state"
	"golang.org/x/term"
)

// ApplyCmd computes the plan under the state lock, asks for confirmation,
// and carries it out.
type ApplyCmd struct {
	PlanFile    string        `arg:"" optional:"" name:"plan-file" predictor:"file" help:"A plan saved with wdc plan --out: carry out exactly its changes, without asking (refused if it went stale)."`
	JSON        bool          `name:"json" help:"Print one JSON object per line (NDJSON): the plan, each event, the summary (docs/json.md)."`
	AutoApprove bool          `name:"auto-approve" help:"Apply without asking for confirmation (needed when there is no terminal)."`
	LockTimeout time.Duration `name:"lock-timeout" default:"0s" help:"How long to wait for a state lock held by another running apply, e.g. 30s (default: fail at once)."`
	Replace     []string      `name:"replace" sep:"none" placeholder:"ADDR" predictor:"address" help:"Run this succeeded task again, and the tasks downstream of it (repeatable)."`
}

// Run parses what the operation needs (configuration, state path, a saved
// plan), runs it (engine.Operation: lock, recover, plan, confirm, apply)
// and renders what it is told, then the summary.
// Exit codes: 0 when every task succeeded or there was nothing to do; 1 on
// an error, a failed or cancelled task, or an interruption.
func (c *ApplyCmd) Run(e *env) error {
	// Output to a reader that went away (wdc apply | head) must not stop an
	// apply half-way, with its lock, leases and workers in the middle of
	// something. With SIGPIPE notified, a write to a closed pipe on fd 1 or
	// 2 fails with EPIPE instead of killing the process (os/signal), and
	// the streams drop what they cannot write. Notify, not Ignore: an
	// ignored signal stays ignored in the workers and commands apply
	// starts, a caught one is reset to its default for them. It stays
	// notified until the process exits, for the last error line too.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stdout := keepGoing(e.stdout)
	e.stdout, e.stderr = stdout, keepGoing(e.stderr)
	defer func() {
		if err := stdout.Err(); err != nil {
			fmt.Fprintf(e.stderr, "Warning: apply's output could not be written (%v); it carried on to the end: wdc status and wdc tasks list show the outcome.\n", err)
		}
	}()
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	if diags := plan.Validate(cfg); diags.HasErrors() {
		e.printDiags(cfg, diags)
		return errExit{1}
	}
	// Default deny: a pool that would write to a cluster must say so.
	if diags := plan.ClusterWriteDiags(cfg); diags.HasErrors() {
		e.printDiags(cfg, diags)
		return errExit{1}
	}
	path, err := e.statePath(cfg)
	if err != nil {
		return err
	}
	b, err := e.stateBackend(cfg)
	if err != nil {
		return err
	}
	e.warnUnconfined(cfg, path)
	serve, err := e.serveSettings(cfg)
	if err != nil {
		return err
	}
	if b != nil {
		// The state's CA is kept beside the backend's state (KEY.ca), so
		// that an apply on any machine serves with the CA join files pin.
		serve.CA = backendCA(context.Background(), b)
	}
	// When confirmation is impossible, plan read-only first: nothing to
	// confirm means nothing to refuse (an up-to-date configuration applies
	// as a no-op, as with Terraform), and a refusal touches nothing.
	if !c.AutoApprove && c.PlanFile == "" && (c.JSON || !e.stdinIsTerminal()) {
		return c.applyUnconfirmed(e, cfg)
	}
	view := &applyCmdView{e: e, cfg: cfg, replace: c.Replace}
	if c.JSON {
		view.out = views.NewApplyJSON(e.stdout)
	} else {
		view.out = views.NewApplyText(e.stdout, e.terminalWidth(e.stdout))
	}
	ctx, abort, stop := view.interrupts()
	defer stop()
	var remote *remoteApply
	if b != nil {
		// The backend's credentials never reach a worker or a task:
		// they were read, and the processes apply starts inherit this
		// environment.
		for _, k := range backend.CredentialEnvs {
			os.Unsetenv(k)
		}
		// The backend's lock, then its state into the working copy:
		// from here on the apply runs as on a local state, and its end
		// puts the state back.
		remote, err = lockAndPull(ctx, e, b, path, c.LockTimeout, func(l backend.Lock) {
			view.LockWaiting(*asStateLock(l), c.LockTimeout)
		})
		if err != nil {
			if ctx.Err() != nil {
				return apply.ErrInterruptedLocking
			}
			return err
		}
		if prev := remote.lock.Previous; prev != nil {
			// Gone: its pid is gone on this host; else its lock expired.
			_, host, _ := lockHolder(e)
			view.TookOver(*asStateLock(*prev), deadOnThisHost(host)(*prev))
		}
	}
	saved, savedPlan, err := c.readSaved(e, cfg, path)
	if err != nil {
		if remote != nil {
			remote.lock.Release(context.Background()) //nolint:errcheck // it expires anyway
		}
		return err
	}
	view.saved = saved
	op := &apply.Operation{Config: cfg, StatePath: path, Serve: serve, Saved: savedPlan, SavedName: c.PlanFile,
		Replace: c.Replace, LockTimeout: c.LockTimeout, View: view, Now: e.now, Redact: jsonplan.NewRedactor(cfg).Text, Abort: abort}
	if remote != nil {
		op.Fence = remote.lock.Lost()
		op.Checkpoints = remote
		view.backend = true
	}
	if !c.AutoApprove {
		op.Confirm = func(*plan.Plan) (bool, error) { return e.confirm(ctx) }
	}
	res, err := op.Run(ctx)
	if view.shown {
		view.out.Close()
	}
	if remote != nil {
		if ferr := remote.finish(context.Background()); ferr != nil {
			if err != nil && !errors.Is(err, state.ErrLockLost) {
				fmt.Fprintf(e.stderr, "wdc: error: %v\n", err)
			}
			return ferr
		}
		if errors.Is(err, apply.ErrCheckpointFailed) {
			err = fmt.Errorf("%w (backend %s: the working copy %s keeps what this apply did; wdc state push %s puts it in the backend once the cause is fixed)",
				err, b.Name(), path, path)
		}
	}
	switch {
	case errors.Is(err, apply.ErrApplyCancelled):
		fmt.Fprintln(e.stdout, "\nApply cancelled.")
		return errExit{1}
	case errors.Is(err, apply.ErrPlanFailed):
		return errExit{1}
	case err != nil:
		return err
	}
	if err := view.out.Summary(res, res.NoChanges); err != nil {
		return err
	}
	if !res.OK() {
		return errExit{1}
	}
	return nil
}

// readSaved reads the saved plan of the command line, if any, and runs
// every check of it that needs no state: it was made by this wdc, from
// this configuration, and rebuilds to the definitions it recorded.
func (c *ApplyCmd) readSaved(e *env, cfg *wdchcl.Config, statePath string) (*jsonplan.Plan, *plan.Plan, error) {
	if c.PlanFile == "" {
		return nil, nil, nil
	}
	if len(c.Replace) > 0 {
		return nil, nil, errors.New("--replace cannot be used with a saved plan: the plan already records what to replace")
	}
	dir, err := e.configDir()
	if err != nil {
		return nil, nil, err
	}
	saved, err := planfile.Read(resolve(dir, c.PlanFile))
	if err != nil {
		return nil, nil, err
	}
	key, err := planfile.CheckFresh(saved, cfg, Version, func() ([]byte, error) {
		return savedPlanKey(context.Background(), statePath, saved)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("refusing the saved plan %s: %w", c.PlanFile, err)
	}
	p, err := planfile.Rebuild(saved, cfg, key)
	if err != nil {
		return nil, nil, fmt.Errorf("refusing the saved plan %s: %w", c.PlanFile, err)
	}
	return saved, p, nil
}

// savedPlanKey returns the hash key of the state a saved plan was made
// against, read read-only (nil for a plan made with no state): the keyed
// hashes of its sensitive values are checked with it. A state file that
// is missing, or is another state than the plan's, is refused here, as
// the apply would refuse it, since nothing sensitive can be checked
// without its key.
func savedPlanKey(ctx context.Context, path string, doc *jsonplan.Plan) ([]byte, error) {
	if doc.State.Lineage == "" {
		return nil, nil
	}
	st, err := openForReading(ctx, path)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("it was made for the state with lineage %s, and there is no state file at %s (check --state)", doc.State.Lineage, path)
	}
	defer st.Close()
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if snap.Lineage != doc.State.Lineage {
		return nil, fmt.Errorf("the plan was made for another state (lineage %s; this state is %s): check --state, or save a new plan", doc.State.Lineage, snap.Lineage)
	}
	return snap.HashKey, nil
}

// applyCmdView renders what an apply operation tells: lock and recovery
// notes on stderr, the plan, progress and events on stdout (text or
// NDJSON).
type applyCmdView struct {
	e       *env
	cfg     *wdchcl.Config
	replace []string
	saved   *jsonplan.Plan // the saved plan's document, shown as it was saved
	out     views.Apply
	shown   bool // the plan was shown: the output is closed at the end

	mu      sync.Mutex
	started bool // the plan is being carried out: an interrupt from now on drains workers
	// backend: the state is a backend's working copy; a takeover was
	// told from the backend's lock, not again from the copy's.
	backend bool
}

var _ apply.OperationView = (*applyCmdView)(nil)

// interrupts turns signals into the operation's stops. First signal: stop
// cleanly (ctx is cancelled). Second: stop at once (abort is closed).
// Before the lock is taken an interrupt only stops the wait for it:
// nothing was changed, and there are no workers to drain.
func (v *applyCmdView) interrupts() (ctx context.Context, abort chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	abort = make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		v.mu.Lock()
		started := v.started
		v.mu.Unlock()
		if !started {
			cancel()
			return
		}
		fmt.Fprintln(v.e.stderr, "\nInterrupt received: no new leases; draining workers (interrupt again to stop at once).")
		cancel()
		select {
		case <-sigs:
			fmt.Fprintln(v.e.stderr, "Second interrupt: killing workers.")
			close(abort)
		case <-time.After(24 * time.Hour):
		}
	}()
	return ctx, abort, func() { signal.Stop(sigs); cancel() }
}

func (v *applyCmdView) LockWaiting(l state.Lock, wait time.Duration) {
	fmt.Fprintf(v.e.stderr, "The state lock is held by another apply (%s, host %s, pid %d, since %s); waiting up to %s for it (Ctrl-C gives up).\n",
		l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt), wait)
}

func (v *applyCmdView) LockLost() {
	fmt.Fprintln(v.e.stderr, "wdc: error: the state lock was removed or taken over, or the state file removed or replaced; stopping")
}

func (v *applyCmdView) TookOver(prev state.Lock, dead bool) {
	if v.backend {
		return
	}
	why := "that is gone"
	if !dead {
		why = "that stopped renewing it (its lock expired at " + views.FormatTime(prev.ExpiresAt) + ")"
	}
	fmt.Fprintf(v.e.stderr, "Took over the state lock of an apply %s (%s, host %s, pid %d, started %s).\n",
		why, prev.Holder, prev.Host, prev.PID, views.FormatTime(prev.StartedAt))
}

func (v *applyCmdView) Reclaimed(rec apply.ReclaimResult, err error) {
	if err != nil {
		fmt.Fprintf(v.e.stderr, "Warning: %v\n", err)
	} else if what := reclaimedText(rec); what != "" {
		fmt.Fprintf(v.e.stderr, "Stopped %s left running by an earlier apply.\n", what)
	}
}

// reclaimedText counts what a takeover stopped, each kind once with its
// own noun, those with none left out: "2 workers, 1 unrecorded worker and
// 3 orphaned attempts"; "" for nothing.
func reclaimedText(rec apply.ReclaimResult) string {
	var parts []string
	for _, k := range []struct {
		n           int
		one, others string
	}{
		{rec.Stopped, "worker", "workers"},
		{rec.OrphanWorkers, "unrecorded worker", "unrecorded workers"},
		{rec.OrphanAttempts, "orphaned attempt", "orphaned attempts"},
	} {
		if k.n > 0 {
			parts = append(parts, plural.Count(k.n, k.one, k.others))
		}
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func (v *applyCmdView) Recovered(lost, unstarted int) {
	fmt.Fprintln(v.e.stderr, recoveredMessage(lost, unstarted))
}

// recoveredMessage says what became of the leases an earlier apply left:
// lost of them revoked, their tasks retried as lost; unstarted of them
// prefetched leases whose start no worker reported, queued again at no
// cost.
func recoveredMessage(lost, unstarted int) string {
	msg := "Revoked " + plural.Count(lost+unstarted, "lease", "leases") + " left by an earlier apply"
	if unstarted == 0 {
		return msg + "; their tasks are retried as lost."
	}
	never := " whose start no worker reported, queued again at no cost."
	if lost == 0 {
		return msg + ": " + plural.Word(unstarted, "it was a prefetched lease", "they were prefetched leases") + never
	}
	return msg + ": " + plural.Count(lost, "task is", "tasks are") + " retried as lost; " +
		plural.Count(unstarted, "was a prefetched lease", "were prefetched leases") + never
}

// Planned prints the diagnostics of planning, then the plan: a saved
// plan's document as it was saved, else the document of the plan just
// made.
func (v *applyCmdView) Planned(p *plan.Plan, diags hcl.Diagnostics) error {
	v.e.printDiags(v.cfg, diags)
	if diags.HasErrors() {
		return nil
	}
	doc := v.saved
	if doc == nil {
		var err error
		if doc, err = jsonplan.New(v.cfg, p, v.replace, Version); err != nil {
			return err
		}
	}
	v.shown = true
	return v.out.Plan(doc, v.e.color(v.e.stdout))
}

func (v *applyCmdView) Started() {
	v.mu.Lock()
	v.started = true
	v.mu.Unlock()
	v.out.Start()
}

func (v *applyCmdView) Serving(ep *httpapi.Endpoint) {
	if ep.Warning != "" {
		fmt.Fprintf(v.e.stderr, "Warning: %s.\n", ep.Warning)
	}
}

func (v *applyCmdView) Event(ev coordinator.Event) { v.out.Event(ev) }

// applyUnconfirmed is apply without --auto-approve where it cannot ask
// (no terminal, or --json): it plans against the state opened read-only
// (never created) and, when the plan has no changes, reports a no-op apply
// and succeeds; otherwise it refuses, having written nothing.
func (c *ApplyCmd) applyUnconfirmed(e *env, cfg *wdchcl.Config) error {
	ctx := context.Background()
	path, backendRef, _, err := e.planningState(ctx, cfg)
	if err != nil {
		return err
	}
	snap, err := readCheckedSnapshot(ctx, path)
	if err != nil {
		return err
	}
	planned, diags := plan.New(cfg, snap, e.now(), plan.Options{Replace: c.Replace})
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return errExit{1}
	}
	if planned.HasChanges() {
		if c.JSON {
			return errors.New("apply --json cannot ask for confirmation: pass --auto-approve, or apply a saved plan")
		}
		return errors.New("no terminal to confirm on: review the plan with wdc plan, then run wdc apply --auto-approve (or save it with wdc plan --out FILE and run wdc apply FILE)")
	}
	doc, err := jsonplan.New(cfg, planned, c.Replace, Version)
	if err != nil {
		return err
	}
	doc.State.Backend = backendRef
	var out views.Apply = views.NewApplyText(e.stdout, nil)
	if c.JSON {
		out = views.NewApplyJSON(e.stdout)
	}
	if err := out.Plan(doc, e.color(e.stdout)); err != nil {
		return err
	}
	return out.Summary(&apply.Result{}, true)
}

// confirm asks on the terminal; without one it refuses. It answers no as
// soon as ctx ends (Ctrl-C or SIGTERM at the prompt): the apply is then
// cancelled with nothing written. The read of the answer is left behind;
// the process ends soon after.
func (e *env) confirm(ctx context.Context) (bool, error) {
	if !e.stdinIsTerminal() {
		return false, errors.New("no terminal to confirm on: review the plan above and run again with --auto-approve")
	}
	fmt.Fprint(e.stdout, "\nDo you want to perform these actions?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		got <- answer{line, err}
	}()
	select {
	case a := <-got:
		if ctx.Err() != nil {
			return false, nil
		}
		if a.err != nil && !errors.Is(a.err, io.EOF) {
			return false, a.err
		}
		return strings.TrimSpace(a.line) == "yes", nil
	case <-ctx.Done():
		fmt.Fprintln(e.stdout)
		return false, nil
	}
}

// stdinIsTerminal reports whether standard input is a terminal.
func (e *env) stdinIsTerminal() bool {
	f, ok := e.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth returns what reports the width in columns of the terminal
// w writes to (80 when the terminal does not say), or nil when w is not a
// terminal.
func (e *env) terminalWidth(w io.Writer) func() int {
	f, ok := fileOf(w)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func() int {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
			return cols
		}
		return 80
	}
}

// serveSettings resolves where and how the coordinator serves: WDC_LISTEN
// > the wdc block's listen > 127.0.0.1 on a free port; WDC_ADVERTISE > the
// block's advertise > derived; the block's tls and insecure.
func (e *env) serveSettings(cfg *wdchcl.Config) (httpapi.ListenSettings, error) {
	s := httpapi.ListenSettings{Listen: cfg.Settings.Listen, Advertise: cfg.Settings.Advertise, Insecure: cfg.Settings.Insecure}
	if v := e.getenv("WDC_LISTEN"); v != "" {
		if msg := wdchcl.CheckListen(v); msg != "" {
			return s, fmt.Errorf("WDC_LISTEN: %s", msg)
		}
		s.Listen = v
	}
	if v := e.getenv("WDC_ADVERTISE"); v != "" {
		if msg := wdchcl.CheckAdvertise(v); msg != "" {
			return s, fmt.Errorf("WDC_ADVERTISE: %s", msg)
		}
		s.Advertise = v
	}
	if t := cfg.Settings.TLS; t != nil {
		s.CertFile, s.KeyFile = t.CertFile, t.KeyFile
	}
	return s, nil
}
