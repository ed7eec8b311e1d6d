package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// launched is one worker apply launched through a provider.
type launched struct {
	pool     *poolRun
	seq      int    // launch sequence within the pool
	id       string // provider handle
	pid      int
	log      string
	at       time.Time // when it was launched, on the apply's clock
	workerID string    // set once it registered
	exited   bool
	// mirrored is the last sighting handed to a liveness mirror, at
	// mirroredAt; mirroring is set while a call is under way.
	mirrored, mirroredAt time.Time
	mirroring            atomic.Bool
}

// describe names the launch in messages: "worker 2 (pid 123)".
func (l *launched) describe() string {
	if l.pid > 0 {
		return fmt.Sprintf("worker %d (pid %d)", l.seq, l.pid)
	}
	return fmt.Sprintf("worker %d (%s)", l.seq, l.id)
}

// workerExit is a provider's report that a launched worker ended.
type workerExit struct {
	w    *launched
	resp providers.WaitResponse
	err  error
}

// launcher starts workers through their pools' providers and reports
// their ends on exits. It owns the providers of one apply (closed with
// it) and the list of every worker launched.
type launcher struct {
	a       *applier
	provs   map[string]providers.Provider
	workers []*launched
	exits   chan workerExit
	// waitCtx ends the providers' Wait calls when the apply ends.
	waitCtx     context.Context
	stopWaiting context.CancelFunc
}

// newLauncher looks up the provider of every pool apply launches for.
func newLauncher(a *applier) (*launcher, error) {
	l := &launcher{a: a, provs: map[string]providers.Provider{}, exits: make(chan workerExit, 16)}
	for _, p := range a.pools {
		name := p.cfg.Provider
		if _, ok := l.provs[name]; ok || name == providers.External {
			continue
		}
		prov, err := providers.Lookup(name)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("pool %s: %w", p.name(), err)
		}
		l.provs[name] = prov
	}
	l.waitCtx, l.stopWaiting = context.WithCancel(context.Background())
	return l, nil
}

// close ends the providers' waits and watches.
func (l *launcher) close() {
	if l.stopWaiting != nil {
		l.stopWaiting()
	}
	for _, prov := range l.provs {
		if c, ok := prov.(io.Closer); ok {
			c.Close() //nolint:errcheck // nothing left to do about it
		}
	}
}

// provider is the provider of w's pool.
func (l *launcher) provider(w *launched) providers.Provider { return l.provs[w.pool.cfg.Provider] }

// isDiskFull reports whether err says the disk (or the state's) is full:
// such a failure stops the apply.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, state.ErrDiskFull)
}

// launch starts one worker of pool p with a fresh one-time credential, why
// being the supervisor's reason. A launch that fails counts toward failing
// the pool (poolRun.failedInRow), or fails it at once when the provider
// says no other launch would do better (providers.ErrPermanent); a full
// disk stops the apply.
func (l *launcher) launch(ctx context.Context, p *poolRun, why string) {
	a := l.a
	p.seq++
	seq, name := p.seq, p.name()
	a.res.Workers++
	logPath := filepath.Join(a.logDir, fmt.Sprintf("%s-%d.log", name, seq))
	failed := func(what string, err error) {
		if isDiskFull(err) && a.failure == nil {
			a.failure = fmt.Errorf("launching worker %d of pool %s: %w", seq, name, err)
		}
		p.failedInRow++
		p.lastLaunchErr = err
		if errors.Is(err, providers.ErrPermanent) {
			p.cannotStart, p.lastExit = true, fmt.Sprintf("worker %d %s: %v", seq, what, err)
		}
		a.emit(coordinator.Event{At: a.now(), Kind: EventExited, Pool: name, Message: fmt.Sprintf("worker %d %s: %v", seq, what, err)})
	}
	cred, err := a.coord.IssueLaunch(ctx, name, seq, p.cfg.Provider, p.cfg.LaunchTimeout)
	if err != nil {
		failed("could not be launched", err)
		return
	}
	if a.opts.Faults != nil {
		if err := a.opts.Faults.FailLaunch(name); err != nil {
			if _, cerr := a.coord.CloseLaunch(context.WithoutCancel(ctx), name, seq, true); cerr != nil {
				a.opts.logger().Warn("closing a failed launch", "pool", name, "seq", seq, "err", cerr)
			}
			failed("failed to launch", err)
			return
		}
	}
	resp, err := l.provs[p.cfg.Provider].Launch(ctx, providers.LaunchRequest{
		Pool: name, Lineage: a.opts.Lineage, ApplyID: a.coord.ApplyID(), Seq: seq,
		ServerURL: a.ep.URL, CASHA256: a.ep.CASHA256, Credential: cred,
		WorkDir: a.opts.WorkDir, LogPath: logPath, Executable: a.opts.Executable, DrainTimeout: p.cfg.DrainTimeout, Unconfined: p.cfg.Unconfined,
		HeartbeatTTL: cmp.Or(p.cfg.Runtime.TTL, coordinator.DefaultTTL), Settings: p.cfg.Settings,
	})
	if err != nil {
		if _, cerr := a.coord.CloseLaunch(context.WithoutCancel(ctx), name, seq, true); cerr != nil {
			a.opts.logger().Warn("closing a failed launch", "pool", name, "seq", seq, "err", cerr)
		}
		failed("failed to launch", err)
		return
	}
	if err := a.opts.Store.SetLaunchProcess(context.WithoutCancel(ctx), a.coord.ApplyID(), name, seq, state.LaunchProcess{
		Handle: resp.ID, Host: resp.Host, PID: resp.PID, Start: resp.ProcessStart, Argv: resp.Argv, WorkDir: a.opts.WorkDir,
	}); err != nil {
		a.opts.logger().Warn("recording a launch", "pool", name, "seq", seq, "err", err)
	}
	w := &launched{pool: p, seq: seq, id: resp.ID, pid: resp.PID, log: logPath, at: a.now()}
	l.workers = append(l.workers, w)
	p.lastLaunchErr = nil
	go l.wait(w)
	a.emit(coordinator.Event{At: a.now(), Kind: EventLaunched, Pool: name, Launch: seq,
		Message: fmt.Sprintf("%s, log %s: %s", w.describe(), logPath, why)})
}

// wait hands the provider's report of w's end to exits, unless the apply
// ended first.
func (l *launcher) wait(w *launched) {
	r, err := l.provider(w).Wait(l.waitCtx, providers.WaitRequest{ID: w.id})
	if l.waitCtx.Err() != nil {
		return
	}
	select {
	case l.exits <- workerExit{w: w, resp: r, err: err}:
	case <-l.waitCtx.Done():
	}
}

// pending counts p's launches that have not registered and not ended.
func (l *launcher) pending(p *poolRun) int {
	n := 0
	for _, w := range l.workers {
		if w.pool == p && !w.exited && w.workerID == "" {
			n++
		}
	}
	return n
}

// expireLaunches stops the workers that did not register within their
// pool's launch_timeout: the credential is revoked first, so a worker that
// starts late cannot join and push the pool past max.
func (l *launcher) expireLaunches(ctx context.Context, now time.Time) {
	a := l.a
	for _, w := range l.workers {
		if w.exited || w.workerID != "" || now.Sub(w.at) <= w.pool.cfg.LaunchTimeout {
			continue
		}
		revoked, err := a.coord.CloseLaunch(ctx, w.pool.name(), w.seq, false)
		if err != nil || !revoked {
			continue // it registered meanwhile; matched at the next step
		}
		prov := l.provider(w)
		prov.Stop(ctx, providers.StopRequest{ID: w.id, Kill: true}) //nolint:errcheck // counted below
		w.pool.failedInRow++
		a.ended(ctx, prov, w, "it never registered")
		a.emit(coordinator.Event{At: a.now(), Kind: EventExited, Pool: w.pool.name(), Launch: w.seq,
			Message: fmt.Sprintf("%s did not register within its launch_timeout of %s: its credential is revoked and it was stopped; see %s",
				w.describe(), w.pool.cfg.LaunchTimeout, w.log)})
	}
}

// matchRegistrations ties registered workers to their launches, by the
// launch sequence their credential was issued for (never by what a worker
// reports), and resets the pool's count of launches that never registered.
func (l *launcher) matchRegistrations() {
	a := l.a
	a.mu.Lock()
	regs := a.registered
	a.registered = nil
	a.mu.Unlock()
	for _, e := range regs {
		for _, w := range l.workers {
			if w.workerID == "" && w.seq == e.Launch && w.pool.name() == e.Pool {
				w.workerID = e.WorkerID
				w.pool.failedInRow = 0
				break
			}
		}
	}
}

// workerExited handles a provider's report that a worker ended: the
// worker's leases are revoked as lost at once (their tasks queued again
// without backoff), a worker that never registered counts toward failing
// its pool (and its pool's failure quotes how it ended), and the exit is
// reported.
func (l *launcher) workerExited(ctx context.Context, ex workerExit) {
	a, w := l.a, ex.w
	if w.exited {
		return // apply stopped it and said so already
	}
	msg := w.describe() + " exited"
	switch {
	case ex.err != nil:
		msg = fmt.Sprintf("%s: its provider could not say how it ended: %v", w.describe(), ex.err)
	case ex.resp.Reason != "":
		msg = w.describe() + " " + ex.resp.Reason
	}
	if w.workerID == "" {
		w.pool.failedInRow++
		msg += " before it registered; see " + w.log
		// Its credential must not register anything now.
		if _, err := a.coord.CloseLaunch(context.WithoutCancel(ctx), w.pool.name(), w.seq, true); err != nil {
			a.opts.logger().Warn("closing the launch of a worker that exited", "pool", w.pool.name(), "seq", w.seq, "err", err)
		}
		w.pool.lastExit = msg
		if ex.err == nil && ex.resp.Permanent {
			w.pool.cannotStart = true
		}
	}
	a.emit(coordinator.Event{At: a.now(), Kind: EventExited, Pool: w.pool.name(), WorkerID: w.workerID, Launch: w.seq, Message: msg})
	a.ended(ctx, l.provider(w), w, msg)
}

// mirrorLiveness hands each registered worker's last sighting (its
// registration or last heartbeat) to its provider when the provider
// mirrors liveness on its target (providers.LivenessMirror: a Kubernetes
// Lease), at most once per heartbeat interval per worker and one call per
// worker at a time, in the background so a slow API server never holds
// up the loop. A failed call is logged and tried again at the next
// sighting.
func (l *launcher) mirrorLiveness(now time.Time) {
	a := l.a
	for _, w := range l.workers {
		if w.exited || w.workerID == "" || w.mirroring.Load() ||
			now.Sub(w.mirroredAt) < cmp.Or(w.pool.cfg.Runtime.HeartbeatInterval, coordinator.DefaultHeartbeatInterval) {
			continue
		}
		m, ok := l.provider(w).(providers.LivenessMirror)
		if !ok {
			continue
		}
		last, ok := a.coord.WorkerLastSeen(w.workerID)
		if !ok || !last.After(w.mirrored) {
			continue
		}
		w.mirroring.Store(true)
		w.mirrored, w.mirroredAt = last, now
		go func(w *launched, id, workerID string, last time.Time) {
			defer w.mirroring.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.MirrorLiveness(ctx, providers.LivenessRequest{ID: id, WorkerID: workerID, Renewed: last}); err != nil {
				a.opts.logger().Debug("mirroring a worker's liveness", "pool", w.pool.name(), "seq", w.seq, "err", err)
			}
		}(w, w.id, w.workerID, last)
	}
}

// ended records that a launched worker is gone: the launch is closed in
// the state (no later apply stops it), the provider cleans up what it left
// (so no attempt of it still runs), and its worker is marked gone: its
// session revoked and, while apply runs (why is not ""), its leases
// revoked at once as lost with why as the recorded cause, so their tasks
// run again without waiting out the ttl. When apply stops its workers (why
// is ""), their leases are left for apply's end, which hands them back
// without cost after an interruption.
func (a *applier) ended(ctx context.Context, prov providers.Provider, w *launched, why string) {
	w.exited = true
	ctx = context.WithoutCancel(ctx)
	if err := a.opts.Store.EndLaunches(ctx, a.coord.ApplyID(), w.pool.name(), []int{w.seq}, a.now()); err != nil {
		a.opts.logger().Warn("recording a launch's end", "pool", w.pool.name(), "seq", w.seq, "err", err)
	}
	a.cleanup(ctx, prov, w)
	if w.workerID == "" {
		return
	}
	err := a.coord.WorkerGone(ctx, w.workerID)
	if why != "" {
		err = a.coord.WorkerLost(ctx, w.workerID, why)
	}
	if err != nil {
		a.opts.logger().Warn("marking a worker gone", "worker", w.workerID, "err", err)
	}
}

// cleanup asks the provider to remove what an exited worker left running
// (for local workers: its attempts' process groups).
func (a *applier) cleanup(ctx context.Context, prov providers.Provider, w *launched) {
	if err := prov.Cleanup(ctx, providers.CleanupRequest{ID: w.id, WorkDir: a.opts.WorkDir}); err != nil {
		a.opts.logger().Warn("cleaning up after a worker", "pool", w.pool.name(), "seq", w.seq, "err", err)
		a.emit(coordinator.Event{At: a.now(), Kind: EventLeftBehind, Pool: w.pool.name(), Launch: w.seq,
			Message: fmt.Sprintf("%s could not be cleaned up after: %v", w.describe(), err)})
	}
}
