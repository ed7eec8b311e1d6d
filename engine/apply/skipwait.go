package apply

import (
	"context"
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/engine/supervise"
	"github.com/wdc-dev/wdc/state"
)

// quietStepsBeforeJump is how many steps in a row must find the apply
// quiescent before the test clock jumps: a worker that just exited, a
// launch just asked for or a claim just woken shows at the next step.
const quietStepsBeforeJump = 2

// skipWaits jumps the test clock (Options.SkipWaits) over the wait ahead
// when the run is quiescent: on the apply's side, no launch waiting to
// register, no external pool waiting for a worker to join, no worker exit
// left to handle, for quietStepsBeforeJump steps in a row with a step of
// the supervisor among them; on the coordinator's, no lease, no claim
// being granted, no worker draining, no task a claim could take
// (coordinator.SkipWait). The wait ahead ends at the earliest of the
// delayed retries and of the supervisor's idle delays (an idle worker of a
// pool with work left may be drained once it has been idle for
// supervise.DefaultIdleDelay). After a jump the supervisor steps at once.
// A failed jump (the state's error) stops the apply as a failed step does.
func (a *applier) skipWaits(ctx context.Context, supervised bool) {
	if !a.quietHere() {
		a.quiet, a.supervisedQuiet = 0, false
		return
	}
	a.quiet++
	a.supervisedQuiet = a.supervisedQuiet || supervised
	if a.quiet < quietStepsBeforeJump || !a.supervisedQuiet {
		return
	}
	var idleEnds []time.Time
	for _, p := range a.pools {
		view, _ := a.coord.PoolView(p.name())
		if view.Unfinished == 0 {
			continue
		}
		for _, w := range view.Workers {
			if w.Status == state.WorkerActive && w.Held == 0 && !w.Claiming {
				idleEnds = append(idleEnds, w.IdleSince.Add(supervise.DefaultIdleDelay))
			}
		}
	}
	d, err := a.coord.SkipWait(ctx, a.opts.SkipWaits, idleEnds)
	if err != nil {
		a.failure = fmt.Errorf("the test clock's jump: %w", err)
		return
	}
	if d > 0 {
		a.opts.logger().Info("test clock skipped a wait", "skipped", d, "now", a.now())
		a.quiet, a.supervisedQuiet = 0, false
		a.supervised = time.Time{}
	}
}

// quietHere reports whether the apply's own side is quiescent: every
// launch registered or ended, no external pool waiting for a worker, no
// worker exit waiting to be handled.
func (a *applier) quietHere() bool {
	if len(a.launcher.exits) > 0 {
		return false
	}
	for _, p := range a.pools {
		if !p.waitingSince.IsZero() || a.launcher.pending(p) > 0 {
			return false
		}
	}
	return true
}
