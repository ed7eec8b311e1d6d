package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/providers"
)

// stopGrace is how long a worker stopped through its provider (the
// ladder's second rung) has before it is killed.
const stopGrace = 5 * time.Second

// drainExitGrace is how long past its pool's drain_timeout a draining
// worker has to post its results and exit before the ladder's second rung.
const drainExitGrace = 5 * time.Second

// stopWorkers takes apply's shutdown ladder (docs/design.md §9), each rung
// announced as it starts. The coordinator has already told every worker to
// drain (Drain or Interrupt: their next answer says drain), so first apply
// waits up to the longest drain_timeout of their pools (plus
// drainExitGrace to post results and exit) for them to end by themselves
// (a second interrupt, Abort, cuts this short: what is left is killed at
// once, and the line says so); then it stops the
// stragglers through their provider (SIGTERM for a process, a pod delete,
// a Ray stop) and gives them stopGrace; then it kills what is left. With
// abort it kills at once. Every worker that ends is recorded (ended); what
// their leases become is decided after (handed back without cost after an
// interruption, revoked otherwise).
func (a *applier) stopWorkers(abort bool) {
	provs := a.launcher.provs
	ctx := context.Background()
	var live []*launched
	var drainTimeout time.Duration // the longest drain_timeout of their pools
	for _, w := range a.launcher.workers {
		if !w.exited {
			live = append(live, w)
			drainTimeout = max(drainTimeout, w.pool.cfg.DrainTimeout)
		}
	}
	drainFor := drainTimeout + drainExitGrace
	aborted := func() bool {
		select {
		case <-a.opts.Abort:
			return true
		default:
			return false
		}
	}
	running := func(w *launched) bool {
		st, err := provs[w.pool.cfg.Provider].Status(ctx, providers.StatusRequest{ID: w.id})
		return err == nil && st.Running
	}
	// waitFor polls until every worker of ws has ended or d has passed (a
	// second Ctrl-C cuts it short), and returns those still running.
	waitFor := func(ws []*launched, d time.Duration) []*launched {
		deadline := a.now().Add(d)
		for {
			var left []*launched
			for _, w := range ws {
				if running(w) {
					left = append(left, w)
				} else if !w.exited {
					a.ended(ctx, provs[w.pool.cfg.Provider], w, "")
				}
			}
			if len(left) == 0 || a.now().After(deadline) {
				return left
			}
			select {
			case <-a.opts.Abort:
				return left
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	names := func(ws []*launched) string {
		var out []string
		for _, w := range ws {
			out = append(out, w.pool.name()+" "+w.describe())
		}
		return strings.Join(out, ", ")
	}
	if !abort {
		msg := "draining workers"
		if len(live) > 0 {
			msg += fmt.Sprintf(": %s asked to drain, waiting up to %s for them to finish and exit (their drain_timeout of %s, plus %s to post results and exit)",
				plural.Count(len(live), "worker", "workers"), drainFor, drainTimeout, drainExitGrace)
		}
		a.emit(coordinator.Event{At: a.now(), Kind: EventDraining, Message: msg})
		live = waitFor(live, drainFor)
		if len(live) > 0 && !aborted() {
			a.emit(coordinator.Event{At: a.now(), Kind: EventStopping, Message: fmt.Sprintf("%s still running after waiting %s, stopped through the provider (%s); waiting up to %s more",
				plural.Count(len(live), "worker", "workers"), drainFor, names(live), stopGrace)})
			for _, w := range live {
				if err := provs[w.pool.cfg.Provider].Stop(ctx, providers.StopRequest{ID: w.id}); err != nil {
					a.opts.logger().Warn("stopping a worker", "pool", w.pool.name(), "seq", w.seq, "err", err)
				}
			}
			live = waitFor(live, stopGrace)
		}
	} else {
		a.emit(coordinator.Event{At: a.now(), Kind: EventDraining, Message: "killing workers"})
	}
	if len(live) > 0 {
		switch {
		case abort:
		case aborted(): // a second interrupt cut the wait short
			a.emit(coordinator.Event{At: a.now(), Kind: EventKilling, Message: fmt.Sprintf("interrupted again: %s still running, killed at once (%s)",
				plural.Count(len(live), "worker", "workers"), names(live))})
		default:
			a.emit(coordinator.Event{At: a.now(), Kind: EventKilling, Message: fmt.Sprintf("%s still running, killed (%s)", plural.Count(len(live), "worker", "workers"), names(live))})
		}
		for _, w := range live {
			prov := provs[w.pool.cfg.Provider]
			if err := prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}); err != nil {
				a.opts.logger().Warn("killing a worker", "pool", w.pool.name(), "seq", w.seq, "err", err)
			}
			a.ended(ctx, prov, w, "")
		}
	}
}

// waitExternal gives workers that joined from elsewhere (which apply
// cannot stop) their drain timeout to learn that they should stop (an
// answer with drain=true) and to post the results of their running
// attempts, until each was told and they hold no lease.
func (a *applier) waitExternal() {
	var deadline time.Time
	for _, p := range a.pools {
		if p.cfg.Provider == providers.External && a.joinedCount(p.name()) > 0 {
			if d := a.now().Add(p.cfg.DrainTimeout + 5*time.Second); d.After(deadline) {
				deadline = d
			}
		}
	}
	for a.now().Before(deadline) {
		waiting := 0
		for i, pp := range a.coord.Progress().Pools {
			if a.opts.Pools[i].Provider == providers.External {
				waiting += pp.Leases + pp.Untold
			}
		}
		if waiting == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
