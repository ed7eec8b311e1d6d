package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/agent"
	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/cmd/internal/agentcli"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// The worker verbs: a worker as a shell script, in any language, from any
// machine (docs/cli.md, "Being a worker by hand"). They speak worker
// protocol v1 to a running apply's coordinator, as `wdc agent` does.

// WorkersRegisterCmd registers a worker with a join credential.
type WorkersRegisterCmd struct {
	coordinatorFlags
	Pool     string `name:"pool" required:"" placeholder:"NAME" help:"The pool to join; the join file must be for it."`
	JoinFile string `name:"join-file" placeholder:"FILE" help:"The join file from wdc join-token create (default: the launch credential in WDC_LAUNCH_CREDENTIAL)."`
	PID      int    `name:"pid" placeholder:"N" help:"The process id to report (informational; default: the calling process, this command's parent)."`
	JSON     bool   `name:"json" help:"Print {\"worker_id\": …, \"session_token\": …}."`
}

// Run registers and prints the worker id and its session token, as
// shell assignments (eval-able) or JSON.
func (c *WorkersRegisterCmd) Run(e *env) error {
	cred, pin, err := agentcli.Credential(e.getenv, c.JoinFile, c.Pool, c.CASHA256)
	if err != nil {
		return err
	}
	if cred == "" {
		return fmt.Errorf("no credential: give a join file with --join-file (wdc join-token create makes one), or set %s", protocol.LaunchCredentialEnv)
	}
	cl, err := e.workerClient("wdc workers register", c.coordinatorFlags, given(cred), pin)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	pid := c.PID
	if pid == 0 {
		pid = os.Getppid()
	}
	ctx, cancel := callContext(0)
	defer cancel()
	reg, err := cl.Register(ctx, protocol.RegisterRequest{Host: host, PID: pid, Version: Version})
	if err != nil {
		return describeAPIError(err)
	}
	if reg.Pool != c.Pool {
		return fmt.Errorf("the credential registered a worker of pool %q, not %q", reg.Pool, c.Pool)
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, map[string]any{"worker_id": reg.WorkerID, "session_token": reg.SessionToken, "pool": reg.Pool,
			"labels": reg.Labels, "capacity": reg.Capacity, "heartbeat_interval_seconds": float64(reg.HeartbeatIntervalMS) / 1000,
			"ttl_seconds": float64(reg.TTLMS) / 1000})
	}
	fmt.Fprintf(e.stdout, "WDC_WORKER_ID=%s\n%s=%s\n", reg.WorkerID, protocol.SessionTokenEnv, reg.SessionToken)
	fmt.Fprintf(e.stderr, "Registered worker %s in pool %s (heartbeat every %s, ttl %s). Export %s for the other verbs.\n",
		reg.WorkerID, reg.Pool, time.Duration(reg.HeartbeatIntervalMS)*time.Millisecond, time.Duration(reg.TTLMS)*time.Millisecond, protocol.SessionTokenEnv)
	return nil
}

// WorkersHeartbeatCmd sends one heartbeat.
type WorkersHeartbeatCmd struct {
	coordinatorFlags
	ID    string  `arg:"" help:"The worker id."`
	Lease []int64 `name:"lease" placeholder:"TOKEN" help:"Fencing token of a lease this worker holds (repeatable): report every one, or it is handed back."`
	JSON  bool    `name:"json" help:"Print the answer as JSON."`
}

// Run sends the heartbeat and prints the leases renewed and the drain flag.
func (c *WorkersHeartbeatCmd) Run(e *env) error {
	cl, err := e.workerClient("wdc workers heartbeat", c.coordinatorFlags, e.sessionToken, "")
	if err != nil {
		return err
	}
	ctx, cancel := callContext(0)
	defer cancel()
	leases := c.Lease
	if leases == nil {
		leases = []int64{}
	}
	resp, err := cl.Heartbeat(ctx, c.ID, protocol.HeartbeatRequest{Leases: leases})
	if err != nil {
		return describeAPIError(err)
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, resp)
	}
	fmt.Fprintf(e.stdout, "renewed %d\ndrain %t\n", resp.Renewed, resp.Drain)
	if len(resp.CancelLeases) > 0 {
		fmt.Fprintf(e.stdout, "cancel %s\n", joinTokens(resp.CancelLeases))
	}
	return nil
}

// WorkersLeaveCmd deregisters a worker.
type WorkersLeaveCmd struct {
	coordinatorFlags
	ID     string `arg:"" help:"The worker id."`
	Reason string `name:"reason" placeholder:"TEXT" help:"Why the worker leaves (recorded with the leases it hands back)."`
	JSON   bool   `name:"json" help:"Print the answer as JSON."`
}

// Run deregisters the worker and prints the leases it handed back.
func (c *WorkersLeaveCmd) Run(e *env) error {
	cl, err := e.workerClient("wdc workers leave", c.coordinatorFlags, e.sessionToken, "")
	if err != nil {
		return err
	}
	ctx, cancel := callContext(0)
	defer cancel()
	resp, err := cl.Leave(ctx, c.ID, protocol.LeaveRequest{Reason: c.Reason})
	if err != nil {
		return describeAPIError(err)
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, resp)
	}
	fmt.Fprintf(e.stdout, "left %s\n", c.ID)
	if len(resp.Released) > 0 {
		fmt.Fprintf(e.stdout, "released %s\n", joinTokens(resp.Released))
		fmt.Fprintf(e.stderr, "Handed back %s without cost to their tasks' retries: they run again on another worker.\n",
			plural.Count(len(resp.Released), "lease", "leases"))
	}
	return nil
}

// WorkersAssignCmd claims one task.
type WorkersAssignCmd struct {
	coordinatorFlags
	ID       string        `arg:"" help:"The worker id."`
	Wait     time.Duration `name:"wait" default:"30s" help:"How long to wait for a task the worker's labels allow (the coordinator caps it at 30s)."`
	InputsTo string        `name:"inputs-to" placeholder:"DIR" help:"Download the task's inputs (its inputs and the outputs its input blocks take) into DIR, hash-checked, as the agent puts them into an attempt's directory."`
	JSON     bool          `name:"json" help:"Print {\"assignment\": … or null, \"drain\": …}."`
}

// Run claims at most one assignment and prints it: task, attempt,
// fencing_token, expires_at, def_hash and the spec, one "name value" line
// each. Nothing is printed on stdout when there is none (the reason goes to
// stderr); "drain true" when the coordinator asks the worker to stop.
func (c *WorkersAssignCmd) Run(e *env) error {
	if c.Wait < 0 {
		return fmt.Errorf("--wait must not be negative, have %s", c.Wait)
	}
	cl, err := e.workerClient("wdc workers assign", c.coordinatorFlags, e.sessionToken, "")
	if err != nil {
		return err
	}
	ctx, cancel := callContext(c.Wait)
	defer cancel()
	resp, err := cl.Claim(ctx, c.ID, protocol.ClaimRequest{Max: 1, WaitMS: c.Wait.Milliseconds()})
	if err != nil {
		return describeAPIError(err)
	}
	var asg *protocol.Assignment
	if len(resp.Assignments) > 0 {
		asg = &resp.Assignments[0]
	}
	if asg != nil && c.InputsTo != "" {
		if err := fetchInputs(cl, c.InputsTo, asg.Inputs); err != nil {
			return fmt.Errorf("the lease %d of %s is yours (post its result), but its inputs could not be fetched: %w", asg.FencingToken, asg.Task, err)
		}
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, struct {
			Assignment *protocol.Assignment `json:"assignment"`
			Drain      bool                 `json:"drain"`
		}{asg, resp.Drain})
	}
	if asg == nil {
		if resp.Drain {
			fmt.Fprintln(e.stdout, "drain true")
			fmt.Fprintln(e.stderr, "No task: the coordinator asks this worker to drain (finish what it holds, then stop).")
		} else {
			fmt.Fprintf(e.stderr, "No task assigned within %s.\n", c.Wait)
		}
		return nil
	}
	cmd, env := compactJSON(asg.Definition.Command), compactJSON(asg.Definition.Env)
	fmt.Fprintf(e.stdout, "task %s\nattempt %d\nfencing_token %d\nexpires_at %s\ndef_hash %s\ntimeout_seconds %g\nwork_dir %s\ncommand %s\nenv %s\n",
		asg.Task, asg.Attempt, asg.FencingToken, asg.ExpiresAt.UTC().Format(time.RFC3339Nano), asg.DefHash,
		time.Duration(asg.TimeoutMS*int64(time.Millisecond)).Seconds(), asg.WorkDir, cmd, env)
	for _, in := range asg.Inputs {
		fmt.Fprintf(e.stdout, "input %s %s %d\n", in.Path, in.SHA256, in.Size)
	}
	for _, o := range asg.Definition.Outputs {
		fmt.Fprintf(e.stdout, "output %s\n", o)
	}
	if resp.Drain {
		fmt.Fprintln(e.stdout, "drain true")
	}
	return nil
}

// fetchInputs downloads inputs into dir (created when missing).
func fetchInputs(cl *protocol.Client, dir string, inputs []protocol.InputFile) error {
	for _, in := range inputs {
		dst, err := agent.InputPath(dir, in)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		ctx, cancel := callContext(time.Duration(in.Size>>20) * time.Second)
		err = agent.FetchInput(ctx, cl, dst, in)
		cancel()
		if err != nil {
			return fmt.Errorf("input %s: %w", in.Path, describeAPIError(err))
		}
	}
	return nil
}

// LeasesCompleteCmd posts a lease's result.
type LeasesCompleteCmd struct {
	coordinatorFlags
	Token          int64    `arg:"" help:"The lease's fencing token (from wdc workers assign)."`
	Worker         string   `name:"worker" required:"" placeholder:"ID" help:"The worker id (the session's)."`
	ExitCode       *int     `name:"exit-code" required:"" placeholder:"N" help:"The command's exit status: 0 succeeds, anything else is a failure."`
	Error          string   `name:"error" placeholder:"TEXT" help:"Why it failed, as the task's events and wdc tasks show will say."`
	IdempotencyKey string   `name:"idempotency-key" placeholder:"K" help:"Makes a retried call safe (default: one derived from the token and the worker)."`
	Stdout         string   `name:"stdout" placeholder:"FILE" help:"The command's stdout, sent as the attempt's stdout log (wdc logs)."`
	Stderr         string   `name:"stderr" placeholder:"FILE" help:"The command's stderr, sent as the attempt's stderr log (its last lines are shown where a failure is reported)."`
	Output         []string `name:"output" sep:"none" placeholder:"NAME=FILE" help:"An output of the task (repeatable): NAME is its path relative to the attempt's directory, as the task's outputs match it; FILE is where it is here."`
	// Recommendations is a recommendations file, as an agent sends the
	// one an attempt left in its directory.
	Recommendations string `name:"recommendations" placeholder:"FILE" help:"The follow-up work the attempt recommends: a JSON list of {\"type\", \"input\"} objects (at most 64 KiB), judged by the configuration's edges when the result is accepted and the exit code is 0."`
	JSON            bool   `name:"json" help:"Print the coordinator's answer as JSON."`
}

// artifacts hashes the files named by --stdout, --stderr and --output and
// returns the references a result names and where each blob is.
func (c *LeasesCompleteCmd) artifacts() ([]protocol.ArtifactRef, map[string]string, error) {
	var refs []protocol.ArtifactRef
	files := map[string]string{}
	add := func(kind, name, file, media string) error {
		h, size, err := artifact.HashFile(file)
		if err != nil {
			return fmt.Errorf("the %s %s: %w", kind, name, err)
		}
		refs = append(refs, protocol.ArtifactRef{Kind: kind, Name: name, SHA256: h, Size: size, MediaType: media})
		files[h] = file
		return nil
	}
	for _, l := range []struct{ name, file string }{{"stdout", c.Stdout}, {"stderr", c.Stderr}} {
		if l.file != "" {
			if err := add(protocol.ArtifactLog, l.name, l.file, "text/plain; charset=utf-8"); err != nil {
				return nil, nil, err
			}
		}
	}
	seen := map[string]bool{}
	for _, o := range c.Output {
		name, file, ok := strings.Cut(o, "=")
		if !ok || name == "" || file == "" {
			return nil, nil, fmt.Errorf("--output %q: write NAME=FILE (NAME as the task's outputs match it, e.g. out/r.json=./r.json)", o)
		}
		if err := protocol.CheckArtifactName(name); err != nil {
			return nil, nil, fmt.Errorf("--output %q: NAME %v", o, err)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("--output %q: output %s is given twice", o, name)
		}
		seen[name] = true
		if err := add(protocol.ArtifactOutput, name, file, mime.TypeByExtension(path.Ext(name))); err != nil {
			return nil, nil, err
		}
	}
	return refs, files, nil
}

// Run posts the result and prints the decision (accepted, or rejected with
// its reason) and whether it was a replay. A rejection is an answer, not
// an error: the exit code is 0 either way.
func (c *LeasesCompleteCmd) Run(e *env) error {
	if c.Token < 1 {
		return fmt.Errorf("the fencing token must be a positive integer, have %d", c.Token)
	}
	refs, files, err := c.artifacts() // before anything is posted
	if err != nil {
		return err
	}
	cl, err := e.workerClient("wdc leases complete", c.coordinatorFlags, e.sessionToken, "")
	if err != nil {
		return err
	}
	key := c.IdempotencyKey
	if key == "" {
		key = c.Worker + "-" + strconv.FormatInt(c.Token, 10)
	}
	now := time.Now().UTC()
	req := protocol.ResultRequest{WorkerID: c.Worker, IdempotencyKey: key, ExitCode: c.ExitCode, Error: c.Error, StartedAt: now, EndedAt: now}
	if *c.ExitCode != 0 {
		req.FailureClass = "failure"
		if req.Error == "" {
			req.Error = fmt.Sprintf("exit status %d", *c.ExitCode)
		}
	}
	req.Artifacts = refs
	if c.Recommendations != "" {
		if _, err := os.Stat(c.Recommendations); err != nil {
			return fmt.Errorf("--recommendations: %w", err)
		}
		// As an agent reads the file an attempt left.
		raw, problem := agent.ReadRecommendationsFile(c.Recommendations)
		if problem != "" {
			return fmt.Errorf("--recommendations %s: %s", c.Recommendations, problem)
		}
		req.Recommendations = raw
	}
	var resp protocol.ResultResponse
	for round := 0; ; round++ {
		ctx, cancel := callContext(0)
		resp, err = cl.PostResult(ctx, c.Token, req)
		cancel()
		var ae *protocol.APIError
		if !errors.As(err, &ae) || ae.Code != protocol.CodeMissingArtifacts || round == 3 {
			break
		}
		// Not a decision yet: send only what the coordinator lacks.
		fmt.Fprintf(e.stderr, "The coordinator lacks %d of the result's %d blobs: uploading them.\n", len(ae.Missing), len(req.Artifacts))
		for _, h := range ae.Missing {
			if err := uploadBlob(cl, h, files[h]); err != nil {
				return err
			}
		}
	}
	if err != nil {
		return describeAPIError(err)
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, resp)
	}
	line := "decision " + resp.Decision
	if resp.Reason != "" {
		line += "\nreason " + resp.Reason
	}
	fmt.Fprintf(e.stdout, "%s\nduplicate %t\n", line, resp.Duplicate)
	return nil
}

// WorkersLeaseCmd shows a task's current lease (operator).
type WorkersLeaseCmd struct {
	Task string `arg:"" help:"The task address (task.NAME or task.NAME[INDEX]; a bare name works)."`
	JSON bool   `name:"json" help:"Print the answer as JSON."`
}

// Run asks the running apply's coordinator for the task's latest lease.
func (c *WorkersLeaseCmd) Run(e *env) error {
	cl, _, err := e.operatorClient("wdc workers lease")
	if err != nil {
		return err
	}
	ctx, cancel := callContext(0)
	defer cancel()
	resp, err := cl.Lease(ctx, normalizeAddress(c.Task))
	if err != nil {
		return describeAPIError(err)
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, resp)
	}
	if resp.Lease == nil {
		_, err := fmt.Fprintf(e.stdout, "%s has no lease yet.\n", resp.Task)
		return err
	}
	l := resp.Lease
	_, err = fmt.Fprintf(e.stdout, "task %s\nfencing_token %d\nattempt %d\nworker %s\nstatus %s\ngranted_at %s\nexpires_at %s\ndef_hash %s\n",
		l.Task, l.FencingToken, l.Attempt, l.WorkerID, l.Status, views.FormatTime(l.GrantedAt), views.FormatTime(l.ExpiresAt), l.DefHash)
	return err
}

// WorkersSweepCmd runs one sweep pass now (operator).
type WorkersSweepCmd struct {
	JSON bool `name:"json" help:"Print the answer as JSON."`
}

// Run asks the running apply's coordinator for one sweep pass and prints
// what it expired and marked stale.
func (c *WorkersSweepCmd) Run(e *env) error {
	cl, _, err := e.operatorClient("wdc workers sweep")
	if err != nil {
		return err
	}
	ctx, cancel := callContext(0)
	defer cancel()
	resp, err := cl.Sweep(ctx)
	if err != nil {
		return describeAPIError(err)
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, resp)
	}
	if len(resp.Expired)+len(resp.Stale) == 0 {
		_, err := fmt.Fprintln(e.stdout, "Sweep: nothing expired, no worker stale.")
		return err
	}
	for _, l := range resp.Expired {
		fmt.Fprintf(e.stdout, "expired %s attempt %d (fencing token %d, worker %s)\n", l.Task, l.Attempt, l.FencingToken, l.WorkerID)
	}
	for _, w := range resp.Stale {
		fmt.Fprintf(e.stdout, "stale %s\n", w)
	}
	return nil
}

func joinTokens(ts []int64) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = strconv.FormatInt(t, 10)
	}
	return strings.Join(s, " ")
}

// compactJSON encodes v on one line without HTML escaping ("<", ">" and
// "&" stay as they are, as a shell command line has them).
func compactJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // string slices and maps always encode
	return strings.TrimSuffix(b.String(), "\n")
}

// uploadBlob PUTs the file as the blob with hash h.
func uploadBlob(cl *protocol.Client, h, file string) error {
	if file == "" {
		return fmt.Errorf("the coordinator asks for blob %s, which this result does not name", h)
	}
	f, fi, err := regularfile.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := callContext(time.Duration(fi.Size()>>20) * time.Second) // at least 1 MiB/s
	defer cancel()
	if _, err := cl.PutArtifact(ctx, h, f, fi.Size()); err != nil {
		return fmt.Errorf("uploading %s: %w", file, describeAPIError(err))
	}
	return nil
}
