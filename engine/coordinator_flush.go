package engine

// FlushEvents returns once the events of every write already made have been
// passed to OnEvent. A write changes the coordinator's memory (and may close
// Done) before it emits its events, and emits them under the write lock; so
// a caller that reacts to Done calls FlushEvents first, and the event that
// finished the last task comes before whatever it reports next (apply's
// "draining" line).
func (c *Coordinator) FlushEvents() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
}
