package apply

import (
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/state"
)

// Faults injects faults into an apply: `wdc test`'s fault blocks (package
// wdctest). Its methods are called concurrently.
type Faults interface {
	// FaultInjector's methods go to the apply's coordinator.
	coordinator.FaultInjector
	// FailLaunch is asked before each launch of pool: an error fails the
	// launch as the provider's error would (it counts toward failing the
	// pool), and the provider is not called.
	FailLaunch(pool string) error
	// StateLocked is given the state once the apply holds its lock,
	// before the apply writes anything else (disk_full makes its disk
	// full after a number of writes: state.Store.FailWritesAfter).
	StateLocked(*state.Store)
}

// coordinatorFaults is Options.Faults as the coordinator takes it: nil
// when there are none.
func (a *applier) coordinatorFaults() coordinator.FaultInjector {
	if a.opts.Faults == nil {
		return nil
	}
	return a.opts.Faults
}
