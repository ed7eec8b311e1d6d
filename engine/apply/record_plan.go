package apply

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
)

// RecordPlan writes a plan's pools and tasks into the state exactly as
// Run does before it starts its coordinator (it runs Run's own code):
// every pool of opts.Pools is upserted; each task to run, replace or retry
// becomes queued (pending when it waits on dependencies); each task to
// cancel is cancelled. It returns the runtime settings of the tasks to run,
// in plan order, ready for coordinator.Options.Tasks.
//
// It uses opts.Store, Plan, Pools, Tasks, Now (default time.Now) and
// OnEvent (cancellations); nothing else of opts. `wdc demo worker-leases`
// uses it to set up its story the way apply does. Errors: a missing Store
// or Plan, a task of the plan without runtime settings in opts.Tasks, and
// state errors.
func RecordPlan(ctx context.Context, opts Options) ([]coordinator.TaskRuntime, error) {
	if opts.Store == nil || opts.Plan == nil {
		return nil, errors.New("record plan: a state store and a plan are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &applier{opts: opts, res: &Result{}, emitMu: &sync.Mutex{}}
	return a.record(ctx)
}
