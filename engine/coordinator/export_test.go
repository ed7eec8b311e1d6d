package coordinator

// What the external tests (package coordinator_test, which serve the
// coordinator with package httpapi) read of its insides.

// JudgementEvents is judgementEvents.
var JudgementEvents = judgementEvents

// WorkerSeq returns the launch sequence worker id registered with (0 for
// a worker that joined, or one c does not know).
func WorkerSeq(c *Coordinator, id string) int {
	return ofWorker(c, id, func(w *workerState) int { return w.seq })
}

// ofWorker returns f of worker id's state, read under c's lock (0 for a
// worker c does not know).
func ofWorker(c *Coordinator, id string, f func(*workerState) int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.workers[id]; w != nil {
		return f(w)
	}
	return 0
}

// SetTakeOverHook sets a function run inside the write of every takeover
// of an unstarted lease, before the write reads the lease (nil: none).
// Set it before the coordinator serves the claims it is to see.
func SetTakeOverHook(c *Coordinator, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hookTakeOverWrite = f
}

// UnstartedInMemory returns how many of worker id's leases c holds as
// unstarted in memory (a reported start clears it before its write).
func UnstartedInMemory(c *Coordinator, id string) int {
	return ofWorker(c, id, func(w *workerState) int { return w.unstarted })
}

// SetAnswerHook sets a function run when the leases a write granted are
// about to be answered, before the answer checks that its request is
// still there (nil: none). Set it before the coordinator serves the
// claims it is to see.
func SetAnswerHook(c *Coordinator, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hookAnswer = f
}
