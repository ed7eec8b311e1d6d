package doctor

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/wdc-dev/wdc/providers/local" // the configurations name provider "local"

	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// doctorNow is the time the doctor tests judge by; states are written at
// doctorT0, two minutes earlier.
var (
	doctorT0  = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	doctorNow = doctorT0.Add(2 * time.Minute)
)

const (
	doctorHost    = "doctor-host"
	deadPID       = 4242 // ProcessAlive says no
	livePID       = 4343 // ProcessAlive says yes
	doctorApplyID = "apply-under-test"
)

// doctorConfig: a gpu pool and a cpu pool; task.train needs a gpu, three
// shards of task.shard need a gpu too, task.build runs anywhere.
const doctorConfig = `
pool "gpu" {
  provider = "local"
  labels   = { gpu = "a100" }
}

pool "cpu" {
  provider = "local"
  max      = 2
  labels   = { arch = "amd64" }
}

task "train" {
  command   = ["true"]
  placement = { gpu = "a100" }
}

task "shard" {
  count     = 3
  command   = ["true"]
  placement = { gpu = "a100" }
}

task "build" {
  command = ["true"]
}
`

// doctorFixture is a state file in a temporary folder with the doctor
// configuration beside it.
type doctorFixture struct {
	t    *testing.T
	dir  string
	path string
	cfg  *wdchcl.Config
	st   *state.Store
}

func newDoctorFixture(t *testing.T) *doctorFixture {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(doctorConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	f := &doctorFixture{t: t, dir: dir, path: filepath.Join(dir, ".wdc", "state.db"), cfg: cfg}
	return f
}

// store opens (creating) the fixture's state.
func (f *doctorFixture) store() *state.Store {
	f.t.Helper()
	if f.st == nil {
		st, err := state.Open(context.Background(), f.path)
		if err != nil {
			f.t.Fatal(err)
		}
		f.st = st
		f.t.Cleanup(func() { st.Close() })
	}
	return f.st
}

func (f *doctorFixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// queue records every configured task as queued at doctorT0, and the
// configured pools.
func (f *doctorFixture) queue() {
	f.t.Helper()
	ctx := context.Background()
	st := f.store()
	for _, p := range f.cfg.Pools {
		f.must(st.UpsertPool(ctx, state.Pool{Name: p.Name, Provider: p.Provider, Min: p.Min, Max: p.Max, Capacity: p.Capacity, Labels: p.Labels}, doctorT0))
	}
	defs := plan.Definitions(f.cfg, nil)
	for _, task := range f.cfg.Tasks {
		d := defs[task.Address()]
		f.must(st.UpsertTask(ctx, state.TaskDef{Address: task.Address(), Name: task.Name, Index: task.Index, DefHash: d.Hash,
			Spec: d.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: 1, MaxLost: 3}, doctorT0))
	}
}

// lock takes the apply lock as the given pid of doctorHost (at doctorT0,
// for ttl).
func (f *doctorFixture) lock(pid int, ttl time.Duration) state.Lock {
	f.t.Helper()
	l, _, err := f.store().AcquireLock(context.Background(), state.LockRequest{Holder: "tester@" + doctorHost, Host: doctorHost, PID: pid, TTL: ttl}, doctorT0)
	f.must(err)
	return l
}

// worker registers an active worker of pool with labels.
func (f *doctorFixture) worker(pool string, labels map[string]string) state.Worker {
	f.t.Helper()
	w, err := f.store().RegisterWorker(context.Background(), state.Worker{Pool: pool, Labels: labels, Capacity: 1, Host: doctorHost, PID: livePID,
		HeartbeatInterval: 2 * time.Second, TTL: 10 * time.Second}, doctorT0)
	f.must(err)
	return w
}

// raw runs stmt on the closed state file with a plain SQLite connection, as
// a tool other than wdc would.
func (f *doctorFixture) raw(stmt string) {
	f.t.Helper()
	if f.st != nil {
		f.st.Close()
		f.st = nil
	}
	db, err := sql.Open("sqlite", f.path)
	f.must(err)
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		f.t.Fatalf("%s: %v", stmt, err)
	}
}

// doctor runs Run on the fixture, with the configuration unless noConfig.
func (f *doctorFixture) doctor(mod func(o *Options)) *Report {
	f.t.Helper()
	if f.st != nil {
		f.st.Close() // what an apply leaves: the file, closed
		f.st = nil
	}
	opts := Options{StatePath: f.path, Config: f.cfg, Now: doctorNow, Host: doctorHost,
		ProcessAlive: func(pid int) bool { return pid != deadPID }}
	if mod != nil {
		mod(&opts)
	}
	// A guard, not a measurement: a doctor that hangs fails here rather
	// than at the test binary's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Run(ctx, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// want is a finding a test expects: its check and severity, and text its
// subject, message, details and fix contain.
type want struct {
	check    string
	severity Severity
	contains []string
}

func checkFindings(t *testing.T, r *Report, wants []want) {
	t.Helper()
	if len(r.Findings) != len(wants) {
		t.Errorf("%d findings, want %d:\n%s", len(r.Findings), len(wants), dumpFindings(r))
		return
	}
	for i, w := range wants {
		f := r.Findings[i]
		text := strings.Join(append([]string{f.Subject, f.Message, f.Fix}, f.Details...), "\n")
		if f.Check != w.check || f.Severity != w.severity {
			t.Errorf("finding %d is %s/%s, want %s/%s:\n%s", i, f.Check, f.Severity, w.check, w.severity, dumpFindings(r))
		}
		for _, c := range w.contains {
			if !strings.Contains(text, c) {
				t.Errorf("finding %d (%s) lacks %q:\n%s", i, f.Check, c, text)
			}
		}
	}
}

func dumpFindings(r *Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString(string(f.Severity) + " " + f.Check + " [" + f.Subject + "] " + f.Message + " | " + strings.Join(f.Details, " / ") + " | fix: " + f.Fix + "\n")
	}
	return b.String()
}

// statuses returns the status of every check, by id.
func statuses(r *Report) map[string]CheckStatus {
	out := map[string]CheckStatus{}
	for _, c := range r.Checks {
		out[c.ID] = c.Status
	}
	return out
}

func TestDoctorChecksInOrder(t *testing.T) {
	t.Parallel()
	r := newDoctorFixture(t).doctor(nil)
	if len(r.Checks) != len(Checks()) {
		t.Fatalf("%d check results, want one per check (%d)", len(r.Checks), len(Checks()))
	}
	for i, c := range Checks() {
		if r.Checks[i].ID != c.ID || c.Title == "" {
			t.Errorf("check %d is %q, want %q with a title", i, r.Checks[i].ID, c.ID)
		}
	}
}

// TestDoctorStateFile covers state.file, state.integrity and state.schema,
// each with a file made to trigger it. A dropped table is reported at once
// (the guard in doctor() fails a doctor that hangs).
func TestDoctorStateFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		make    func(f *doctorFixture)
		want    []want
		skipped []string
	}{
		{"no state file", func(f *doctorFixture) {},
			[]want{{CheckStateFile, SeverityInfo, []string{"There is no state file at", ": wdc apply creates it"}}},
			[]string{CheckStateIntegrity, CheckStateSchema, CheckLockDeadHolder, CheckProcessesLeftover}},
		{"healthy", func(f *doctorFixture) { f.queue() }, nil, []string{CheckTasksUnplaceable}},
		{"empty file", func(f *doctorFixture) {
			f.must(os.MkdirAll(filepath.Dir(f.path), 0o755))
			f.must(os.WriteFile(f.path, nil, 0o644))
		}, []want{{CheckStateFile, SeverityError, []string{"is empty (0 bytes)", "rm " + f0path}}},
			[]string{CheckStateIntegrity, CheckStateSchema, CheckLockDeadHolder}},
		{"a FIFO", func(f *doctorFixture) {
			f.must(os.MkdirAll(filepath.Dir(f.path), 0o755))
			f.must(syscall.Mkfifo(f.path, 0o600))
		}, []want{{CheckStateFile, SeverityError, []string{"is a FIFO (named pipe), not a regular file", "the path of a state file"}}},
			[]string{CheckStateIntegrity, CheckStateSchema, CheckLockDeadHolder}},
		{"/dev/zero behind a link", func(f *doctorFixture) {
			f.must(os.MkdirAll(filepath.Dir(f.path), 0o755))
			f.must(os.Symlink("/dev/zero", f.path))
		}, []want{{CheckStateFile, SeverityError, []string{"is a character device (a symbolic link to /dev/zero), not a regular file"}}},
			[]string{CheckStateIntegrity, CheckStateSchema, CheckLockDeadHolder}},
		{"not a database", func(f *doctorFixture) {
			f.must(os.MkdirAll(filepath.Dir(f.path), 0o755))
			f.must(os.WriteFile(f.path, []byte(strings.Repeat("hello ", 1000)), 0o644))
		}, []want{{CheckStateFile, SeverityError, []string{"is not an SQLite database", "Check --state"}}}, nil},
		{"dropped table", func(f *doctorFixture) {
			f.queue()
			f.raw(`DROP TABLE leases`)
		}, []want{{CheckStateSchema, SeverityError, []string{"lacks table leases and 7 indexes and triggers of it", "index leases_task", "Restore the state file from a backup", ".damaged"}}},
			[]string{CheckLockDeadHolder, CheckWorkersStaleWithLeases, CheckTasksUnplaceable, CheckProcessesLeftover}},
		{"dropped index", func(f *doctorFixture) {
			f.queue()
			f.raw(`DROP INDEX leases_one_active_per_task`)
		}, []want{{CheckStateSchema, SeverityError, []string{"lacks index leases_one_active_per_task"}}}, nil},
		{"older schema", func(f *doctorFixture) {
			f.queue()
			f.raw(`DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`)
		}, []want{{CheckStateSchema, SeverityWarning, []string{"this wdc writes version", "upgrades it"}}},
			[]string{CheckLockDeadHolder}},
		{"newer schema", func(f *doctorFixture) {
			f.queue()
			f.raw(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ((SELECT max(version) + 1 FROM schema_migrations), '999_future.sql', 0)`)
		}, []want{{CheckStateSchema, SeverityError, []string{"written by a newer wdc", "upgrade wdc"}}}, nil},
		{"index out of step with its table", func(f *doctorFixture) {
			f.queue()
			f.raw(`PRAGMA writable_schema = ON;
				UPDATE sqlite_master SET rootpage = (SELECT rootpage FROM sqlite_master WHERE name = 'leases_task') WHERE name = 'tasks_status'`)
		}, []want{{CheckStateIntegrity, SeverityError, []string{"integrity check", "tasks_status", "backup"}}},
			[]string{CheckLockDeadHolder}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newDoctorFixture(t)
			for i := range tt.want {
				for j, c := range tt.want[i].contains {
					tt.want[i].contains[j] = strings.ReplaceAll(c, f0path, f.path)
				}
			}
			tt.make(f)
			r := f.doctor(nil)
			checkFindings(t, r, tt.want)
			st := statuses(r)
			for _, id := range tt.skipped {
				if st[id] != CheckSkipped {
					t.Errorf("%s is %s, want skipped", id, st[id])
				}
			}
			for _, w := range tt.want {
				if w.severity != SeverityInfo && st[w.check] != CheckFailed {
					t.Errorf("%s is %s, want failed", w.check, st[w.check])
				}
			}
		})
	}
}

// f0path stands for the fixture's state path in a want, before it exists.
const f0path = "\x00PATH\x00"

func TestDoctorLock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		make func(f *doctorFixture)
		host string // doctor's host; default doctorHost
		want []want
	}{
		{"no lock", func(f *doctorFixture) { f.queue() }, "", nil},
		{"live holder", func(f *doctorFixture) { f.queue(); f.lock(livePID, time.Hour) }, "", nil},
		{"dead holder with queued work", func(f *doctorFixture) { f.queue(); f.lock(deadPID, time.Hour) }, "",
			[]want{{CheckLockDeadHolder, SeverityError, []string{"lock ", "no longer runs on this host", "5 unfinished tasks wait behind it",
				"task.build (queued)", "Run wdc apply: it takes the lock over", "wdc force-unlock "}}}},
		{"dead holder, nothing waiting", func(f *doctorFixture) { f.lock(deadPID, time.Hour) }, "",
			[]want{{CheckLockDeadHolder, SeverityWarning, []string{"No unfinished task waits behind it", "The next wdc apply takes the lock over"}}}},
		{"expired lock of another host", func(f *doctorFixture) { f.queue(); f.lock(livePID, time.Minute) }, "elsewhere",
			[]want{{CheckLockDeadHolder, SeverityError, []string{"stopped renewing it", "another host"}}}},
		{"live pid on this host that stopped renewing", func(f *doctorFixture) { f.queue(); f.lock(livePID, time.Minute) }, "",
			[]want{{CheckLockDeadHolder, SeverityError, []string{"its process still runs but is stopped or hung"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newDoctorFixture(t)
			tt.make(f)
			r := f.doctor(func(o *Options) {
				o.Config = nil // placement is not what this test is about
				if tt.host != "" {
					o.Host = tt.host
				}
			})
			var got []Finding
			for _, fd := range r.Findings {
				if fd.Check == CheckLockDeadHolder {
					got = append(got, fd)
				}
			}
			checkFindings(t, &Report{Findings: got}, tt.want)
		})
	}
}

func TestDoctorStaleWorkerWithLeases(t *testing.T) {
	t.Parallel()
	for _, running := range []bool{true, false} {
		name := map[bool]string{true: "apply running", false: "no apply"}[running]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newDoctorFixture(t)
			f.queue()
			ctx := context.Background()
			if running {
				f.lock(livePID, time.Hour)
			}
			w := f.worker("cpu", map[string]string{"arch": "amd64"})
			idle := f.worker("cpu", map[string]string{"arch": "amd64"})
			_, err := f.store().GrantLease(ctx, state.GrantRequest{Task: "task.build", WorkerID: w.ID, Timeout: time.Hour, Grace: time.Minute}, doctorT0)
			f.must(err)
			f.must(f.store().SetWorkerStatus(ctx, w.ID, state.WorkerStale, doctorT0.Add(15*time.Second)))
			f.must(f.store().SetWorkerStatus(ctx, idle.ID, state.WorkerStale, doctorT0.Add(15*time.Second))) // stale, but holds nothing
			r := f.doctor(func(o *Options) { o.Config = nil })
			fix := "the next wdc apply revokes them"
			if running {
				fix = "The running apply's sweep expires them"
			}
			checkFindings(t, r, []want{{CheckWorkersStaleWithLeases, SeverityWarning, []string{w.ID, "is stale", "holds 1 active lease",
				"task.build (attempt 1, fencing token 1", fix}}})
		})
	}
}

func TestDoctorLeasesWithoutApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		make func(f *doctorFixture)
		want []want
	}{
		{"no lock, an active worker with a lease", func(f *doctorFixture) { f.leased() },
			[]want{{CheckLeasesWithoutApply, SeverityWarning, []string{"No apply holds the state lock, but the state records 1 active lease and 1 active worker",
				"lease of task.build (attempt 1, fencing token 1, worker ", "(active; host doctor-host, pid 4343",
				"The next wdc apply revokes the leases as lost"}}}},
		{"no lock, an idle active worker", func(f *doctorFixture) { f.queue(); f.worker("cpu", nil) },
			[]want{{CheckLeasesWithoutApply, SeverityWarning, []string{"the state records 1 active worker:"}}}},
		{"a live apply holds them", func(f *doctorFixture) { f.lock(livePID, time.Hour); f.leased() }, nil},
		{"a dead apply holds them (lock.dead_holder's)", func(f *doctorFixture) { f.lock(deadPID, time.Hour); f.leased() }, nil},
		{"nothing active", func(f *doctorFixture) { f.queue() }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newDoctorFixture(t)
			tt.make(f)
			r := f.doctor(func(o *Options) { o.Config = nil })
			var got []Finding
			for _, fd := range r.Findings {
				if fd.Check == CheckLeasesWithoutApply {
					got = append(got, fd)
				}
			}
			checkFindings(t, &Report{Findings: got}, tt.want)
			if want := map[bool]CheckStatus{true: CheckFailed, false: CheckPassed}[tt.want != nil]; statuses(r)[CheckLeasesWithoutApply] != want {
				t.Errorf("%s is %s, want %s", CheckLeasesWithoutApply, statuses(r)[CheckLeasesWithoutApply], want)
			}
		})
	}
}

// leased queues the tasks and leases task.build to a new active worker.
func (f *doctorFixture) leased() {
	f.t.Helper()
	f.queue()
	w := f.worker("cpu", map[string]string{"arch": "amd64"})
	_, err := f.store().GrantLease(context.Background(), state.GrantRequest{Task: "task.build", WorkerID: w.ID, Timeout: time.Hour, Grace: time.Minute}, doctorT0)
	f.must(err)
}

func TestDoctorUnplaceable(t *testing.T) {
	t.Parallel()
	gpu := map[string]string{"gpu": "a100"}
	cpu := map[string]string{"arch": "amd64"}
	tests := []struct {
		name  string
		make  func(f *doctorFixture)
		mod   func(o *Options)
		want  []want
		skip  string // note of the skipped check, when skipped
		check CheckStatus
	}{
		{"only a cpu worker is live", func(f *doctorFixture) {
			f.queue()
			f.lock(livePID, time.Hour)
			f.worker("cpu", cpu)
		}, nil, []want{
			// By address, as the state lists tasks.
			{CheckTasksUnplaceable, SeverityWarning, []string{"task.shard (all 3 instances) have been queued"}},
			{CheckTasksUnplaceable, SeverityWarning, []string{"task.train has been queued for 2m0s (longer than 1m0s)", `placement { gpu = "a100" }`,
				"pool.gpu: no live worker (its labels satisfy the placement", `pool.cpu (1 live worker): needs gpu = "a100", has no gpu label`, "join-token"}},
		}, "", CheckFailed},
		{"a gpu worker is live", func(f *doctorFixture) {
			f.queue()
			f.lock(livePID, time.Hour)
			f.worker("gpu", gpu)
		}, nil, nil, "", CheckPassed},
		{"a gpu worker narrowed away from its label", func(f *doctorFixture) {
			f.queue()
			f.lock(livePID, time.Hour)
			f.worker("gpu", map[string]string{})
			f.worker("gpu", map[string]string{"gpu": "t4"})
		}, nil, []want{
			{CheckTasksUnplaceable, SeverityWarning, []string{"task.shard (all 3 instances)"}},
			{CheckTasksUnplaceable, SeverityWarning, []string{`pool.gpu (1 live worker): needs gpu = "a100", has no gpu label`,
				`pool.gpu (1 live worker): needs gpu = "a100", has gpu = "t4"`, "pool.cpu: no live worker; its labels: needs gpu"}},
		}, "", CheckFailed},
		{"queued for less than the threshold", func(f *doctorFixture) {
			f.queue()
			f.lock(livePID, time.Hour)
		}, func(o *Options) { o.PlacementThreshold = 5 * time.Minute }, nil, "", CheckPassed},
		{"no apply running", func(f *doctorFixture) {
			f.queue()
			f.worker("cpu", cpu)
		}, nil, nil, "no apply is running", CheckSkipped},
		{"no configuration", func(f *doctorFixture) {
			f.queue()
			f.lock(livePID, time.Hour)
		}, func(o *Options) { o.Config, o.NoConfig = nil, "no *.wdc.hcl files in /x" }, nil, "no *.wdc.hcl files in /x: placement is not recorded", CheckSkipped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newDoctorFixture(t)
			tt.make(f)
			r := f.doctor(tt.mod)
			var got []Finding
			for _, fd := range r.Findings {
				if fd.Check == CheckTasksUnplaceable {
					got = append(got, fd)
				}
			}
			checkFindings(t, &Report{Findings: got}, tt.want)
			for _, c := range r.Checks {
				if c.ID != CheckTasksUnplaceable {
					continue
				}
				if c.Status != tt.check || !strings.Contains(c.Note, tt.skip) {
					t.Errorf("tasks.unplaceable: %s (%q), want %s with %q", c.Status, c.Note, tt.check, tt.skip)
				}
			}
		})
	}
}

// fakeLeftovers is a provider that finds one leftover per launch record
// and remembers whether anything asked it to stop one.
type fakeLeftovers struct {
	mu       sync.Mutex
	reclaims int
}

const fakeLeftoversName = "doctor-fake"

var theFakeLeftovers = &fakeLeftovers{}

func init() {
	providers.Register(providers.Info{Name: fakeLeftoversName, Source: "test"}, func() providers.Provider { return theFakeLeftovers })
}

func (p *fakeLeftovers) Name() string { return fakeLeftoversName }
func (p *fakeLeftovers) Launch(context.Context, providers.LaunchRequest) (providers.LaunchResponse, error) {
	return providers.LaunchResponse{}, nil
}
func (p *fakeLeftovers) Stop(context.Context, providers.StopRequest) error { return nil }
func (p *fakeLeftovers) Wait(ctx context.Context, _ providers.WaitRequest) (providers.WaitResponse, error) {
	<-ctx.Done()
	return providers.WaitResponse{}, ctx.Err()
}
func (p *fakeLeftovers) Cleanup(context.Context, providers.CleanupRequest) error { return nil }
func (p *fakeLeftovers) Status(context.Context, providers.StatusRequest) (providers.StatusResponse, error) {
	return providers.StatusResponse{}, nil
}
func (p *fakeLeftovers) Reclaim(context.Context, providers.ReclaimRequest) (providers.ReclaimResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reclaims++
	return providers.ReclaimResponse{}, nil
}
func (p *fakeLeftovers) FindLeftovers(_ context.Context, req providers.ReclaimRequest) (providers.LeftoversResponse, error) {
	var resp providers.LeftoversResponse
	for i := range req.Launches {
		l := req.Launches[i]
		resp.Leftovers = append(resp.Leftovers, providers.Leftover{Launch: &l, What: "fake worker of " + l.ApplyID, Stop: "fake-stop " + l.ApplyID})
	}
	return resp, nil
}

func TestDoctorLeftovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		holder int // pid of the lock holder whose apply launched the worker
		want   []want
	}{
		{"of a dead apply", deadPID, []want{
			{CheckLockDeadHolder, SeverityError, nil},
			{CheckProcessesLeftover, SeverityWarning, []string{"Fake worker of ", "still runs, but the apply that started it is gone",
				"The next wdc apply stops it when it takes the lock; to stop it now: fake-stop "}},
		}},
		{"of the live apply", livePID, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newDoctorFixture(t)
			f.queue()
			l := f.lock(tt.holder, time.Hour)
			ctx := context.Background()
			f.must(f.store().RecordLaunch(ctx, state.Launch{ApplyID: l.ID, Pool: "cpu", Seq: 1, Provider: fakeLeftoversName},
				strings.Repeat("ab", 32), doctorT0))
			f.must(f.store().SetLaunchProcess(ctx, l.ID, "cpu", 1, state.LaunchProcess{Handle: "fake:1", Host: doctorHost, PID: livePID}))
			r := f.doctor(func(o *Options) { o.Config = nil })
			checkFindings(t, r, tt.want)
			theFakeLeftovers.mu.Lock()
			defer theFakeLeftovers.mu.Unlock()
			if theFakeLeftovers.reclaims != 0 {
				t.Error("doctor asked a provider to stop something")
			}
		})
	}
}

// TestDoctorNeverWrites: the state file is the same before and after a
// doctor run, whatever it finds.
func TestDoctorNeverWrites(t *testing.T) {
	t.Parallel()
	f := newDoctorFixture(t)
	f.queue()
	f.lock(deadPID, time.Hour)
	f.st.Close()
	f.st = nil
	before, err := os.ReadFile(f.path)
	f.must(err)
	f.doctor(nil)
	after, err := os.ReadFile(f.path)
	f.must(err)
	if string(before) != string(after) {
		t.Error("doctor changed the state file")
	}
}
