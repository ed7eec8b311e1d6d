package coordinator

// What the external tests (package coordinator_test, which serve the
// coordinator with package httpapi) read of its insides.

// JudgementEvents is judgementEvents.
var JudgementEvents = judgementEvents

// WorkerSeq returns the launch sequence worker id registered with (0 for
// a worker that joined, or one c does not know).
func WorkerSeq(c *Coordinator, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.workers[id]; w != nil {
		return w.seq
	}
	return 0
}
