package ray

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/providers"
)

// maxTokenFileBytes is the most read of a token_file: Ray's auth token is
// a line of text.
const maxTokenFileBytes = 64 << 10

// Name is the provider's name as pools write it.
const Name = "ray"

// TokenEnv is the environment variable holding Ray's auth token when a
// ray block names no token_file (Ray's own tools read it too).
const TokenEnv = "RAY_AUTH_TOKEN"

// MinVersion is the oldest Ray (GET /api/version's ray_version) a dry
// run accepts. It is a floor wdc chose, not a measured one: wdc is tested
// against Ray 2.60, and older heads are untested.
const MinVersion = "2.9.0"

// Defaults of the provider's timing.
const (
	// DefaultPollInterval is how often a worker's job is read.
	DefaultPollInterval = 500 * time.Millisecond
	// DefaultLogInterval is how often a running job's log is copied.
	DefaultLogInterval = 2 * time.Second
	// DefaultStopWait bounds how long a kill, Cleanup and Reclaim wait for
	// a stopped job to end (Ray's SIGKILL follows its SIGTERM after 3 s by
	// default).
	DefaultStopWait = 15 * time.Second
	// requestTimeout bounds one API call.
	requestTimeout = 30 * time.Second
)

// Info is what the provider registers with.
var Info = providers.Info{
	Name:         Name,
	Source:       providers.SourceBuiltIn,
	Summary:      "workers as Ray jobs, through the Ray Jobs REST API",
	Capabilities: providers.Capabilities{Render: true, DryRun: true, ClusterWrites: true},
	Creates:      "Ray jobs on a Ray cluster",
	Schema:       &Schema,
}

func init() {
	providers.Register(Info, func() providers.Provider { return New() })
}

var (
	_ providers.Provider       = (*Provider)(nil)
	_ providers.Renderer       = (*Provider)(nil)
	_ providers.DryRunner      = (*Provider)(nil)
	_ providers.LeftoverFinder = (*Provider)(nil)
)

// Provider launches workers as Ray jobs, one job per worker, and watches
// each with its own poller (GET /api/jobs/{id} every PollInterval until
// the job's status is terminal), copying the job's log into the launch's
// log file as it grows. IDs are "ray:SUBMISSION_ID". A launch request's
// Settings are the pool's *Settings. Safe for concurrent use.
type Provider struct {
	// PollInterval, LogInterval and StopWait default to
	// DefaultPollInterval, DefaultLogInterval and DefaultStopWait; tests
	// shorten them. Set them before the first launch.
	PollInterval, LogInterval, StopWait time.Duration
	// HTTP does the requests (http.DefaultClient when nil).
	HTTP *http.Client
	// AgentBinary is the binary a pool without wdc_path uploads to the
	// head; "" means $WDC_AGENT_BINARY, else wdc-agent beside the running
	// executable, else the running executable. Set it before the first
	// launch.
	AgentBinary string

	pkgMu    sync.Mutex
	pkg      *Package        // the agent's package, once hashed
	uploaded map[string]bool // "ADDRESS URI": the head has it

	ctx    context.Context // the pollers'; Close cancels it
	cancel context.CancelFunc

	mu      sync.Mutex
	clients map[clientKey]*Client
	workers map[string]*worker

	// RedeleteAfter are the delays after a delete at which Cleanup looks
	// again for the job (default DefaultRedeleteAfter); redeletes counts
	// those watches, which Close waits for.
	RedeleteAfter []time.Duration
	redeletes     sync.WaitGroup
}

// DefaultRedeleteAfter: Ray's job manager writes a deleted job back, as
// FAILED and without its metadata ("Job supervisor actor died"), when the
// job's supervisor actor dies after the delete (measured 1.4 s after it on
// Ray 2.60). Cleanup looks for the job again at these delays and deletes
// it again, so nothing of an apply stays on the head.
var DefaultRedeleteAfter = []time.Duration{2 * time.Second, 5 * time.Second}

// New returns a provider. It connects to nothing until a launch.
func New() *Provider {
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{ctx: ctx, cancel: cancel, clients: map[clientKey]*Client{}, workers: map[string]*worker{}}
}

// Name returns "ray".
func (p *Provider) Name() string { return Name }

// clientKey names a head as a block selects it.
type clientKey struct{ address, tokenFile string }

// worker is one launch, as the provider tracks it.
type worker struct {
	id, sub string
	c       *Client
	logPath string

	logMu  sync.Mutex // serializes copying the log
	logOff int        // how much of the job's log the file has

	end *providers.WorkerEnd

	// Guarded by Provider.mu.
	status string // as the poller last read it
}

// clientFor returns the client of a block, reading its token the first
// time: the block's token_file, else RAY_AUTH_TOKEN, else none. Errors: a
// token file that cannot be read or is empty.
func (p *Provider) clientFor(s *Settings) (*Client, error) {
	k := clientKey{s.Address, s.TokenFile}
	p.mu.Lock()
	c := p.clients[k]
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	token := os.Getenv(TokenEnv)
	if s.TokenFile != "" {
		b, err := regularfile.Read(s.TokenFile, maxTokenFileBytes)
		if err != nil {
			return nil, fmt.Errorf("ray: reading the token_file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("ray: the token_file %s is empty", s.TokenFile)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c = p.clients[k]; c == nil {
		c = &Client{Address: s.Address, Token: token, HTTP: p.HTTP}
		p.clients[k] = c
	}
	return c, nil
}

func (p *Provider) pollInterval() time.Duration { return or(p.PollInterval, DefaultPollInterval) }
func (p *Provider) logInterval() time.Duration  { return or(p.LogInterval, DefaultLogInterval) }
func (p *Provider) stopWait() time.Duration     { return or(p.StopWait, DefaultStopWait) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Launch submits the launch's job (Submission) and returns once Ray
// answered 200. A submission answered "already exists" (a retry after a
// lost answer, or a launch retried by its caller) attaches to that job
// when its metadata and entrypoint are this launch's, and is an error
// otherwise; nothing is reported launched unless Ray accepted the job or
// the existing one was verified. The log file is made only then, with a
// first line naming the job. The response's Argv is the entrypoint's
// command (with the block's wdc_path) and Host the block's address.
func (p *Provider) Launch(ctx context.Context, req providers.LaunchRequest) (providers.LaunchResponse, error) {
	s, err := settings(req.Settings)
	if err != nil {
		return providers.LaunchResponse{}, err
	}
	c, err := p.clientFor(s)
	if err != nil {
		return providers.LaunchResponse{}, err
	}
	var workingDir, travel string
	if s.WdcPath == "" {
		pk, how, err := p.ensurePackage(ctx, c)
		if err != nil {
			return providers.LaunchResponse{}, err
		}
		workingDir, travel = pk.URI, "wdc: "+how+"\n"
	}
	sub := Submission(req, s, workingDir)
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err = c.Submit(cctx, sub)
	attached := false
	if errors.Is(err, ErrAlreadyExists) {
		j, gerr := c.Job(cctx, sub.SubmissionID)
		switch {
		case gerr != nil:
			return providers.LaunchResponse{}, fmt.Errorf("ray: job %s exists on %s and could not be read: %w", sub.SubmissionID, s.Address, gerr)
		case !sameLaunch(j.Metadata, sub.Metadata) || j.Entrypoint != sub.Entrypoint:
			return providers.LaunchResponse{}, fmt.Errorf("ray: job %s exists on %s and is not this launch's (metadata %v)", sub.SubmissionID, s.Address, j.Metadata)
		}
		err, attached = nil, true
	}
	if err != nil {
		return providers.LaunchResponse{}, fmt.Errorf("ray: submitting job %s to %s: %w", sub.SubmissionID, s.Address, err)
	}
	id := "ray:" + sub.SubmissionID
	w := &worker{id: id, sub: sub.SubmissionID, c: c, logPath: req.LogPath, end: providers.NewWorkerEnd(), status: StatusPending}
	p.mu.Lock()
	p.workers[id] = w
	p.mu.Unlock()
	if req.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(req.LogPath), 0o700); err == nil {
			how := "submitted"
			if attached {
				how = "attached to"
			}
			line := fmt.Sprintf("wdc: %s Ray job %s on %s (pool %s, launch %d); the agent's output follows\n", how, sub.SubmissionID, s.Address, req.Pool, req.Seq)
			os.WriteFile(req.LogPath, []byte(travel+line), 0o600) //nolint:errcheck // the log is for people
		}
	}
	go p.poll(w)
	return providers.LaunchResponse{ID: id, Argv: providers.Render(agentRequest(req, s)), Host: s.Address}, nil
}

// poll reads the worker's job until its status is terminal (or the job is
// gone), copying its log as it grows, then records the end. A read that
// fails is tried again at the next tick: the job may still run.
func (p *Provider) poll(w *worker) {
	tick := time.NewTicker(p.pollInterval())
	defer tick.Stop()
	var logged time.Time
	for {
		ctx, cancel := context.WithTimeout(p.ctx, requestTimeout)
		j, err := w.c.Job(ctx, w.sub)
		cancel()
		switch {
		case errors.Is(err, ErrNotFound):
			p.syncLog(w)
			w.end.Finish(providers.WaitResponse{Reason: fmt.Sprintf("Ray job %s is gone from %s (deleted)", w.sub, w.c.Address)})
			return
		case err == nil:
			p.mu.Lock()
			w.status = j.Status
			p.mu.Unlock()
			if Terminal(j.Status) {
				p.syncLog(w)
				w.end.Finish(endOf(j))
				return
			}
			if j.Status != StatusPending && time.Since(logged) >= p.logInterval() {
				logged = time.Now()
				p.syncLog(w)
			}
		}
		select {
		case <-tick.C:
		case <-p.ctx.Done():
			return
		}
	}
}

// endOf says how a terminal job ended.
func endOf(j JobDetails) providers.WaitResponse {
	msg := firstLine(strings.SplitN(j.Message, "\n", 2)[0])
	var end providers.WaitResponse
	switch j.Status {
	case StatusSucceeded:
		zero := 0
		end.ExitCode = &zero
		if j.DriverExitCode != nil {
			end.ExitCode = j.DriverExitCode
		}
		end.Reason = fmt.Sprintf("Ray job %s succeeded: the agent exited with status %d", j.SubmissionID, *end.ExitCode)
	case StatusFailed:
		end.ExitCode = j.DriverExitCode
		end.Reason = fmt.Sprintf("Ray job %s failed", j.SubmissionID)
		if j.ErrorType != "" {
			end.Reason += " (" + j.ErrorType + ")"
		}
		if msg != "" {
			end.Reason += ": " + msg
		}
	default: // STOPPED: Ray keeps no exit code for it
		end.Reason = fmt.Sprintf("Ray job %s was stopped (SIGTERM, then SIGKILL after Ray's RAY_JOB_STOP_WAIT_TIME_S)", j.SubmissionID)
		if msg != "" {
			end.Reason += ": " + msg
		}
	}
	if c := end.ExitCode; c != nil {
		// The shell Ray runs the entrypoint with exits 128+n for a
		// command killed by signal n; Python reports -n when the shell
		// itself was.
		switch {
		case *c < 0:
			end.Signal = signalName(-*c)
		case *c > 128 && *c < 128+65:
			end.Signal = signalName(*c - 128)
		}
	}
	return end
}

// signalName names the common signals by number (Linux and macOS agree
// on these), others "signal N".
func signalName(n int) string {
	switch n {
	case 1:
		return "SIGHUP"
	case 2:
		return "SIGINT"
	case 6:
		return "SIGABRT"
	case 9:
		return "SIGKILL"
	case 11:
		return "SIGSEGV"
	case 15:
		return "SIGTERM"
	}
	return "signal " + strconv.Itoa(n)
}

// syncLog appends what the job's log gained since the last copy to the
// launch's log file. Failures are left for the next copy: the log is for
// people.
func (p *Provider) syncLog(w *worker) {
	if w.logPath == "" {
		return
	}
	w.logMu.Lock()
	defer w.logMu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, requestTimeout)
	defer cancel()
	logs, err := w.c.Logs(ctx, w.sub)
	if err != nil || len(logs) <= w.logOff {
		return
	}
	f, err := os.OpenFile(w.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.WriteString(logs[w.logOff:]); err == nil {
		w.logOff = len(logs)
	}
}

// lookup returns the worker an ID names. Errors: a malformed ID, or one
// this provider did not launch.
func (p *Provider) lookup(id string) (*worker, error) {
	sub, ok := strings.CutPrefix(id, "ray:")
	if !ok || sub == "" {
		return nil, fmt.Errorf("ray: %q is not a worker id (ray:SUBMISSION_ID)", id)
	}
	p.mu.Lock()
	w := p.workers[id]
	p.mu.Unlock()
	if w == nil {
		return nil, fmt.Errorf("ray: no worker %q was launched by this apply", id)
	}
	return w, nil
}

// Stop asks Ray to stop the worker's job (POST /api/jobs/{id}/stop):
// Ray sends the entrypoint's process tree SIGTERM and SIGKILL after
// RAY_JOB_STOP_WAIT_TIME_S (3 s by default), so a drain has those
// seconds, not the pool's drain_timeout, unless the cluster sets it
// longer. A kill is the same request; it then waits, up to StopWait or
// until ctx is done, for the poller to see the job end, and returns an
// error when it did not. A PENDING job does not end by a stop (Ray stops
// it once it starts): a kill of one returns at once. Stopping a job that
// ended, or that Ray no longer has, is not an error.
func (p *Provider) Stop(ctx context.Context, req providers.StopRequest) error {
	w, err := p.lookup(req.ID)
	if err != nil {
		return err
	}
	if w.end.Ended() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	_, err = w.c.Stop(cctx, w.sub)
	cancel()
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("ray: stopping job %s: %w", w.sub, err)
	}
	if !req.Kill {
		return nil
	}
	return p.waitEnd(ctx, w, p.stopWait())
}

// waitEnd waits up to d for a stopped worker's job to end; a job still
// PENDING is not waited for.
func (p *Provider) waitEnd(ctx context.Context, w *worker, d time.Duration) error {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	check := time.NewTicker(p.pollInterval())
	defer check.Stop()
	for {
		p.mu.Lock()
		status := w.status
		p.mu.Unlock()
		switch {
		case w.end.Ended():
			return nil
		case status == StatusPending:
			return nil // it ends when it starts; its credential is revoked
		}
		select {
		case <-w.end.Done():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("ray: job %s is still %s %s after it was stopped", w.sub, status, d)
		case <-check.C:
		}
	}
}

// Status reports whether the worker's job still runs (as its poller last
// saw it) and, once it ended, its exit code when Ray gave one.
func (p *Provider) Status(ctx context.Context, req providers.StatusRequest) (providers.StatusResponse, error) {
	w, err := p.lookup(req.ID)
	if err != nil {
		return providers.StatusResponse{}, err
	}
	return w.end.Status(), nil
}

// Wait returns when the poller saw the worker's job end: SUCCEEDED,
// FAILED or STOPPED (Reason quotes the job's message and, for FAILED, its
// error_type; ExitCode is driver_exit_code, which a STOPPED job has not),
// or gone from Ray.
func (p *Provider) Wait(ctx context.Context, req providers.WaitRequest) (providers.WaitResponse, error) {
	w, err := p.lookup(req.ID)
	if err != nil {
		return providers.WaitResponse{}, err
	}
	return w.end.Wait(ctx)
}

// Cleanup copies the rest of an ended worker's job log into its log file
// and deletes the job (DELETE /api/jobs/{id}; Ray keeps the log files). A
// job that still runs is stopped first and waited for, up to StopWait;
// Ray refuses to delete a job that has not ended, so one that does not
// end (a PENDING job, which ends when it starts) is left on Ray, and the
// error says so. A job Ray no longer has is not an error.
func (p *Provider) Cleanup(ctx context.Context, req providers.CleanupRequest) error {
	w, err := p.lookup(req.ID)
	if err != nil {
		return err
	}
	if !w.end.Ended() {
		if err := p.Stop(ctx, providers.StopRequest{ID: req.ID, Kill: true}); err != nil {
			return fmt.Errorf("ray: cleaning up: %w", err)
		}
		p.mu.Lock()
		status := w.status
		p.mu.Unlock()
		if !w.end.Ended() {
			return fmt.Errorf("ray: job %s is %s: it was asked to stop and is left on %s (Ray deletes only jobs that ended)", w.sub, status, w.c.Address)
		}
	}
	p.syncLog(w)
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := w.c.Delete(cctx, w.sub); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("ray: deleting job %s: %w", w.sub, err)
	}
	p.redeleteLater(w.c, w.sub)
	return nil
}

// redeleteLater deletes job sub again, in the background, if it is back
// at one of the RedeleteAfter delays (see DefaultRedeleteAfter).
func (p *Provider) redeleteLater(c *Client, sub string) {
	delays := p.RedeleteAfter
	if delays == nil {
		delays = DefaultRedeleteAfter
	}
	p.redeletes.Add(1)
	go func() {
		defer p.redeletes.Done()
		start := time.Now()
		for _, d := range delays {
			time.Sleep(time.Until(start.Add(d)))
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			if _, err := c.Job(ctx, sub); err == nil {
				c.Delete(ctx, sub) //nolint:errcheck // looked for again at the next delay
			}
			cancel()
		}
	}()
}

// found is one job of a dead apply.
type found struct {
	c      *Client
	job    JobDetails
	record *providers.LaunchRecord
}

// find lists the jobs, on every head the settings and the launch records
// name, whose metadata
// says wdc submitted them for this lineage and one of the dead applies
// (req.ApplyIDs and the apply ids of req.Launches). DRIVER jobs and jobs
// without wdc's metadata are never taken.
func (p *Provider) find(ctx context.Context, req providers.ReclaimRequest) ([]found, error) {
	if req.Lineage == "" {
		return nil, nil // without the lineage nothing is known to be this state's
	}
	dead := map[string]bool{}
	for _, id := range req.ApplyIDs {
		dead[id] = true
	}
	records := map[string]*providers.LaunchRecord{}
	for i, l := range req.Launches {
		dead[l.ApplyID] = true
		records[strings.TrimPrefix(l.ID, "ray:")] = &req.Launches[i]
	}
	if len(dead) == 0 {
		return nil, nil
	}
	var heads []*Settings
	for _, v := range req.Settings {
		s, err := settings(v)
		if err != nil {
			return nil, err
		}
		heads = append(heads, s)
	}
	// A launch records the head it was submitted to (its Host): the
	// heads of pools the configuration no longer has are looked at too,
	// with RAY_AUTH_TOKEN for a token, rather than their jobs taken for
	// gone.
	for _, l := range req.Launches {
		if l.Host != "" && addressProblem(l.Host) == "" {
			heads = append(heads, &Settings{Address: l.Host})
		}
	}
	var out []found
	seen := map[string]bool{}
	for _, s := range heads {
		if seen[s.Address] {
			continue
		}
		seen[s.Address] = true
		c, err := p.clientFor(s)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		jobs, err := c.Jobs(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("ray: listing the jobs on %s: %w", s.Address, err)
		}
		for _, j := range jobs {
			md := j.Metadata
			if j.Type == "DRIVER" || j.SubmissionID == "" || md[MetaManagedBy] != managedBy || md[MetaLineage] != req.Lineage || !dead[md[MetaApplyID]] {
				continue
			}
			out = append(out, found{c: c, job: j, record: records[j.SubmissionID]})
		}
	}
	return out, nil
}

// Reclaim stops the jobs of the dead applies (find) that have not ended,
// waits up to StopWait for them to end (not for PENDING ones, which end
// when they start), and deletes every one that ended. Launch records
// whose job it found not ended are Stopped, the others Gone; Orphans
// counts the jobs it stopped or deleted that have no record.
func (p *Provider) Reclaim(ctx context.Context, req providers.ReclaimRequest) (providers.ReclaimResponse, error) {
	var resp providers.ReclaimResponse
	jobs, err := p.find(ctx, req)
	if err != nil {
		return resp, err
	}
	var errs []error
	stopped := map[string]bool{}
	for _, f := range jobs {
		if Terminal(f.job.Status) {
			continue
		}
		stopped[f.job.SubmissionID] = true
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		if _, err := f.c.Stop(cctx, f.job.SubmissionID); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("stopping job %s: %w", f.job.SubmissionID, err))
		}
		cancel()
	}
	deadline := time.Now().Add(p.stopWait())
	for _, f := range jobs {
		j := f.job
		for !Terminal(j.Status) && j.Status != StatusPending && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return resp, ctx.Err()
			case <-time.After(p.pollInterval()):
			}
			cctx, cancel := context.WithTimeout(ctx, requestTimeout)
			got, err := f.c.Job(cctx, j.SubmissionID)
			cancel()
			if errors.Is(err, ErrNotFound) {
				j.Status = StatusStopped // gone: nothing to delete either
				break
			}
			if err == nil {
				j = got
			}
		}
		switch {
		case j.Status == StatusPending:
			errs = append(errs, fmt.Errorf("job %s is PENDING: it was asked to stop, ends when it starts, and is left on %s", j.SubmissionID, f.c.Address))
		case !Terminal(j.Status):
			errs = append(errs, fmt.Errorf("job %s is still %s %s after it was stopped", j.SubmissionID, j.Status, p.stopWait()))
		default:
			cctx, cancel := context.WithTimeout(ctx, requestTimeout)
			if _, err := f.c.Delete(cctx, j.SubmissionID); err != nil && !errors.Is(err, ErrNotFound) {
				errs = append(errs, fmt.Errorf("deleting job %s: %w", j.SubmissionID, err))
			}
			cancel()
		}
		if f.record == nil {
			resp.OrphanWorkers++
		}
	}
	for _, l := range req.Launches {
		if stopped[strings.TrimPrefix(l.ID, "ray:")] {
			resp.Stopped = append(resp.Stopped, l)
		} else {
			resp.Gone = append(resp.Gone, l)
		}
	}
	if len(errs) > 0 {
		return resp, fmt.Errorf("ray: removing what a dead apply left: %w", errors.Join(errs...))
	}
	return resp, nil
}

// FindLeftovers lists the jobs Reclaim would stop or delete, changing
// nothing; Stop is the Ray CLI command that does it by hand.
func (p *Provider) FindLeftovers(ctx context.Context, req providers.ReclaimRequest) (providers.LeftoversResponse, error) {
	jobs, err := p.find(ctx, req)
	if err != nil {
		return providers.LeftoversResponse{}, err
	}
	var out providers.LeftoversResponse
	for _, f := range jobs {
		md := f.job.Metadata
		what := fmt.Sprintf("Ray job %s (%s) of apply %s (pool %s, launch %s) on %s", f.job.SubmissionID, f.job.Status, md[MetaApplyID], md[MetaPool], md[MetaLaunchSeq], f.c.Address)
		verb := "stop"
		if Terminal(f.job.Status) {
			verb = "delete"
		}
		stop := fmt.Sprintf("ray job %s --address %s %s", verb, f.c.Address, f.job.SubmissionID)
		out.Leftovers = append(out.Leftovers, providers.Leftover{Launch: f.record, What: what, Stop: stop})
	}
	return out, nil
}

// Close stops the provider's pollers and waits for the deletes Cleanup
// still checks (at most the last RedeleteAfter delay). Jobs keep running.
func (p *Provider) Close() error {
	p.cancel()
	p.redeletes.Wait()
	return nil
}

// RenderLaunch returns the job submission a launch would post, as JSON
// with the launch credential shown as "(sensitive)" (RenderedObject kind
// "JobSubmission"), after, for a pool without wdc_path, the agent's
// package it uploads unless the head has it (kind "Package", named by its
// URI; its body says which binary, its size and hash). It connects to
// nothing.
func (p *Provider) RenderLaunch(ctx context.Context, req providers.LaunchRequest) (providers.RenderResponse, error) {
	s, err := settings(req.Settings)
	if err != nil {
		return providers.RenderResponse{}, err
	}
	var workingDir string
	var objs []providers.RenderedObject
	if s.WdcPath == "" {
		pk, err := p.packageFor()
		if err != nil {
			return providers.RenderResponse{}, err
		}
		workingDir = pk.URI
		objs = append(objs, providers.RenderedObject{Kind: "Package", Name: pk.URI, Body: packageBody(pk)})
	}
	sub := Submission(req, s, workingDir)
	body, err := sub.Redacted()
	if err != nil {
		return providers.RenderResponse{}, err
	}
	return providers.RenderResponse{
		Argv:    providers.Render(agentRequest(req, s)),
		Env:     envNames(sub),
		Objects: append(objs, providers.RenderedObject{Kind: "JobSubmission", Name: sub.SubmissionID, Body: body}),
	}, nil
}

// DryRunLaunch checks, submitting nothing, what Ray lets wdc check before
// a submission: that the head answers GET /api/version with a Ray of at
// least MinVersion, and that it takes the token, by reading the job the
// launch would make (GET /api/jobs/{id}, 404 expected). Ray has no dry run
// of a submission, so a job Ray would refuse or leave PENDING (resources
// no node has) shows only at apply. Errors: ErrUnreachable for a head
// that cannot be reached or a token file that cannot be read; a refusal
// for a wrong or missing token, no Jobs API at the address, or a Ray too
// old. A job of that id that exists already is a warning. For a pool
// without wdc_path it also asks the head for the agent's package (GET
// /api/packages/…, which changes nothing but pins a package the head has
// for a while), so a head that refuses the token for packages shows at
// plan.
func (p *Provider) DryRunLaunch(ctx context.Context, req providers.LaunchRequest) (providers.DryRunResponse, error) {
	s, err := settings(req.Settings)
	if err != nil {
		return providers.DryRunResponse{}, err
	}
	c, err := p.clientFor(s)
	if err != nil {
		return providers.DryRunResponse{}, fmt.Errorf("%w: %v", providers.ErrUnreachable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	refusedOrUnreachable := func(what string, err error) error {
		var te *TransportError
		var he *HTTPError
		switch {
		case errors.Is(err, ErrUnauthorized):
			return fmt.Errorf("Ray at %s refused %s: %w", s.Address, what, err)
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("%s at %s: %w (is it the Ray dashboard's address?)", what, s.Address, err)
		case errors.As(err, &te), errors.As(err, &he) && he.Status >= 500:
			return fmt.Errorf("%w: %v", providers.ErrUnreachable, err)
		}
		return fmt.Errorf("Ray at %s refused %s: %w", s.Address, what, err)
	}
	v, err := c.Version(ctx)
	if err != nil {
		return providers.DryRunResponse{}, refusedOrUnreachable("GET /api/version", err)
	}
	if !atLeast(v.RayVersion, MinVersion) {
		return providers.DryRunResponse{}, fmt.Errorf("Ray at %s is version %q; wdc needs Ray %s or later", s.Address, v.RayVersion, MinVersion)
	}
	if s.WdcPath == "" {
		// The agent travels with the jobs: the head must let wdc ask
		// for its package (the upload itself happens at apply).
		pk, err := p.packageFor()
		if err != nil {
			return providers.DryRunResponse{}, err
		}
		if _, err := c.PackageExists(ctx, pk.URI); err != nil {
			return providers.DryRunResponse{}, refusedOrUnreachable("asking for the agent's package "+pk.URI, err)
		}
	}
	id := SubmissionID(req.Lineage, req.ApplyID, req.Pool, req.Seq)
	_, err = c.Job(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return providers.DryRunResponse{}, nil
	case err == nil:
		return providers.DryRunResponse{Warnings: []string{fmt.Sprintf("a job %s exists already on %s", id, s.Address)}}, nil
	}
	return providers.DryRunResponse{}, refusedOrUnreachable("reading a job (the token)", err)
}

// atLeast reports whether version v (e.g. "2.60.0", "3.0.0rc1") is at
// least min, comparing the leading numbers of each dotted part.
func atLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range b {
		var x int
		if i < len(a) {
			x = leadingInt(a[i])
		}
		y := leadingInt(b[i])
		if x != y {
			return x > y
		}
	}
	return true
}

func leadingInt(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	i, _ := strconv.Atoi(s[:n])
	return i
}
