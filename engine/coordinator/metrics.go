package coordinator

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wdc-dev/wdc/engine/supervise"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Prometheus metrics (docs/metrics.md). Each coordinator has its own
// registry, so several in one process (tests) never collide. Counters and
// histograms move where their events happen, and their series for the
// apply's pools are resolved once, at start, so the claim and result paths
// pay an atomic add and a histogram observation, nothing more. Gauges (tasks
// by status, queued tasks and workers per pool) are not kept at all: a
// collector reads them from the coordinator's memory at scrape time.

// LatencyBuckets are the upper bounds, in seconds, of the claim and result
// latency histograms: 0.5 ms (an answer from memory) to 5 s (a state file
// waiting on a slow disk).
var LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// rejectReasons are the reasons a result is rejected for; their series
// are resolved at start. Any other reason gets its series when it occurs.
var rejectReasons = [...]string{protocol.ReasonStaleToken, protocol.ReasonLeaseExpired, protocol.ReasonWrongWorker, protocol.ReasonUnknownLease}

// refusalReasons are the reasons a registration is refused for
// (refuseRegistration); their series exist from the start.
var refusalReasons = [...]string{protocol.ReasonCredentialUsed, protocol.ReasonCredentialExpired, protocol.ReasonCredentialRevoked}

// supervisorActions are the actions of a supervisor decision, in the order
// of poolMetrics.decisions.
var supervisorActions = [...]supervise.Action{supervise.Launch, supervise.Drain, supervise.Hold}

// Outcomes of the claim and result latency histograms (label "outcome").
const (
	claimGranted           = "granted"
	claimEmpty             = "empty"
	resultAccepted         = "accepted"
	resultRejected         = "rejected"
	resultDuplicate        = "duplicate"
	resultMissingArtifacts = "missing_artifacts"
)

// metrics are one coordinator's registry and its metric vectors.
type metrics struct {
	registry *prometheus.Registry

	leasesGranted, leasesExpired, leasesReleased, leasesRevoked *prometheus.CounterVec
	resultsAccepted, resultsRejected, resultsDuplicate          *prometheus.CounterVec
	registrationsRefused                                        *prometheus.CounterVec
	decisions                                                   *prometheus.CounterVec
	claimSeconds, resultSeconds                                 *prometheus.HistogramVec

	claimGranted, claimEmpty                        prometheus.Observer
	resultAccepted, resultRejected, resultDuplicate prometheus.Observer
	resultMissingArtifacts                          prometheus.Observer

	mu       sync.Mutex
	unlisted map[string]*poolMetrics // series of pools the apply does not serve (pool "" for a lease of a worker it does not know)
}

// poolMetrics are the resolved counters of one pool.
type poolMetrics struct {
	leasesGranted, leasesExpired, leasesReleased, leasesRevoked prometheus.Counter
	resultsAccepted, resultsDuplicate                           prometheus.Counter
	resultsRejected                                             [len(rejectReasons)]prometheus.Counter
	decisions                                                   [len(supervisorActions)]prometheus.Counter
	// rejectedBy counts a rejection for a reason not in rejectReasons.
	rejectedBy func(reason string) prometheus.Counter
	// registrationRefused counts a refused registration by its reason.
	registrationRefused func(reason string) prometheus.Counter
}

// newMetrics makes the registry of a coordinator: its own metrics, its
// collector of gauges and the Go runtime and process collectors. Errors:
// a metric that does not register (a bug).
func newMetrics(c *Coordinator) (*metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets}, []string{"outcome"})
	}
	m := &metrics{
		registry:         prometheus.NewRegistry(),
		leasesGranted:    counter("wdc_leases_granted_total", "Leases granted to the pool's workers.", "pool"),
		leasesExpired:    counter("wdc_leases_expired_total", "Leases of the pool's workers the sweep expired (attempt lost).", "pool"),
		leasesReleased:   counter("wdc_leases_released_total", "Leases of the pool's workers handed back undelivered or on interruption (no budget spent).", "pool"),
		leasesRevoked:    counter("wdc_leases_revoked_total", "Leases of the pool's workers revoked because the worker was lost or the apply ended (attempt lost).", "pool"),
		resultsAccepted:  counter("wdc_results_accepted_total", "Results of the pool's workers accepted (the lease holder's first post).", "pool"),
		resultsRejected:  counter("wdc_results_rejected_total", "Results of the pool's workers rejected, by reason.", "pool", "reason"),
		resultsDuplicate: counter("wdc_results_duplicate_total", "Result posts of the pool's workers answered with an earlier decision (idempotency replay).", "pool"),
		registrationsRefused: counter("wdc_registrations_refused_total",
			"Registrations with a credential of the pool refused (used or expired launch credential, revoked or expired join token), by reason; the state records at most one per credential per minute.", "pool", "reason"),
		decisions:     counter("wdc_supervisor_decisions_total", "Supervisor steps taken for the pool, by action.", "pool", "action"),
		claimSeconds:  histogram("wdc_claim_duration_seconds", "Time the coordinator spent serving a claim, without the long-poll wait for work, by outcome."),
		resultSeconds: histogram("wdc_result_duration_seconds", "Time the coordinator spent deciding a posted result, by outcome."),
		unlisted:      map[string]*poolMetrics{},
	}
	m.claimGranted = m.claimSeconds.WithLabelValues(claimGranted)
	m.claimEmpty = m.claimSeconds.WithLabelValues(claimEmpty)
	m.resultAccepted = m.resultSeconds.WithLabelValues(resultAccepted)
	m.resultRejected = m.resultSeconds.WithLabelValues(resultRejected)
	m.resultDuplicate = m.resultSeconds.WithLabelValues(resultDuplicate)
	m.resultMissingArtifacts = m.resultSeconds.WithLabelValues(resultMissingArtifacts)
	for _, col := range []prometheus.Collector{
		m.leasesGranted, m.leasesExpired, m.leasesReleased, m.leasesRevoked,
		m.resultsAccepted, m.resultsRejected, m.resultsDuplicate, m.registrationsRefused, m.decisions,
		m.claimSeconds, m.resultSeconds,
		memoryCollector{c},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := m.registry.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forPool resolves the series of one pool.
func (m *metrics) forPool(pool string) *poolMetrics {
	pm := &poolMetrics{
		leasesGranted:    m.leasesGranted.WithLabelValues(pool),
		leasesExpired:    m.leasesExpired.WithLabelValues(pool),
		leasesReleased:   m.leasesReleased.WithLabelValues(pool),
		leasesRevoked:    m.leasesRevoked.WithLabelValues(pool),
		resultsAccepted:  m.resultsAccepted.WithLabelValues(pool),
		resultsDuplicate: m.resultsDuplicate.WithLabelValues(pool),
		rejectedBy:       func(reason string) prometheus.Counter { return m.resultsRejected.WithLabelValues(pool, reason) },
		registrationRefused: func(reason string) prometheus.Counter {
			return m.registrationsRefused.WithLabelValues(pool, reason)
		},
	}
	for i, r := range rejectReasons {
		pm.resultsRejected[i] = m.resultsRejected.WithLabelValues(pool, r)
	}
	for _, r := range refusalReasons {
		pm.registrationRefused(r) // every series from the first scrape
	}
	for i, a := range supervisorActions {
		pm.decisions[i] = m.decisions.WithLabelValues(pool, string(a))
	}
	return pm
}

// rejected is the counter of results rejected for reason.
func (pm *poolMetrics) rejected(reason string) prometheus.Counter {
	for i, r := range rejectReasons {
		if r == reason {
			return pm.resultsRejected[i]
		}
	}
	return pm.rejectedBy(reason)
}

// poolMetrics returns the counters of the pool named pool: resolved at
// start for the apply's pools, made on first use for any other name (""
// for a lease whose worker this coordinator never registered).
func (c *Coordinator) poolMetrics(pool string) *poolMetrics {
	if ps := c.poolByNam[pool]; ps != nil {
		return ps.metrics
	}
	m := c.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	pm := m.unlisted[pool]
	if pm == nil {
		pm = m.forPool(pool)
		m.unlisted[pool] = pm
	}
	return pm
}

// RecordDecision counts one supervisor step for a pool in
// wdc_supervisor_decisions_total{pool, action}; apply calls it for every
// decision it carries out.
func (c *Coordinator) RecordDecision(pool string, d supervise.Decision) {
	pm := c.poolMetrics(pool)
	for i, a := range supervisorActions {
		if a == d.Action {
			pm.decisions[i].Inc()
			return
		}
	}
	c.metrics.decisions.WithLabelValues(pool, string(d.Action)).Inc()
}

// observeClaim records a claim's latency (served minus waited for work);
// a claim that failed (its client went away, the state failed) is not
// observed.
func (c *Coordinator) observeClaim(served, waited time.Duration, resp protocol.ClaimResponse, err error) {
	if err != nil {
		return
	}
	o := c.metrics.claimEmpty
	if len(resp.Assignments) > 0 {
		o = c.metrics.claimGranted
	}
	o.Observe((served - waited).Seconds())
}

// countResult counts a result's answer for the poster's pool and records
// its latency: accepted, rejected by reason, a duplicate (a replay of an
// earlier decision), or missing_artifacts (not a decision: the worker
// uploads and posts again). A result that failed otherwise (a bad
// request, a state error) is neither counted nor observed.
func (c *Coordinator) countResult(pm *poolMetrics, start time.Time, resp protocol.ResultResponse, err error) {
	m := c.metrics
	var o prometheus.Observer
	switch {
	case err != nil && isMissingArtifacts(err):
		o = m.resultMissingArtifacts
	case err != nil:
		return
	case resp.Duplicate:
		pm.resultsDuplicate.Inc()
		o = m.resultDuplicate
	case resp.Decision == state.DecisionAccepted:
		pm.resultsAccepted.Inc()
		o = m.resultAccepted
	default:
		pm.rejected(resp.Reason).Inc()
		o = m.resultRejected
	}
	o.Observe(time.Since(start).Seconds())
}

// isMissingArtifacts reports whether err is a missing_artifacts refusal.
// (Its own function: the error target escapes, and the result path
// should not allocate it for every answer.)
func isMissingArtifacts(err error) bool {
	var cerr *Error
	return errors.As(err, &cerr) && cerr.Code == CodeMissingArtifacts
}

// Gatherer is the coordinator's registry of metrics (docs/metrics.md),
// which package httpapi serves at GET /metrics.
func (c *Coordinator) Gatherer() prometheus.Gatherer { return c.metrics.registry }

// MetricsOpen reports whether the metrics are served without a credential
// (Options.MetricsOpen).
func (c *Coordinator) MetricsOpen() bool { return c.metricsOpen }

// The gauges, read from memory at scrape time.
var (
	tasksDesc = prometheus.NewDesc("wdc_tasks",
		"Tasks of the apply by status.", []string{"status"}, nil)
	queuedTasksDesc = prometheus.NewDesc("wdc_pool_queued_tasks",
		"Tasks the pool's workers could claim now (queued, retry due, dependencies succeeded); a task several pools can run counts in each.", []string{"pool"}, nil)
	unfinishedTasksDesc = prometheus.NewDesc("wdc_pool_unfinished_tasks",
		"Tasks of the apply the pool can run that are not finished; a task several pools can run counts in each.", []string{"pool"}, nil)
	workersDesc = prometheus.NewDesc("wdc_workers",
		"Workers registered with this coordinator, by pool and status.", []string{"pool", "status"}, nil)
	activeLeasesDesc = prometheus.NewDesc("wdc_active_leases",
		"Active leases held by the pool's workers.", []string{"pool"}, nil)
)

// taskStatuses and workerStatuses list every status, so each gauge series
// exists from the first scrape (zero until something has that status).
var (
	taskStatuses = [...]state.TaskStatus{state.TaskPending, state.TaskQueued, state.TaskRunning,
		state.TaskSucceeded, state.TaskFailed, state.TaskCancelled}
	workerStatuses = [...]state.WorkerStatus{state.WorkerActive, state.WorkerDraining, state.WorkerStale, state.WorkerGone}
)

// memoryCollector is the prometheus.Collector of the gauges: at each scrape
// it reads the coordinator's memory once, under its lock, as Progress and
// PoolView do, so nothing is counted twice and the gauges agree with each
// other.
type memoryCollector struct{ c *Coordinator }

// Describe sends the gauges' descriptions.
func (mc memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tasksDesc, queuedTasksDesc, unfinishedTasksDesc, workersDesc, activeLeasesDesc} {
		ch <- d
	}
}

// Collect reads the gauges from the coordinator's memory.
func (mc memoryCollector) Collect(ch chan<- prometheus.Metric) {
	c := mc.c
	c.mu.Lock()
	p := c.progressLocked()
	now := c.now()
	queued := make([]int, len(c.pools))
	for i, ps := range c.pools {
		queued[i] = c.claimableLocked(ps, now)
	}
	c.mu.Unlock()

	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	for _, st := range taskStatuses {
		gauge(tasksDesc, p.Tasks[st], string(st))
	}
	for i, pp := range p.Pools {
		gauge(queuedTasksDesc, queued[i], pp.Name)
		gauge(unfinishedTasksDesc, pp.Unfinished, pp.Name)
		gauge(activeLeasesDesc, pp.Leases, pp.Name)
		byStatus := [len(workerStatuses)]int{pp.Active, pp.Draining, pp.Stale, pp.Gone}
		for j, st := range workerStatuses {
			gauge(workersDesc, byStatus[j], pp.Name, string(st))
		}
	}
}
