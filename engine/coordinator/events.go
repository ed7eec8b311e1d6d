package coordinator

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Event kinds passed to OnEvent.
const (
	EventRegistered = "registered" // a worker registered (WorkerID, Pool)
	EventLeased     = "leased"     // a lease was granted (Task, WorkerID, Attempt, Token)
	EventSucceeded  = "succeeded"  // an accepted result succeeded the task
	EventFailed     = "failed"     // the task failed for good; Message names the budget spent
	EventRetried    = "retried"    // the task will be retried; Message names the budget and not-before time
	EventExpired    = "expired"    // the sweep expired a lease; its attempt is lost
	EventRejected   = "rejected"   // a result was rejected; Message starts with the reason
	EventCancelled  = "cancelled"  // a task was cancelled: a dependency failed, or (from apply) it left the configuration
	EventStale      = "stale"      // a worker went silent past its ttl
	EventQueued     = "queued"     // a pending task's dependencies all succeeded
	EventReleased   = "released"   // a granted lease was handed back undelivered (no budget spent)
	EventRevoked    = "revoked"    // RevokeLeases ended a lease; its attempt is lost
	// EventRegistrationRefused: a registration was refused because its
	// credential was used before, expired or was revoked (Pool, Message
	// starting with the reason).
	EventRegistrationRefused = "registration_refused"
)

// Event is one progress event of the coordinator.
type Event struct {
	At       time.Time
	Kind     string // one of the Event* constants
	Task     string // "" when none
	WorkerID string // "" when none
	Pool     string // "" when unknown
	Attempt  int    // 0 when none
	Token    int64  // fencing token, 0 when none
	// StderrTail holds the last lines (StderrTailLines) of the stderr of
	// the attempt a retried or failed event is about, when it failed
	// (redacted); "" otherwise.
	StderrTail string
	// Launch is the launch sequence of a registered worker's launch (0
	// when it joined with a join token, or for other kinds).
	Launch  int
	Message string
}

// DefaultEventQueue is how many events may wait for OnEvent before the
// writes that make more wait for it (Options.EventQueue).
const DefaultEventQueue = 4096

// Events leave the coordinator through a bounded queue that one goroutine
// delivers, in order, to the logger and to OnEvent (Nomad's event broker,
// with one subscriber that may not miss an event). A write's after
// function, which the state's committer runs in commit order, only
// updates memory and queues the write's events; so the committer never
// waits for a terminal, only for the queue when it is full.
//
// A full queue makes the writer wait (the committer, for the hot path's
// writes) until the deliverer has taken its events: nothing is dropped,
// and the JSON event stream misses nothing. It cannot deadlock: the
// deliverer holds no lock of the coordinator while it calls OnEvent, and
// OnEvent may call only methods that neither write nor wait for the queue
// (Progress, Finished, Done, StopGranting, Drain).
//
// The deliverer runs only while there is something to deliver: it starts
// with the first event queued and ends when the queue is empty, so an
// idle coordinator holds no goroutine.
type eventQueue struct {
	mu    sync.Mutex
	cond  sync.Cond // broadcast when the queue shrinks or a delivery ends
	items []queuedEvent
	limit int
	// running: a deliverer goroutine runs (at most one at a time, so
	// events are delivered in the order they were queued).
	running bool
	// queued and delivered count the events ever queued and ever
	// delivered; a flush waits until delivered reaches queued.
	queued, delivered uint64

	log     *slog.Logger
	onEvent func(Event)
}

// queuedEvent is an event and whether the coordinator's logger records it
// (its own events; not those apply publishes).
type queuedEvent struct {
	e   Event
	log bool
}

func newEventQueue(limit int, log *slog.Logger, onEvent func(Event)) *eventQueue {
	if limit <= 0 {
		limit = DefaultEventQueue
	}
	q := &eventQueue{limit: limit, log: log, onEvent: onEvent}
	q.cond.L = &q.mu
	return q
}

// push queues evs, waiting while the queue is full. Called in the order
// the events happened: from a write's after function, or with wmu held
// for writing; never with c.mu held.
func (q *eventQueue) push(evs []Event, log bool) {
	if len(evs) == 0 || (q.onEvent == nil && !(log && q.log.Enabled(context.Background(), slog.LevelInfo))) {
		return // nobody listens
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range evs {
		for len(q.items) >= q.limit {
			q.cond.Wait()
		}
		q.items = append(q.items, queuedEvent{e: e, log: log})
		q.queued++
		if !q.running {
			q.running = true
			go q.deliver()
		}
	}
}

// deliver passes the queued events on, oldest first, until the queue is
// empty.
func (q *eventQueue) deliver() {
	q.mu.Lock()
	for len(q.items) > 0 {
		batch := q.items
		q.items = make([]queuedEvent, 0, min(len(batch), q.limit))
		q.cond.Broadcast() // room for writers that wait
		q.mu.Unlock()
		for _, it := range batch {
			if it.log {
				e := it.e
				q.log.Info(e.Kind, "task", e.Task, "worker", e.WorkerID, "pool", e.Pool, "attempt", e.Attempt, "token", e.Token, "msg", e.Message)
			}
			if q.onEvent != nil {
				q.onEvent(it.e)
			}
		}
		q.mu.Lock()
		q.delivered += uint64(len(batch))
		q.cond.Broadcast() // for flushes
	}
	q.running = false
	q.mu.Unlock()
}

// flush returns once every event queued before it was called has been
// delivered.
func (q *eventQueue) flush() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for target := q.queued; q.delivered < target; {
		q.cond.Wait()
	}
}

// emit queues the coordinator's events for the logger and OnEvent. It is
// called from a write's after function, or with wmu held for writing (so
// events keep the state's order), and with mu not held.
func (c *Coordinator) emit(evs []Event) { c.events.push(evs, true) }

// emitAndFlush is emit for the operations outside the hot path (they hold
// wmu for writing): they return only after their events have reached
// OnEvent, as a caller that acts on them (apply matching a registration
// to its launch) expects.
func (c *Coordinator) emitAndFlush(evs []Event) {
	c.events.push(evs, true)
	c.events.flush()
}

// Publish passes e to OnEvent through the coordinator's queue, after every
// event already queued, so that the caller's own events (apply's launches,
// exits, drains) and the coordinator's reach OnEvent in the one order they
// happened in. It waits only while the queue is full. The coordinator's
// logger does not record it.
func (c *Coordinator) Publish(e Event) { c.events.push([]Event{e}, false) }

// FlushEvents returns once the events of every write already made, and
// every event published, have been passed to OnEvent. A write changes the
// coordinator's memory (and may close Done) before its events reach
// OnEvent; so a caller that reacts to Done calls FlushEvents first, and
// the event that finished the last task comes before whatever it reports
// next (apply's "draining" line). Apply also calls it before it returns,
// so its summary comes after every event. It must not be called from
// OnEvent (it would wait for itself).
func (c *Coordinator) FlushEvents() {
	c.wmu.Lock()
	c.wmu.Unlock() //nolint:staticcheck // an empty critical section: writes in flight have queued their events
	c.events.flush()
}
