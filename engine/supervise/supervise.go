package supervise

import (
	"fmt"
	"time"

	"github.com/wdc-dev/wdc/internal/plural"
)

// DefaultTick is how often apply asks the supervisor for a step.
const DefaultTick = time.Second

// DefaultIdleDelay is how long a worker must have been idle before the
// supervisor drains it while the pool still has work.
const DefaultIdleDelay = 5 * time.Second

// Observation is what the supervisor sees of one pool at a tick.
type Observation struct {
	// Queued counts the tasks the pool's workers could claim now (queued,
	// past any retry delay, dependencies succeeded).
	Queued int
	// Unfinished counts the tasks the pool can run that are not finished:
	// queued, waiting on dependencies or a retry delay, or running.
	Unfinished int
	// Idle and Busy count the pool's active workers without and with a
	// lease; Draining those asked to stop; Pending the workers launched
	// that have not registered yet (they will take work when they do).
	Idle, Busy, Draining, Pending int
	// Drainable counts the idle workers that have been idle for at least
	// the supervisor's idle delay (DefaultIdleDelay): only those are
	// drained while work remains, so a short gap in the queue (a retry's
	// backoff, a dependency finishing) does not shrink the pool.
	Drainable int
	// FreeSlots is the number of leases the active workers can still take
	// (capacity − leases held, summed over idle and busy workers).
	FreeSlots int
	// Min and Max bound the pool's workers (Max is the plan's ceiling,
	// which may be below the pool's max: PoolMax); Capacity is the leases
	// one worker takes at once (≥ 1).
	Min, Max, Capacity int
	// PoolMax is the pool's configured max, only for the reasons: a
	// ceiling below it says both. 0 means the same as Max.
	PoolMax int
}

// Live is the number of workers that count toward the pool's size:
// idle, busy and pending ones (a draining worker is on its way out).
func (o Observation) Live() int { return o.Idle + o.Busy + o.Pending }

// Action is what a Decision does.
type Action string

// The supervisor's actions.
const (
	// Launch launches Decision.Count workers.
	Launch Action = "launch"
	// Drain asks one idle worker to drain (a request through the
	// protocol, never a signal).
	Drain Action = "drain"
	// Hold changes nothing.
	Hold Action = "hold"
)

// Decision is one step of the supervisor for one pool.
type Decision struct {
	Action Action
	// Count is the number of workers to launch (≥ 1 for a launch, else 0):
	// as many as the queued tasks the free slots do not take need, or as
	// many as reach Min, never past Max.
	Count int
	// Reason explains the step with the counts that justified it, e.g.
	// "3 queued tasks and 0 free slots (1 busy, 0 idle, 0 pending, min 0, ceiling 4)",
	// or with a plan's ceiling below the pool's max "…, ceiling 2 of max 8)".
	Reason string
}

// Decide returns the one step to take for a pool in the state o:
//
//   - below Min while work remains: launch up to Min at once, or more if
//     the queue needs more;
//   - more queued tasks than free slots (pending workers count as free
//     slots, so a slow registration does not trigger another launch), and
//     below Max: launch the workers the rest of the queue fills,
//     ceil((Queued − free slots) / Capacity), up to Max;
//   - no queued task and an idle worker above Min (or no work left at
//     all): drain one idle worker;
//   - otherwise hold, saying why.
//
// Launching what the queue fills at once is how a Kubernetes Job starts
// min(parallelism, remaining completions) pods: a pool of max 16 with 16
// long tasks queued runs them all from the first second, not from the
// sixteenth. A queue the free slots absorb launches nothing (its tasks
// are not queued by the next tick), and workers that then find nothing to
// do drain after DefaultIdleDelay. With a constant queue the pool reaches
// its fixed point at the first step and stays put. It never launches past
// Max, never drains below Min while work remains, and never drains a
// worker holding a lease.
func Decide(o Observation) Decision {
	capacity := max(o.Capacity, 1)
	live := o.Live()
	counts := fmt.Sprintf("%d busy, %d idle, %d pending, min %d, ceiling %d", o.Busy, o.Idle, o.Pending, o.Min, o.Max)
	if o.PoolMax > o.Max {
		counts += fmt.Sprintf(" of max %d", o.PoolMax)
	}
	free := o.FreeSlots + o.Pending*capacity
	need := 0 // workers the queued tasks the free slots do not take fill
	if o.Queued > free {
		need = Fill(o.Queued-free, capacity)
	}
	switch {
	case o.Unfinished == 0 && o.Idle > 0:
		return Decision{Action: Drain, Reason: fmt.Sprintf("no work left for the pool (%s)", counts)}
	case o.Unfinished == 0:
		return Decision{Action: Hold, Reason: "no work left for the pool"}
	case live < o.Min && live < o.Max:
		n := min(max(o.Min-live, need), o.Max-live)
		why := fmt.Sprintf("below min: %d live workers", live)
		if need > o.Min-live {
			// The queue asks for more than min does: say so too.
			why += fmt.Sprintf(", and %s and %s", plural.Count(o.Queued, "queued task", "queued tasks"), plural.Count(free, "free slot", "free slots"))
		}
		return Decision{Action: Launch, Count: n, Reason: fmt.Sprintf("%s (%s)", why, counts)}
	case need > 0 && live < o.Max:
		return Decision{Action: Launch, Count: min(need, o.Max-live), Reason: fmt.Sprintf("%s and %s (%s)",
			plural.Count(o.Queued, "queued task", "queued tasks"), plural.Count(free, "free slot", "free slots"), counts)}
	case o.Queued > free:
		return Decision{Action: Hold, Reason: fmt.Sprintf("at the ceiling: %s for %s", plural.Count(live, "worker", "workers"), plural.Count(o.Queued, "queued task", "queued tasks"))}
	case o.Queued == 0 && o.Drainable > 0 && live > o.Min:
		return Decision{Action: Drain, Reason: fmt.Sprintf("no queued task and %s above min (%s)", plural.Count(o.Drainable, "idle worker", "idle workers"), counts)}
	case o.Pending > 0 && o.Queued > o.FreeSlots:
		return Decision{Action: Hold, Reason: fmt.Sprintf("waiting for %s to register", plural.Count(o.Pending, "pending worker", "pending workers"))}
	case o.Queued > 0:
		return Decision{Action: Hold, Reason: fmt.Sprintf("%s fit the free slots", plural.Count(o.Queued, "queued task", "queued tasks"))}
	case o.Idle > 0 && live <= o.Min:
		return Decision{Action: Hold, Reason: "at min"}
	case o.Idle > 0:
		return Decision{Action: Hold, Reason: "idle workers wait for work"}
	default:
		return Decision{Action: Hold, Reason: "every worker is busy and nothing is queued"}
	}
}

// InitialWorkers is how many workers apply starts a pool with whose plan
// gives it workers (the ceiling, see WorkersFor), when ready of its tasks
// can start at once (none of their dependencies runs in the same apply)
// and one worker takes capacity of them: what Decide launches at its
// first step, max(min, ceil(ready / capacity)), never more than the
// ceiling; 0 when the pool gets no workers or nothing of it can start
// before another pool's task ends (and min is 0). The supervisor adds
// workers from there as the queue demands.
func InitialWorkers(workers, min, ready, capacity int) int {
	if workers <= 0 {
		return 0
	}
	return clampInt(max(min, Fill(ready, capacity)), 0, workers)
}

// Fill is how many workers of capacity leases each tasks fill:
// ⌈tasks / capacity⌉ for tasks ≥ 0, a capacity below 1 counting as 1.
func Fill(tasks, capacity int) int {
	capacity = max(capacity, 1)
	return (tasks + capacity - 1) / capacity
}

func clampInt(n, lo, hi int) int {
	return max(lo, min(n, hi))
}
