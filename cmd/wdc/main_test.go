package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/wdc-dev/wdc/agent/confine"
	"github.com/wdc-dev/wdc/cmd/internal/agentcli"
	"github.com/wdc-dev/wdc/engine/plan"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/internal/s3test"
	"github.com/wdc-dev/wdc/protocol/tlsca"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"wdc": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())) },
		// The worker alone, as cmd/wdc-agent's main runs it.
		"wdc-agent": func() {
			b := agentcli.Build{Name: "wdc-agent", Version: Version, Commit: Commit}
			os.Exit(agentcli.Main(os.Args[1:], os.Stdout, os.Stderr, os.Environ(), b))
		},
	})
}

// TestScripts runs the end-to-end scripts in testdata/scripts. Set
// WDC_UPDATE_SCRIPTS=1 to rewrite their expected output sections.
func TestScripts(t *testing.T) {
	s3Server = s3test.NewLazy(t)
	testscript.Run(t, scriptParams("scripts"))
}

// s3Server is the S3-compatible test server of the scripts named s3_*,
// started for the first of them (internal/s3test: moto's server on
// 127.0.0.1); nil in suites without any.
var s3Server *s3test.Lazy

// setupS3 gives a script named s3_* a bucket of its own on the test
// server, in WDC_VAR_s3_endpoint and WDC_VAR_s3_bucket (the variables
// its configuration declares), with the server's credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and S3_SECRET the secret
// key (to look for it where it must never be). Without a server nothing
// is set: the script's [!s3] skip says why.
func setupS3(env *testscript.Env) error {
	name := strings.TrimPrefix(filepath.Base(env.WorkDir), "script-")
	if !strings.HasPrefix(name, "s3_") || s3Server == nil {
		return nil
	}
	srv, err := s3Server.Get()
	if err != nil {
		return nil
	}
	bucket, err := srv.Bucket(name)
	if err != nil {
		return err
	}
	env.Setenv("WDC_VAR_s3_endpoint", srv.Endpoint)
	env.Setenv("WDC_VAR_s3_bucket", bucket)
	env.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	env.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	env.Setenv("S3_SECRET", s3test.SecretKey)
	return nil
}

// scriptParams returns the testscript parameters every script suite
// shares: the scripts in testdata/DIR, $REPO the repository's root, HOME
// a folder of the script's own, NO_COLOR set, the condition [confined],
// and the custom commands below.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", dir),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("WDC_UPDATE_SCRIPTS") != "",
		// [confined]: this machine confines attempts (confine.Probe).
		// [confined:mount]: by a mount namespace, which hides the work
		// folder even inside a task's dir (root, CAP_SYS_ADMIN). CI runs as
		// root on a kernel that does, so there neither is false without
		// agent/confine's test failing too.
		Condition: func(cond string) (bool, error) {
			switch st := confine.Probe(); cond {
			case "confined":
				return st.Confined, nil
			case "confined:mount":
				return st.Confined && st.Limits == "", nil
			}
			// [s3]: the S3 test server runs (setupS3). In CI a missing
			// one fails the script instead.
			if cond == "s3" {
				if s3Server == nil {
					return false, nil
				}
				_, err := s3Server.Get()
				if err != nil && os.Getenv("CI") == "true" {
					return false, fmt.Errorf("no S3 test server: %v", err)
				}
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			root, err := filepath.Abs(filepath.Join("..", ".."))
			if err != nil {
				return err
			}
			env.Setenv("REPO", root)
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("NO_COLOR", "1")
			return setupS3(env)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"seed-state":       cmdSeedState,
			"wait-file":        cmdWaitFile,
			"wait-coordinator": cmdWaitCoordinator,
			"ci-job":           cmdCIJob,
			"lost-fast":        cmdLostFast,
			"wait-gone":        cmdWaitGone,
			"free-port":        cmdFreePort,
			"break-state":      cmdBreakState,
			"http-get":         cmdHTTPGet,
			"wait-lease":       cmdWaitLease,
			"s3-lock":          cmdS3Lock,
			"s3-put":           cmdS3Put,
			"s3-blobs":         cmdS3Blobs,
			"s3-etag":          cmdS3ETag,
			"json-schema":      cmdJSONSchema,
		},
	}
}

// cmdSeedState records tasks of the configuration in the current directory
// into its default state file, as an apply would have left them:
//
//	seed-state STATUS [ADDR...]
//
// STATUS is a task status (succeeded, failed, …); with no ADDR every task of
// the configuration is recorded. Failed and cancelled tasks get the last
// error "exit status 1".
func cmdSeedState(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("seed-state does not support !")
	}
	if len(args) < 1 {
		ts.Fatalf("usage: seed-state STATUS [ADDR...]")
	}
	status := state.TaskStatus(args[0])
	dir := ts.MkAbs(".")
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{Providers: providers.Schemas()})
	if diags.HasErrors() {
		ts.Fatalf("loading configuration: %s", diags.Error())
	}
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[normalizeAddress(a)] = true
	}
	ctx := context.Background()
	st, err := state.Open(ctx, filepath.Join(dir, defaultStatePath))
	ts.Check(err)
	defer st.Close()
	key, err := st.HashKey(ctx)
	ts.Check(err)
	defs := plan.Definitions(cfg, key)
	now := time.Now()
	seeded := 0
	for _, t := range cfg.Tasks {
		if len(want) > 0 && !want[t.Address()] {
			continue
		}
		d := defs[t.Address()]
		ts.Check(st.UpsertTask(ctx, state.TaskDef{Address: t.Address(), Name: t.Name, Index: t.Index, DefHash: d.Hash,
			Spec: d.Definition.Canonical(), Status: state.TaskQueued, MaxAttempts: t.Retry.MaxAttempts, MaxLost: t.Retry.MaxLost}, now))
		switch status {
		case state.TaskFailed, state.TaskCancelled:
			_, err := st.FinishTasks(ctx, []state.TaskFinish{{Address: t.Address(), Status: status, Reason: "exit status 1"}}, now)
			ts.Check(err)
		case state.TaskSucceeded:
			ts.Check(seedSucceeded(ctx, st, now, t.Address()))
		case state.TaskQueued:
		default:
			ts.Fatalf("seed-state: cannot seed status %q", status)
		}
		seeded++
	}
	if seeded != len(want) && len(want) > 0 {
		ts.Fatalf("seed-state: %d of the %d addresses are in the configuration", seeded, len(want))
	}
	fmt.Fprintf(ts.Stdout(), "seeded %d tasks as %s\n", seeded, status)
}

// cmdWaitFile waits until a file exists (and, with a second argument, until
// its content matches a regular expression), polling with a deadline:
//
//	wait-file PATH [REGEXP]
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: wait-file PATH [REGEXP]")
	}
	var re *regexp.Regexp
	if len(args) == 2 {
		re = regexp.MustCompile(args[1])
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && (re == nil || re.Match(b)) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-file %s: not there (or not matching) after 90s", args[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seedSucceeded makes queued tasks succeeded the only way the state allows
// (an accepted result, docs/design.md §3 invariant 5): a seeding worker
// claims each and posts exit status 0. The attempts and events it leaves
// are those of a real run.
func seedSucceeded(ctx context.Context, st *state.Store, now time.Time, addrs ...string) error {
	const pool, worker = "seed", "w-seed"
	if err := st.UpsertPool(ctx, state.Pool{Name: pool, Provider: "local", Max: 1, Capacity: 1}, now); err != nil {
		return err
	}
	if _, err := st.Worker(ctx, worker); errors.Is(err, state.ErrNotFound) {
		if _, err := st.RegisterWorker(ctx, state.Worker{ID: worker, Pool: pool, Capacity: 1, Host: "seed",
			HeartbeatInterval: time.Second, TTL: time.Hour}, now); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else if err := st.SetWorkerStatus(ctx, worker, state.WorkerActive, now); err != nil {
		return err
	}
	zero := 0
	for _, addr := range addrs {
		l, err := st.ClaimLease(ctx, state.GrantRequest{Task: addr, WorkerID: worker, Timeout: time.Hour}, now)
		if err != nil {
			return fmt.Errorf("seeding %s: %w", addr, err)
		}
		dec, err := st.AcceptResult(ctx, state.ResultInput{Key: fmt.Sprintf("seed-%d", l.Token), Token: l.Token, Task: addr,
			Attempt: l.Attempt, WorkerID: worker, ExitCode: &zero}, nil, now)
		if err != nil {
			return fmt.Errorf("seeding %s: %w", addr, err)
		}
		if dec.Decision != state.DecisionAccepted {
			return fmt.Errorf("seeding %s: result %s: %s", addr, dec.Decision, dec.Detail)
		}
	}
	return st.SetWorkerStatus(ctx, worker, state.WorkerGone, now)
}

// seedFailed ends queued tasks as failed with reason.
func seedFailed(ctx context.Context, st *state.Store, now time.Time, reason string, addrs ...string) error {
	var fin []state.TaskFinish
	for _, a := range addrs {
		fin = append(fin, state.TaskFinish{Address: a, Status: state.TaskFailed, Reason: reason})
	}
	_, err := st.FinishTasks(ctx, fin, now)
	return err
}

// cmdWaitCoordinator waits until an apply holds the state in DIR (default
// the current directory, state .wdc/state.db, or with a backend its working
// copy .wdc/backend/state.db) and its coordinator serves,
// then sets COORDINATOR to its URL, CA_SHA256 to its CA fingerprint and
// APPLY_PID to the apply's process id:
//
//	wait-coordinator [DIR]
func cmdWaitCoordinator(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) > 1 {
		ts.Fatalf("usage: wait-coordinator [DIR]")
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	path := filepath.Join(ts.MkAbs(dir), defaultStatePath)
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ts.MkAbs(dir), defaultBackendWorkPath)); err == nil {
			path = filepath.Join(ts.MkAbs(dir), defaultBackendWorkPath) // a backend's working copy
		}
		if snap, err := readSnapshot(context.Background(), path); err == nil && snap.Lock != nil && snap.Lock.CoordinatorURL != "" {
			ts.Setenv("COORDINATOR", snap.Lock.CoordinatorURL)
			ts.Setenv("CA_SHA256", snap.Lock.CASHA256)
			ts.Setenv("APPLY_PID", strconv.Itoa(snap.Lock.PID))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-coordinator %s: no apply serving after 90s", dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdLostFast checks, from the state, that a task's attempt 2 was leased
// before attempt 1's lease would have expired (a lost worker cost one
// provider event, not a ttl), and that attempt 1's lease ended without
// expiring: revoked when its worker was seen gone, or closed by the lost
// result its agent posted as it was stopped:
//
//	lost-fast TASK
//
// It logs how long after attempt 1's lease ended attempt 2 was leased.
func cmdLostFast(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: lost-fast TASK")
	}
	st, err := state.OpenReadOnly(context.Background(), filepath.Join(ts.MkAbs("."), defaultStatePath))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	defer st.Close()
	leases, err := st.Leases(context.Background(), normalizeAddress(args[0]))
	if err != nil || len(leases) < 2 {
		ts.Fatalf("leases of %s: %d, %v; want at least 2", args[0], len(leases), err)
	}
	sort.Slice(leases, func(i, j int) bool { return leases[i].Attempt < leases[j].Attempt })
	first, second := leases[0], leases[1]
	if first.Status == state.LeaseActive || first.Status == state.LeaseExpired {
		ts.Fatalf("attempt 1's lease is %s, want it ended before its expiry (revoked, or closed by a lost result)", first.Status)
	}
	if !second.GrantedAt.Before(first.ExpiresAt) {
		ts.Fatalf("attempt 2 was leased at %s, not before attempt 1's lease would have expired (%s)",
			second.GrantedAt.Format(time.RFC3339Nano), first.ExpiresAt.Format(time.RFC3339Nano))
	}
	ts.Logf("attempt 2 leased %s after attempt 1's lease ended, %s before it would have expired",
		second.GrantedAt.Sub(first.EndedAt).Round(time.Millisecond), first.ExpiresAt.Sub(second.GrantedAt).Round(time.Millisecond))
}

// cmdWaitGone waits (up to 30 s) until the process whose pid the file
// holds is gone: no such pid, or a zombie that only waits to be reaped
// (killed processes whose parent died are reparented to whatever reaps
// this machine's orphans, which may take a while):
//
//	wait-gone PIDFILE
//
// With ! it checks that the process is alive now.
func cmdWaitGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: wait-gone PIDFILE")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	if err != nil || pid <= 1 {
		ts.Fatalf("%s holds no pid: %v", args[0], err)
	}
	gone := func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false // not Linux, or just gone: the next kill says
		}
		// pid (comm) STATE …: the comm may hold spaces and parentheses.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		return strings.HasPrefix(strings.TrimSpace(rest), "Z")
	}
	if neg {
		if gone() {
			ts.Fatalf("process %d is gone", pid)
		}
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for !gone() {
		if time.Now().After(deadline) {
			ts.Fatalf("process %d still runs after 30s", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdBreakState damages the default state file of the current directory
// (.wdc/state.db) as a crash, a full disk or a tool other than wdc could:
//
//	break-state drop-table NAME   drop a table with a plain SQLite connection
//	break-state empty             truncate the file to 0 bytes
//	break-state corrupt-table NAME overwrite a table's root page with garbage
//	break-state flip-spec         flip 14 bytes of every task's spec in the file
func cmdBreakState(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: break-state drop-table NAME | empty | corrupt-table NAME | flip-spec"
	if neg || len(args) < 1 {
		ts.Fatalf(usage)
	}
	path := filepath.Join(ts.MkAbs("."), defaultStatePath)
	switch {
	case args[0] == "drop-table" && len(args) == 2:
		ts.Check(dropTable(path, args[1]))
	case args[0] == "corrupt-table" && len(args) == 2:
		ts.Check(corruptTable(path, args[1]))
	case args[0] == "flip-spec" && len(args) == 1:
		ts.Check(flipSpecs(path))
	case args[0] == "empty" && len(args) == 1:
		ts.Check(os.Truncate(path, 0))
		for _, side := range []string{"-wal", "-shm"} {
			if err := os.Remove(path + side); err != nil && !errors.Is(err, os.ErrNotExist) {
				ts.Check(err)
			}
		}
	default:
		ts.Fatalf(usage)
	}
}

// cmdFreePort sets the environment variable NAME to a TCP port on
// 127.0.0.1 that was free a moment ago (for an apply that must listen on
// the same address twice):
//
//	free-port NAME
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: free-port NAME")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	ts.Check(l.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}

// cmdHTTPGet GETs a URL as a Prometheus scraper does (no protocol version
// header) and prints the answer's body; it fails unless the answer has the
// status wanted (default 200):
//
//	http-get [--status N] [--bearer-file FILE] [--ca-sha256 HEX] [--until REGEXP] URL
//
// --bearer-file sends the file's content, trimmed, as the bearer
// credential; --ca-sha256 pins an HTTPS server's CA as the agent does;
// --until asks again (for up to 90 s) until the body matches REGEXP.
func cmdHTTPGet(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: http-get [--status N] [--bearer-file FILE] [--ca-sha256 HEX] [--until REGEXP] URL"
	if neg {
		ts.Fatalf("http-get does not support !: use --status")
	}
	status, bearer, pin := http.StatusOK, "", ""
	var until *regexp.Regexp
	for len(args) > 1 && strings.HasPrefix(args[0], "--") {
		var err error
		switch args[0] {
		case "--status":
			status, err = strconv.Atoi(args[1])
		case "--bearer-file":
			bearer = strings.TrimSpace(ts.ReadFile(args[1]))
		case "--ca-sha256":
			pin = args[1]
		case "--until":
			until, err = regexp.Compile(args[1])
		default:
			ts.Fatalf("%s", usage)
		}
		ts.Check(err)
		args = args[2:]
	}
	if len(args) != 1 {
		ts.Fatalf("%s", usage)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if pin != "" {
		u, err := url.Parse(args[0])
		ts.Check(err)
		cfg, err := tlsca.ClientConfig(pin, u.Hostname())
		ts.Check(err)
		client.Transport = &http.Transport{TLSClientConfig: cfg}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, args[0], nil)
		ts.Check(err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		ts.Check(err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ts.Check(err)
		if resp.StatusCode != status {
			ts.Fatalf("GET %s: status %d, want %d: %s", args[0], resp.StatusCode, status, body)
		}
		if until == nil || until.Match(body) {
			ts.Stdout().Write(body) //nolint:errcheck // testscript's buffer
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("GET %s: no answer matching %q after 90s; the last:\n%s", args[0], until, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cmdS3Lock reads the backend lock object of the script's bucket:
//
//	s3-lock KEY VAR
//
// sets VAR to the ID of the lock object KEY.lock holds (not released),
// and fails when there is none (with !: succeeds only then).
func cmdS3Lock(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: s3-lock KEY VAR")
	}
	srv, err := s3Server.Get()
	ts.Check(err)
	r, err := srv.Client().GetObject(context.Background(), ts.Getenv("WDC_VAR_s3_bucket"), args[0]+".lock", minio.GetObjectOptions{})
	ts.Check(err)
	defer r.Close()
	data, err := io.ReadAll(r)
	held := false
	if err == nil {
		var l struct {
			ID       string `json:"id"`
			Released bool   `json:"released"`
		}
		ts.Check(json.Unmarshal(data, &l))
		if !l.Released {
			held = true
			ts.Setenv(args[1], l.ID)
		}
	}
	if held == neg {
		ts.Fatalf("lock object %s.lock held: %v (%s)", args[0], held, data)
	}
}

// cmdS3Put writes a file as an object of the script's bucket, as
// something other than wdc would:
//
//	s3-put KEY FILE
func cmdS3Put(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: s3-put KEY FILE")
	}
	srv, err := s3Server.Get()
	ts.Check(err)
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	_, err = srv.Client().PutObject(context.Background(), ts.Getenv("WDC_VAR_s3_bucket"), args[0], bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	ts.Check(err)
}

// cmdS3Blobs prints the blobs of the script's bucket beside the state
// object KEY (the objects KEY.blobs/HASH), one hash a line, sorted:
//
//	s3-blobs KEY
func cmdS3Blobs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: s3-blobs KEY")
	}
	srv, err := s3Server.Get()
	ts.Check(err)
	prefix := args[0] + ".blobs/"
	var hashes []string
	for obj := range srv.Client().ListObjects(context.Background(), ts.Getenv("WDC_VAR_s3_bucket"), minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		ts.Check(obj.Err)
		hashes = append(hashes, strings.TrimPrefix(obj.Key, prefix))
	}
	sort.Strings(hashes)
	for _, h := range hashes {
		fmt.Fprintln(ts.Stdout(), h)
	}
}

// cmdS3ETag sets VAR to the ETag of the object KEY of the script's
// bucket:
//
//	s3-etag KEY VAR
func cmdS3ETag(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: s3-etag KEY VAR")
	}
	srv, err := s3Server.Get()
	ts.Check(err)
	info, err := srv.Client().StatObject(context.Background(), ts.Getenv("WDC_VAR_s3_bucket"), args[0], minio.StatObjectOptions{})
	ts.Check(err)
	ts.Setenv(args[1], strings.Trim(info.ETag, `"`))
}
