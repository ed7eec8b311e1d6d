package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/placement"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/state"
)

// DefaultPlacementThreshold is how long a queued task may wait with no live
// worker whose labels satisfy its placement before Run reports it
// (tasks.unplaceable; `wdc doctor --placement-threshold`).
const DefaultPlacementThreshold = 60 * time.Second

// Run check ids, stable across versions: programs match on them.
const (
	CheckStateFile              = "state.file"
	CheckStateIntegrity         = "state.integrity"
	CheckStateSchema            = "state.schema"
	CheckLockDeadHolder         = "lock.dead_holder"
	CheckWorkersStaleWithLeases = "workers.stale_with_leases"
	CheckLeasesWithoutApply     = "leases.without_apply"
	CheckTasksUnplaceable       = "tasks.unplaceable"
	CheckProcessesLeftover      = "processes.leftover"
	CheckAttemptsConfined       = "attempts.confined"
)

// Check names one check Run runs.
type Check struct {
	ID    string // e.g. CheckStateSchema
	Title string // what it checks, for people
}

// doctorChecks are the checks, in the order Run runs and reports them.
var doctorChecks = []Check{
	{CheckStateFile, "the state file exists, is a regular file of more than 0 bytes, and SQLite can open it"},
	{CheckStateIntegrity, "SQLite's PRAGMA integrity_check passes, and every row keeps the schema's CHECK constraints"},
	{CheckStateSchema, "the schema version is one this wdc knows and every table, index and trigger of it is present"},
	{CheckLockDeadHolder, "no apply lock is held by an apply that is gone"},
	{CheckWorkersStaleWithLeases, "no stale worker holds active leases"},
	{CheckLeasesWithoutApply, "no lease or worker is active while no apply holds the lock"},
	{CheckTasksUnplaceable, "every task queued longer than the placement threshold has a live worker whose labels satisfy its placement"},
	{CheckProcessesLeftover, "nothing an apply that is gone launched still runs"},
	{CheckAttemptsConfined, "the attempts of local pools are confined on this machine: a task cannot read the work folder or signal its agent"},
}

// Checks returns every check, in the order Run runs them.
func Checks() []Check { return append([]Check(nil), doctorChecks...) }

// Severity says how much a finding matters.
type Severity string

// Severities.
const (
	// SeverityError: something is broken or stuck and stays so until
	// someone acts.
	SeverityError Severity = "error"
	// SeverityWarning: something is wrong that may resolve itself, or that
	// the next apply repairs, but that a person should know.
	SeverityWarning Severity = "warning"
	// SeverityInfo: worth knowing; nothing to fix.
	SeverityInfo Severity = "info"
)

// Finding is one problem (or note) a check found.
type Finding struct {
	Check    string   // the check's id, e.g. CheckStateSchema
	Severity Severity // error, warning or info
	// Subject is what it is about: the state file's path, "lock ID", a
	// worker id, task addresses, a process; "" when nothing in particular.
	Subject string
	// Message says what is wrong, in one sentence.
	Message string
	// Details are further lines, e.g. one per pool with the labels its
	// workers lack; nil when none.
	Details []string
	// Fix says what to do; "" for a note that needs nothing.
	Fix string
}

// CheckStatus is the outcome of one check.
type CheckStatus string

// Check statuses.
const (
	CheckPassed  CheckStatus = "passed"  // nothing found, or only info findings
	CheckFailed  CheckStatus = "failed"  // it has error or warning findings
	CheckSkipped CheckStatus = "skipped" // it could not run; Note says why
)

// CheckResult is the outcome of one check.
type CheckResult struct {
	Check
	Status CheckStatus
	Note   string // why it was skipped; "" otherwise
}

// Report is what Run found: every check's outcome, in the order of
// Checks, and the findings, by check in that order.
type Report struct {
	StatePath string // the state file as given in Options
	Checks    []CheckResult
	Findings  []Finding
}

// Count returns how many findings have severity s.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Options says what Run looks at.
type Options struct {
	// StatePath is the state file (required). Run never creates or
	// writes it.
	StatePath string
	// WorkDir is the work folder of the state (default: the state file's
	// folder), where local workers record their attempts' process groups.
	WorkDir string
	// Config is the configuration, for the placement of queued tasks (the
	// state does not record it); nil skips tasks.unplaceable, with
	// NoConfig as the reason.
	Config   *wdchcl.Config
	NoConfig string
	// PlacementThreshold is how long a task may be queued with no live
	// worker able to run it before it is reported (default
	// DefaultPlacementThreshold).
	PlacementThreshold time.Duration
	// Now is the time to judge by (default time.Now()).
	Now time.Time
	// Host is this host's name (default os.Hostname()); ProcessAlive
	// reports whether a pid runs on it (default ProcessAlive).
	Host         string
	ProcessAlive func(pid int) bool
}

// Run checks the state file and what it records, reading only (the
// state is opened read-only, providers only list what they find), and
// returns what every check found. The error is for when it could not look
// at all (a canceled ctx, a state that changed under it); problems of the
// state are findings.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.StatePath == "" {
		return nil, errors.New("doctor: no state file given")
	}
	if opts.WorkDir == "" {
		opts.WorkDir = filepath.Dir(opts.StatePath)
	}
	if opts.PlacementThreshold <= 0 {
		opts.PlacementThreshold = DefaultPlacementThreshold
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	if opts.ProcessAlive == nil {
		opts.ProcessAlive = apply.ProcessAlive
	}
	d := &doctor{opts: opts, report: &Report{StatePath: opts.StatePath}, skipped: map[string]string{}}
	if err := d.run(ctx); err != nil {
		return nil, err
	}
	byCheck := map[string][]Finding{}
	for _, f := range d.found {
		byCheck[f.Check] = append(byCheck[f.Check], f)
	}
	for _, c := range doctorChecks {
		res := CheckResult{Check: c, Status: CheckPassed}
		if note, ok := d.skipped[c.ID]; ok {
			res.Status, res.Note = CheckSkipped, note
		}
		for _, f := range byCheck[c.ID] {
			if f.Severity != SeverityInfo {
				res.Status = CheckFailed
			}
		}
		d.report.Checks = append(d.report.Checks, res)
		d.report.Findings = append(d.report.Findings, byCheck[c.ID]...)
	}
	return d.report, nil
}

// doctor is one run of Run.
type doctor struct {
	opts    Options
	report  *Report
	found   []Finding
	skipped map[string]string // check id → why
}

func (d *doctor) add(f Finding) { d.found = append(d.found, f) }

// skip marks the checks as skipped with the same note.
func (d *doctor) skip(note string, ids ...string) {
	for _, id := range ids {
		d.skipped[id] = note
	}
}

var stateContentChecks = []string{CheckLockDeadHolder, CheckWorkersStaleWithLeases, CheckLeasesWithoutApply, CheckTasksUnplaceable, CheckProcessesLeftover}

func (d *doctor) run(ctx context.Context) error {
	d.checkConfinement()
	path := d.opts.StatePath
	in, err := state.Inspect(ctx, path)
	if err != nil {
		return err
	}
	if !d.checkFile(in) {
		return nil
	}
	st, err := state.OpenReadOnly(ctx, path)
	if err != nil {
		return fmt.Errorf("doctor: the state file passed its checks but does not open: %w", err)
	}
	defer st.Close()
	snap, err := st.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("doctor: %w", err)
	}
	holder := d.checkLock(snap)
	d.checkStaleWorkers(snap, holder)
	d.checkWithoutApply(snap)
	d.checkUnplaceable(snap, holder)
	return d.checkLeftovers(ctx, st, snap, holder)
}

// checkConfinement runs attempts.confined: a warning for tasks of local
// pools that will run unconfined on this machine, a note for what a
// confined attempt cannot do here (plan.ConfinementOf).
func (d *doctor) checkConfinement() {
	if d.opts.Config == nil {
		note := d.opts.NoConfig
		if note == "" {
			note = "no configuration"
		}
		d.skip(note+": its pools are not known", CheckAttemptsConfined)
		return
	}
	c := plan.ConfinementOf(d.opts.Config, d.opts.WorkDir)
	switch {
	case c.Unconfined != "":
		fix := c.Fix
		if fix == "" {
			fix = "Run the local pools' workers where attempts can be confined (Linux 6.12 or later), or accept it and say confine = false in the pools, which the plan shows"
		}
		d.add(Finding{Check: CheckAttemptsConfined, Severity: SeverityWarning, Message: sentence(capitalize(c.Unconfined)) + " An unconfined task can read the work folder (the state, the workers' sessions, the operator credential) and signal its agent.", Fix: sentence(fix)})
	case c.Limits != "":
		d.add(Finding{Check: CheckAttemptsConfined, Severity: SeverityInfo, Message: sentence(capitalize("attempts are confined by " + c.Mechanism + ": " + c.Limits))})
	}
}

// checkFile runs state.file, state.integrity and state.schema from what
// Inspect found, and reports whether the state's content can be checked.
func (d *doctor) checkFile(in *state.Inspection) bool {
	path := d.opts.StatePath
	moveAway := fmt.Sprintf("mv %s %s.damaged", path, path)
	fileChecks := []string{CheckStateIntegrity, CheckStateSchema}
	switch {
	case !in.Exists:
		d.add(Finding{Check: CheckStateFile, Severity: SeverityInfo, Subject: path,
			Message: fmt.Sprintf("There is no state file at %s yet: wdc apply creates it.", path)})
		d.skip("there is no state file", append(fileChecks, stateContentChecks...)...)
		return false
	case in.Problem != nil:
		d.add(fileFinding(path, in.Problem))
		d.skip("the state file cannot be opened: see state.file", append(fileChecks, stateContentChecks...)...)
		return false
	}
	if in.Integrity != nil {
		lines := in.Integrity
		d.add(Finding{Check: CheckStateIntegrity, Severity: SeverityError, Subject: path,
			Message: fmt.Sprintf("SQLite's integrity check of %s reports damage.", path),
			Details: lines,
			Fix: fmt.Sprintf("Restore the state file from a backup. Otherwise SQLite's .recover command can save what is readable into a new file; "+
				"or, to start a fresh state (every task runs again), move it away with its -wal and -shm files, if any: %s.", moveAway)})
	}
	if !in.SchemaRead {
		d.skip("the file is too damaged to read its schema: see state.integrity", CheckStateSchema)
	} else if in.Schema != nil {
		d.add(schemaFinding(path, in))
	}
	switch {
	case in.Integrity != nil:
		d.skip("the state file is damaged: see state.integrity", stateContentChecks...)
		return false
	case in.Schema != nil && errors.Is(in.Schema, state.ErrOutdatedSchema):
		d.skip("the state file has an older schema: see state.schema", stateContentChecks...)
		return false
	case in.Schema != nil:
		d.skip("the state file's schema is not usable: see state.schema", stateContentChecks...)
		return false
	}
	return true
}

// fileFinding is the state.file finding for a file that cannot be opened.
func fileFinding(path string, problem error) Finding {
	f := Finding{Check: CheckStateFile, Severity: SeverityError, Subject: path, Message: sentence(problem.Error())}
	var empty *state.EmptyFileError
	var access *state.AccessError
	switch {
	case errors.As(problem, &empty):
		f.Message = fmt.Sprintf("The state file %s is empty (0 bytes), so it holds no state.", path)
		f.Fix = fmt.Sprintf("To start a fresh state, remove it (rm %s) and run wdc apply; if it should hold the state of earlier applies, restore it from a backup.", path)
	case errors.Is(problem, regularfile.ErrNotRegular):
		f.Fix = "Check --state, WDC_STATE and the wdc block's state setting: each names the state file, a regular file (wdc apply creates it where there is none)."
	case errors.As(problem, &access):
		f.Message = sentence(access.Error())
		f.Fix = "Run wdc as a user who may read and write that folder, or give the permissions to this one (wdc plan and doctor need to create the -shm file beside a WAL state file too)."
	case errors.Is(problem, state.ErrNotState):
		f.Fix = fmt.Sprintf("Check --state, WDC_STATE and the wdc block's state setting; to start a fresh state here instead, move the file away (mv %s %s.damaged).", path, path)
	default:
		f.Fix = "Check the path, --state and the file's permissions."
	}
	return f
}

// schemaFinding is the state.schema finding for in.Schema.
func schemaFinding(path string, in *state.Inspection) Finding {
	f := Finding{Check: CheckStateSchema, Severity: SeverityError, Subject: path, Message: sentence(in.Schema.Error())}
	var damaged *state.DamagedError
	var newer *state.NewerSchemaError
	switch {
	case errors.As(in.Schema, &damaged):
		f.Message = fmt.Sprintf("The state file records schema version %d but lacks %s of it.", damaged.Version, damaged.What())
		f.Details = damaged.Missing
		f.Fix = fmt.Sprintf("Restore the state file from a backup; or, to start a fresh state (every task runs again), move it away with its -wal and -shm files, if any: mv %s %s.damaged. "+
			"Until then every command that opens the state refuses it.", path, path)
	case errors.As(in.Schema, &newer):
		f.Message = fmt.Sprintf("The state file was written by a newer wdc: schema version %d, and this wdc knows up to %d.", newer.Version, newer.Known)
		f.Fix = "Use a wdc at least as new as the one that wrote it (upgrade wdc)."
	case errors.Is(in.Schema, state.ErrOutdatedSchema):
		f.Severity = SeverityWarning
		f.Message = fmt.Sprintf("The state file has schema version %d, and this wdc writes version %d.", in.Version, in.Known)
		f.Fix = "Any writing command (such as wdc apply) upgrades it; an older wdc cannot read it afterwards. wdc plan refuses it until then."
	case errors.Is(in.Schema, state.ErrNotState):
		f.Fix = fmt.Sprintf("Check --state, WDC_STATE and the wdc block's state setting; if it is the state file, restore it from a backup, "+
			"or move it away (mv %s %s.damaged) to start a fresh state.", path, path)
	default:
		f.Fix = "Run wdc doctor again; if it says the same, restore the state file from a backup."
	}
	return f
}

// checkLock runs lock.dead_holder and returns what it judged the holder
// (HolderLive when there is no lock: nothing is dead; callers check
// snap.Lock).
func (d *doctor) checkLock(snap *state.Snapshot) apply.HolderState {
	l := snap.Lock
	if l == nil {
		return apply.HolderLive
	}
	holder := apply.JudgeHolder(*l, d.opts.Host, 0, d.opts.Now, d.opts.ProcessAlive)
	if holder == apply.HolderLive {
		return holder
	}
	who := fmt.Sprintf("lock %s of %s (host %s, pid %d, started %s)", l.ID, l.Holder, l.Host, l.PID, l.StartedAt.UTC().Format(time.RFC3339))
	var msg string
	switch {
	case holder == apply.HolderDead:
		msg = fmt.Sprintf("The apply holding the state lock is gone: %s names a pid that no longer runs on this host.", who)
	case l.Host == d.opts.Host:
		msg = fmt.Sprintf("The apply holding the state lock stopped renewing it: %s expired at %s; its process still runs but is stopped or hung.",
			who, l.ExpiresAt.UTC().Format(time.RFC3339))
	default:
		msg = fmt.Sprintf("The apply holding the state lock stopped renewing it: %s expired at %s (another host: it may be gone).",
			who, l.ExpiresAt.UTC().Format(time.RFC3339))
	}
	unlock := "wdc force-unlock " + l.ID
	if holder == apply.HolderStalled && l.Host == d.opts.Host {
		unlock = "wdc force-unlock --force " + l.ID // its process still runs here
	}
	var waiting []string
	for _, t := range snap.Tasks {
		switch t.Status {
		case state.TaskPending, state.TaskQueued, state.TaskRunning:
			waiting = append(waiting, fmt.Sprintf("%s (%s)", t.Address, t.Status))
		}
	}
	f := Finding{Check: CheckLockDeadHolder, Severity: SeverityWarning, Subject: "lock " + l.ID, Message: msg + " No unfinished task waits behind it.",
		Fix: fmt.Sprintf("The next wdc apply takes the lock over; or remove it with %s.", unlock)}
	if len(waiting) > 0 {
		f.Severity = SeverityError
		f.Message = msg + fmt.Sprintf(" %s behind it, and nothing runs them until an apply takes the lock over.", countNoun(len(waiting), "unfinished task waits", "unfinished tasks wait"))
		f.Details = firstOf(waiting, 10)
		f.Fix = fmt.Sprintf("Run wdc apply: it takes the lock over, stops what the gone apply left running, revokes its leases (their tasks are retried as lost) "+
			"and runs the unfinished tasks. (%s removes the lock by hand.)", unlock)
	}
	d.add(f)
	return holder
}

// applyRunning reports whether a live apply holds the lock.
func applyRunning(snap *state.Snapshot, holder apply.HolderState) bool {
	return snap.Lock != nil && holder == apply.HolderLive
}

// checkStaleWorkers runs workers.stale_with_leases.
func (d *doctor) checkStaleWorkers(snap *state.Snapshot, holder apply.HolderState) {
	leasesOf := map[string][]string{}
	for _, l := range snap.Leases {
		leasesOf[l.WorkerID] = append(leasesOf[l.WorkerID], fmt.Sprintf("%s (attempt %d, fencing token %d, expires %s)",
			l.Task, l.Attempt, l.Token, l.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	for _, w := range snap.Workers {
		if w.Status != state.WorkerStale || w.LeasesHeld == 0 {
			continue
		}
		f := Finding{Check: CheckWorkersStaleWithLeases, Severity: SeverityWarning, Subject: w.ID,
			Message: fmt.Sprintf("Worker %s of pool %s (host %s, pid %d) is stale (silent since %s, past its ttl of %s) and holds %s.",
				w.ID, w.Pool, orNone(w.Host), w.PID, w.LastHeartbeatAt.UTC().Format(time.RFC3339), w.TTL, countNoun(w.LeasesHeld, "active lease", "active leases")),
			Details: leasesOf[w.ID],
			Fix:     "No apply is running to expire them: the next wdc apply revokes them and retries their tasks as lost.",
		}
		if applyRunning(snap, holder) {
			f.Fix = "The running apply's sweep expires them once they pass their expiry and retries their tasks as lost (wdc workers sweep runs a pass now). " +
				"If the worker is alive, check its host's clock and network."
		}
		d.add(f)
	}
}

// checkWithoutApply runs leases.without_apply: with no lock at all (a
// lock whose apply is gone is lock.dead_holder's), an active lease or an
// active or draining worker is one nothing renews, expires or completes;
// it waits for the next apply's recovery. Leases of stale workers are
// workers.stale_with_leases's.
func (d *doctor) checkWithoutApply(snap *state.Snapshot) {
	if snap.Lock != nil {
		return
	}
	stale := map[string]bool{}
	var workers []string
	for _, w := range snap.Workers {
		switch w.Status {
		case state.WorkerStale:
			stale[w.ID] = true
		case state.WorkerActive, state.WorkerDraining:
			workers = append(workers, fmt.Sprintf("worker %s of pool %s (%s; host %s, pid %d, last heartbeat %s)",
				w.ID, w.Pool, w.Status, orNone(w.Host), w.PID, w.LastHeartbeatAt.UTC().Format(time.RFC3339)))
		}
	}
	var leases []string
	for _, l := range snap.Leases {
		if !stale[l.WorkerID] {
			leases = append(leases, fmt.Sprintf("lease of %s (attempt %d, fencing token %d, worker %s, expires %s)",
				l.Task, l.Attempt, l.Token, l.WorkerID, l.ExpiresAt.UTC().Format(time.RFC3339)))
		}
	}
	if len(leases)+len(workers) == 0 {
		return
	}
	var what []string
	if len(leases) > 0 {
		what = append(what, countNoun(len(leases), "active lease", "active leases"))
	}
	if len(workers) > 0 {
		what = append(what, countNoun(len(workers), "active worker", "active workers"))
	}
	d.add(Finding{Check: CheckLeasesWithoutApply, Severity: SeverityWarning,
		Message: fmt.Sprintf("No apply holds the state lock, but the state records %s: nothing renews, expires or completes them (an apply that stopped without finishing, or whose lock was removed).",
			strings.Join(what, " and ")),
		Details: firstOf(append(leases, workers...), 20),
		Fix: "The next wdc apply revokes the leases as lost (their tasks are retried, each loss counting toward its task's max_lost) and marks the workers gone. " +
			"A worker process still running on this host is listed by processes.leftover.",
	})
}

// checkUnplaceable runs tasks.unplaceable.
func (d *doctor) checkUnplaceable(snap *state.Snapshot, holder apply.HolderState) {
	cfg := d.opts.Config
	switch {
	case cfg == nil:
		note := d.opts.NoConfig
		if note == "" {
			note = "no configuration"
		}
		d.skip(note+": placement is not recorded in the state", CheckTasksUnplaceable)
		return
	case !applyRunning(snap, holder):
		d.skip("no apply is running, so no worker is live: queued tasks wait for the next apply, which launches workers for them", CheckTasksUnplaceable)
		return
	}
	byAddress := map[string]*wdchcl.Task{}
	total := map[string]int{}
	for _, t := range cfg.Tasks {
		byAddress[t.Address()] = t
		total[t.Name]++
	}
	var live []state.Worker
	for _, w := range snap.Workers {
		if w.Status == state.WorkerActive {
			live = append(live, w)
		}
	}
	type group struct {
		task    *wdchcl.Task // the first instance
		indices []int
		since   time.Time // the longest wait among them
		details []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, st := range snap.Tasks {
		t := byAddress[st.Address]
		if st.Status != state.TaskQueued || t == nil || d.opts.Now.Sub(st.UpdatedAt) < d.opts.PlacementThreshold {
			continue
		}
		satisfied := false
		for _, w := range live {
			if placement.Satisfies(w.Labels, t.Placement) {
				satisfied = true
				break
			}
		}
		if satisfied {
			continue
		}
		details := unplaceableDetails(cfg, t, live)
		key := t.Name + "\x00" + strings.Join(details, "\x00")
		g := byKey[key]
		if g == nil || t.Index < 0 {
			g = &group{task: t, since: st.UpdatedAt, details: details}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.indices = append(g.indices, t.Index)
		if st.UpdatedAt.Before(g.since) {
			g.since = st.UpdatedAt
		}
	}
	for _, g := range groups {
		subject := g.task.Address()
		verb := "has"
		if g.task.Index >= 0 {
			subject = plan.Instances(g.task.Name, g.indices, total[g.task.Name])
			if len(g.indices) > 1 {
				verb = "have"
			}
		}
		d.add(Finding{Check: CheckTasksUnplaceable, Severity: SeverityWarning, Subject: subject,
			Message: fmt.Sprintf("%s %s been queued for %s (longer than %s), and no live worker's labels satisfy its placement %s.",
				subject, verb, d.opts.Now.Sub(g.since).Round(time.Second), d.opts.PlacementThreshold, placementText(g.task)),
			Details: g.details,
			Fix: "Give a pool whose labels satisfy the placement live workers: a local pool's lost workers are relaunched while work remains " +
				"(see its worker logs); an external pool needs workers joined with such labels (wdc join-token create POOL, without a --label that narrows them away); " +
				"or change the task's placement or a pool's labels and apply again.",
		})
	}
}

// unplaceableDetails says, per pool of the configuration (in declaration
// order) and per pool of live workers that the configuration lacks, why
// none of its live workers can run t: that it has none, or the labels they
// lack.
func unplaceableDetails(cfg *wdchcl.Config, t *wdchcl.Task, live []state.Worker) []string {
	hidden := t.Sensitive.Placement || len(t.Sensitive.PlacementKeys) > 0
	unmet := func(labels map[string]string) string {
		u := placement.Unmet(labels, t.Placement)
		if hidden {
			return fmt.Sprintf("%s (values hidden: computed from a sensitive variable)", countNoun(len(u), "unmet label requirement", "unmet label requirements"))
		}
		return strings.Join(u, "; ")
	}
	byPool := map[string][]state.Worker{}
	var extra []string
	declared := map[string]bool{}
	for _, p := range cfg.Pools {
		declared[p.Name] = true
	}
	for _, w := range live {
		if !declared[w.Pool] && byPool[w.Pool] == nil {
			extra = append(extra, w.Pool)
		}
		byPool[w.Pool] = append(byPool[w.Pool], w)
	}
	sort.Strings(extra)
	var out []string
	describe := func(name string, poolLabels map[string]string, declared bool) {
		workers := byPool[name]
		if len(workers) == 0 {
			line := fmt.Sprintf("pool.%s: no live worker", name)
			if declared && placement.Satisfies(poolLabels, t.Placement) {
				line += " (its labels satisfy the placement: its workers never came, or were lost)"
			} else if declared {
				line += "; its labels: " + unmet(poolLabels)
			}
			out = append(out, line)
			return
		}
		// Workers of one pool may differ (a join token narrows labels):
		// one line per distinct set of unmet requirements.
		counts := map[string]int{}
		var order []string
		for _, w := range workers {
			u := unmet(w.Labels)
			if counts[u] == 0 {
				order = append(order, u)
			}
			counts[u]++
		}
		for _, u := range order {
			out = append(out, fmt.Sprintf("pool.%s (%s): %s", name, countNoun(counts[u], "live worker", "live workers"), u))
		}
	}
	for _, p := range cfg.Pools {
		describe(p.Name, p.Labels, true)
	}
	for _, name := range extra {
		describe(name, nil, false)
	}
	return out
}

// placementText renders a task's placement as `{ can = "build" }`, or
// `{}`; values computed from a sensitive variable are hidden.
func placementText(t *wdchcl.Task) string {
	if len(t.Placement) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(t.Placement))
	for k := range t.Placement {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := fmt.Sprintf("%q", t.Placement[k])
		if t.Sensitive.Placement || t.Sensitive.PlacementKeys[k] {
			v = "(sensitive)"
		}
		parts[i] = k + " = " + v
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// checkLeftovers runs processes.leftover: what applies other than a live
// lock holder launched and still runs.
func (d *doctor) checkLeftovers(ctx context.Context, st *state.Store, snap *state.Snapshot, holder apply.HolderState) error {
	except := ""
	if applyRunning(snap, holder) {
		except = snap.Lock.ID
	}
	leftovers, err := apply.FindLeftovers(ctx, st, d.opts.WorkDir, except, apply.ProviderSettings(d.opts.Config))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		d.add(Finding{Check: CheckProcessesLeftover, Severity: SeverityWarning, Message: sentence("Could not look for everything: " + err.Error()),
			Fix: "Run wdc doctor again; if it says the same, look for worker processes of this state by hand."})
	}
	for _, l := range leftovers {
		f := Finding{Check: CheckProcessesLeftover, Severity: SeverityWarning, Subject: l.What,
			Message: fmt.Sprintf("%s still runs, but the apply that started it is gone.", capitalize(l.What)),
			Fix:     fmt.Sprintf("The next wdc apply stops it when it takes the lock; to stop it now: %s.", l.Stop),
		}
		if except != "" {
			f.Fix = fmt.Sprintf("The running apply did not stop it when it took the lock; stop it: %s.", l.Stop)
		}
		d.add(f)
	}
	return nil
}

// countNoun is "1 task" or "3 tasks".
func countNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// firstOf returns the first n items, and a line counting the rest.
func firstOf(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(items[:n:n], fmt.Sprintf("… and %d more", len(items)-n))
}

// sentence capitalizes s and ends it with a period.
func sentence(s string) string {
	s = capitalize(strings.TrimSpace(s))
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[size:]
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
