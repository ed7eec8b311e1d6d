package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/engine"
)

// progressView renders apply's progress: one line per event, and on a
// terminal a status line under them that updates in place.
type progressView struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	start    time.Time
	counts   map[string]int
	running  int
	stop     chan struct{}
	done     chan struct{}
}

func newProgressView(w io.Writer, terminal bool) *progressView {
	v := &progressView{w: w, terminal: terminal, start: time.Now(), counts: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	fmt.Fprintln(w)
	if terminal {
		go v.tick()
	} else {
		close(v.done)
	}
	return v
}

func (v *progressView) tick() {
	defer close(v.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			v.mu.Lock()
			v.status()
			v.mu.Unlock()
		}
	}
}

// event prints one line for e (and refreshes the status line).
func (v *progressView) event(e engine.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.counts[e.Kind]++
	switch e.Kind {
	case engine.EventLeased:
		v.running++
	case engine.EventSucceeded, engine.EventExpired:
		v.running--
	case engine.EventFailed, engine.EventRetried:
		if e.Attempt > 0 && e.Token > 0 {
			v.running--
		}
	}
	if v.terminal {
		fmt.Fprint(v.w, "\r\x1b[K")
	}
	fmt.Fprintln(v.w, eventLine(e))
	if v.terminal {
		v.status()
	}
}

func (v *progressView) status() {
	fmt.Fprintf(v.w, "\r\x1b[K%d succeeded, %d failed, %d running, %d attempts  %s",
		v.counts[engine.EventSucceeded], v.counts[engine.EventFailed], max(v.running, 0), v.counts[engine.EventLeased],
		time.Since(v.start).Round(100*time.Millisecond))
}

func (v *progressView) close() {
	if v.terminal {
		close(v.stop)
		<-v.done
		fmt.Fprint(v.w, "\r\x1b[K")
	}
}

// eventLine renders e as "KIND  SUBJECT: detail".
func eventLine(e engine.Event) string {
	subject := e.Task
	if subject == "" && e.Pool != "" {
		subject = "pool." + e.Pool
	}
	var detail string
	switch e.Kind {
	case engine.EventLeased:
		detail = fmt.Sprintf("attempt %d, fencing token %d, worker %s", e.Attempt, e.Token, e.WorkerID)
	case engine.EventSucceeded:
		detail = fmt.Sprintf("attempt %d", e.Attempt)
	case engine.EventRegistered:
		detail = "worker " + e.WorkerID
	case engine.EventStale:
		detail = "worker " + e.WorkerID + ": " + e.Message
	default:
		detail = e.Message
		if e.Attempt > 0 && e.Kind != engine.EventQueued {
			detail = fmt.Sprintf("attempt %d: %s", e.Attempt, e.Message)
		}
	}
	switch {
	case subject == "":
		return fmt.Sprintf("%-10s %s", e.Kind, detail)
	case detail == "":
		return fmt.Sprintf("%-10s %s", e.Kind, subject)
	}
	return fmt.Sprintf("%-10s %s: %s", e.Kind, subject, detail)
}
