package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/wdc-dev/wdc/engine"
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

// Run takes the lock, plans, confirms, applies and prints a summary.
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
	if diags := engine.Validate(cfg); diags.HasErrors() {
		e.printDiags(cfg, diags)
		return errExit{1}
	}
	// Default deny: a pool that would write to a cluster must say so.
	if diags := engine.ClusterWriteDiags(cfg); diags.HasErrors() {
		e.printDiags(cfg, diags)
		return errExit{1}
	}
	path, err := e.statePath(cfg)
	if err != nil {
		return err
	}
	serve, err := e.serveSettings(cfg)
	if err != nil {
		return err
	}
	// When confirmation is impossible, plan read-only first: nothing to
	// confirm means nothing to refuse (an up-to-date configuration applies
	// as a no-op, as with Terraform), and a refusal touches nothing.
	if !c.AutoApprove && c.PlanFile == "" && (c.JSON || !e.stdinIsTerminal()) {
		return c.applyUnconfirmed(e, cfg, path)
	}

	// First signal: stop cleanly. Second: stop at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	abort := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// Before the lock is ours an interrupt only stops the wait for it:
	// nothing was changed, and there are no workers to drain.
	var phase struct {
		sync.Mutex
		locked, interruptedWaiting bool
	}
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		phase.Lock()
		if !phase.locked {
			phase.interruptedWaiting = true
			phase.Unlock()
			cancel()
			return
		}
		phase.Unlock()
		fmt.Fprintln(e.stderr, "\nInterrupt received: no new leases; draining workers (interrupt again to stop at once).")
		cancel()
		select {
		case <-sigs:
			fmt.Fprintln(e.stderr, "Second interrupt: killing workers.")
			close(abort)
		case <-time.After(24 * time.Hour):
		}
	}()

	var saved *planDoc
	var savedPlan *engine.Plan
	if c.PlanFile != "" {
		if len(c.Replace) > 0 {
			return errors.New("--replace cannot be used with a saved plan: the plan already records what to replace")
		}
		dir, err := e.configDir()
		if err != nil {
			return err
		}
		if saved, err = readPlanFile(resolve(dir, c.PlanFile)); err != nil {
			return err
		}
		if err := checkPlanFresh(saved, cfg); err != nil {
			return fmt.Errorf("refusing the saved plan %s: %w", c.PlanFile, err)
		}
		// Every check that needs no state runs before anything is written.
		if savedPlan, err = planFromDoc(saved, cfg); err != nil {
			return fmt.Errorf("refusing the saved plan %s: %w", c.PlanFile, err)
		}
		if saved.State.Lineage != "" {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("refusing the saved plan %s: it was made for the state with lineage %s, and there is no state file at %s (check --state)",
					c.PlanFile, saved.State.Lineage, path)
			}
		}
	}

	store, err := state.Open(context.Background(), path)
	if err != nil {
		return err
	}
	defer store.Close()
	// A damaged state is refused before anything is written (the lock
	// included); a read or write that finds damage later says the same.
	if err := store.QuickCheck(ctx); err != nil {
		return err
	}
	var serialBefore int64
	if saved != nil {
		lineage, serial, err := store.Info(ctx)
		if err != nil {
			return err
		}
		if err := checkStateFresh(saved, lineage, serial); err != nil {
			return fmt.Errorf("refusing the saved plan %s: %w", c.PlanFile, err)
		}
		// The state is the one the plan was made from: the approved
		// proposals it runs are recorded there.
		snap, err := store.Snapshot(ctx)
		if err != nil {
			return err
		}
		if err := engine.AttachProposals(savedPlan, snap); err != nil {
			return fmt.Errorf("refusing the saved plan %s: %w", c.PlanFile, err)
		}
		serialBefore = serial
	}

	lock, err := engine.AcquireApplyLock(ctx, store, engine.LockOptions{Wait: c.LockTimeout, OnWait: func(l state.Lock) {
		fmt.Fprintf(e.stderr, "The state lock is held by another apply (%s, host %s, pid %d, since %s); waiting up to %s for it (Ctrl-C gives up).\n",
			l.Holder, l.Host, l.PID, formatTime(l.StartedAt), c.LockTimeout)
	}})
	phase.Lock()
	phase.locked = err == nil
	interrupted := phase.interruptedWaiting
	phase.Unlock()
	var waitErr *engine.LockWaitInterruptedError
	switch {
	case errors.As(err, &waitErr):
		return waitErr
	case err != nil && interrupted:
		return errors.New("interrupted while taking the state lock: nothing was changed")
	case err != nil:
		return fmt.Errorf("acquiring the state lock: %w", err)
	case interrupted:
		// The lock came as the interrupt did: give it back untouched.
		lock.Release(context.Background()) //nolint:errcheck // the next apply takes it over if this failed
		return errors.New("interrupted while taking the state lock: nothing was changed")
	}
	lock.KeepAlive(context.Background())
	defer lock.Release(context.Background()) //nolint:errcheck // reported by the next apply if it failed
	go func() {
		select {
		case <-lock.Lost():
			// Apply sees LockLost too: it kills the workers and writes
			// nothing more.
			fmt.Fprintln(e.stderr, "wdc: error: the state lock was removed or taken over; stopping")
		case <-ctx.Done():
		}
	}()
	// From here on every write of this apply checks, in its own
	// transaction, that the lock is still ours.
	store.GuardWrites(lock.ID())
	if saved != nil {
		// Taking the lock does not move the serial; anything that did means
		// another apply ran between the check above and the lock.
		if _, serial, err := store.Info(ctx); err != nil {
			return err
		} else if serial != serialBefore {
			return fmt.Errorf("refusing the saved plan %s: the state changed while taking the lock (serial %d, now %d): save a new plan", c.PlanFile, serialBefore, serial)
		}
	}
	now := e.now()
	if prev := lock.Previous; prev != nil {
		why := "that is gone"
		if h, _ := os.Hostname(); engine.JudgeHolder(*prev, h, os.Getpid(), now, nil) != engine.HolderDead {
			why = "that stopped renewing it (its lock expired at " + formatTime(prev.ExpiresAt) + ")"
		}
		fmt.Fprintf(e.stderr, "Took over the state lock of an apply %s (%s, host %s, pid %d, started %s).\n",
			why, prev.Holder, prev.Host, prev.PID, formatTime(prev.StartedAt))
	}
	// Stop what an earlier apply launched and left running before its tasks
	// run again (under our lock, no other apply's worker is legitimate):
	// each provider stops its own, by what it recorded at launch.
	if rec, err := engine.ReclaimStrays(ctx, store, filepath.Dir(path), lock.ID(), engine.ProviderSettings(cfg), now); err != nil {
		fmt.Fprintf(e.stderr, "Warning: %v\n", err)
	} else if rec.Stopped+rec.Orphans > 0 {
		fmt.Fprintf(e.stderr, "Stopped %s and %s left running by an earlier apply.\n",
			plural.Count(rec.Stopped, "worker", "workers"), plural.Count(rec.Orphans, "orphaned attempt or worker", "orphaned attempts or workers"))
	}
	revoked, err := engine.RecoverState(ctx, store, "the apply that granted the lease is gone", now)
	if err != nil {
		return err
	}
	if revoked > 0 {
		fmt.Fprintf(e.stderr, "Revoked %s left by an earlier apply; their tasks are retried as lost.\n", plural.Count(revoked, "lease", "leases"))
	}

	var plan *engine.Plan
	doc := saved
	if saved != nil {
		plan = savedPlan
	} else {
		snap, err := store.Snapshot(ctx)
		if err != nil {
			return err
		}
		var diags hcl.Diagnostics
		plan, diags = engine.NewPlan(cfg, snap, now, engine.PlanOptions{Replace: c.Replace})
		e.printDiags(cfg, diags)
		if diags.HasErrors() {
			return errExit{1}
		}
		if doc, err = newPlanDoc(cfg, plan, c.Replace); err != nil {
			return err
		}
	}
	var out applyOutput
	if c.JSON {
		out = newJSONOutput(e.stdout)
	} else {
		out = newProgressView(e.stdout, e.isTerminal(e.stdout))
	}
	if err := out.plan(doc, e.color(e.stdout)); err != nil {
		return err
	}
	if !plan.HasChanges() {
		out.close()
		return out.summary(&engine.ApplyResult{}, true)
	}
	if !c.AutoApprove && saved == nil {
		ok, err := e.confirm()
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(e.stdout, "\nApply cancelled.")
			return errExit{1}
		}
	}
	out.start()

	pools, tasks := engine.ApplyInputs(cfg, plan)
	lineage, _, err := store.Info(ctx)
	if err != nil {
		return err
	}
	res, err := engine.Apply(ctx, engine.ApplyOptions{
		Store:           store,
		Plan:            plan,
		Pools:           pools,
		Tasks:           tasks,
		Serve:           serve,
		MaxArtifactSize: cfg.Settings.MaxArtifactSize,
		ApplyID:         lock.ID(),
		Lineage:         lineage,
		OnServing: func(ep *engine.Endpoint) {
			if ep.Warning != "" {
				fmt.Fprintf(e.stderr, "Warning: %s.\n", ep.Warning)
			}
		},
		LockLost: lock.Lost(),
		WorkDir:  filepath.Dir(path),
		Now:      e.now,
		OnEvent:  out.event,
		Redact:   newRedactor(cfg).text,
		Abort:    abort,
		Config:   cfg,

		SavedPlan: saved != nil,
	})
	out.close()
	if err != nil {
		return err
	}
	if err := out.summary(res, false); err != nil {
		return err
	}
	if !res.OK() {
		return errExit{1}
	}
	return nil
}

// applyUnconfirmed is apply without --auto-approve where it cannot ask
// (no terminal, or --json): it plans against the state opened read-only
// (never created) and, when the plan has no changes, reports a no-op apply
// and succeeds; otherwise it refuses, having written nothing.
func (c *ApplyCmd) applyUnconfirmed(e *env, cfg *wdchcl.Config, path string) error {
	ctx := context.Background()
	snap, err := readSnapshot(ctx, path)
	if err != nil {
		return err
	}
	plan, diags := engine.NewPlan(cfg, snap, e.now(), engine.PlanOptions{Replace: c.Replace})
	e.printDiags(cfg, diags)
	if diags.HasErrors() {
		return errExit{1}
	}
	if plan.HasChanges() {
		if c.JSON {
			return errors.New("apply --json cannot ask for confirmation: pass --auto-approve, or apply a saved plan")
		}
		return errors.New("no terminal to confirm on: review the plan with wdc plan, then run wdc apply --auto-approve (or save it with wdc plan --out FILE and run wdc apply FILE)")
	}
	doc, err := newPlanDoc(cfg, plan, c.Replace)
	if err != nil {
		return err
	}
	var out applyOutput = newProgressView(e.stdout, false)
	if c.JSON {
		out = newJSONOutput(e.stdout)
	}
	if err := out.plan(doc, e.color(e.stdout)); err != nil {
		return err
	}
	return out.summary(&engine.ApplyResult{}, true)
}

// applySummary is the final line: tasks by outcome, attempts, workers and
// wall time.
func applySummary(r *engine.ApplyResult) string {
	head := "Apply complete!"
	switch {
	case r.Interrupted:
		head = "Apply interrupted!"
	case !r.OK():
		head = "Apply failed!"
	}
	s := fmt.Sprintf("%s Tasks: %d succeeded, %d failed, %d cancelled", head, r.Succeeded, r.Failed, r.Cancelled)
	if r.Unfinished > 0 {
		s += fmt.Sprintf(", %d unfinished (the next apply continues them)", r.Unfinished)
	}
	workers := strconv.Itoa(r.Workers)
	if r.Joined > 0 {
		workers += fmt.Sprintf(" (%d joined)", r.Joined)
	}
	return s + fmt.Sprintf(". Attempts: %d. Workers: %s. Wall time: %s.", r.Attempts, workers, r.Wall.Round(time.Millisecond))
}

// confirm asks on the terminal; without one it refuses.
func (e *env) confirm() (bool, error) {
	if !e.stdinIsTerminal() {
		return false, errors.New("no terminal to confirm on: review the plan above and run again with --auto-approve")
	}
	fmt.Fprint(e.stdout, "\nDo you want to perform these actions?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return strings.TrimSpace(line) == "yes", nil
}

// stdinIsTerminal reports whether standard input is a terminal.
func (e *env) stdinIsTerminal() bool {
	f, ok := e.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// isTerminal reports whether w is a terminal.
func (e *env) isTerminal(w io.Writer) bool {
	f, ok := fileOf(w)
	return ok && term.IsTerminal(int(f.Fd()))
}

// serveSettings resolves where and how the coordinator serves: WDC_LISTEN
// > the wdc block's listen > 127.0.0.1 on a free port; WDC_ADVERTISE > the
// block's advertise > derived; the block's tls and insecure.
func (e *env) serveSettings(cfg *wdchcl.Config) (engine.ListenSettings, error) {
	s := engine.ListenSettings{Listen: cfg.Settings.Listen, Advertise: cfg.Settings.Advertise, Insecure: cfg.Settings.Insecure}
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
