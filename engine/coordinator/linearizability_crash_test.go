package coordinator_test

// The linearizability check with real crashes. With linConfig.Kills > 0
// the coordinator of a history runs in a child process (the test binary
// again, in TestHelperLinCoordinator) on the real clock, behind a proxy in
// the parent that the simulated workers and the operator talk to; at
// random moments while calls are in flight the child is killed with
// SIGKILL and a new one opened on the same state file. A call in flight
// at the kill whose answer did not arrive is recorded as of unknown
// outcome: its decision, if it was made, fell between its call and the
// kill, so its porcupine Return is the kill's time and its output
// linOutput.Unknown (the model's steps for it are in
// linearizability_unknown_test.go).
//
// Time. The child's coordinator reads the real clock (CLOCK_REALTIME,
// which time.Now reads in every process of the machine, so the parent and
// the child read one clock) in whole milliseconds, moved back so that the
// history's start is ct0, the fake clock's origin: fakeMS then reads the
// coordinator's times as real ms since the start, and the model's times
// (From, To, Now) are those. The parent reads the same clock just before
// each call and just after its answer, so every decision's ms lies in
// [From, To]; the model steps through those ms one by one
// (linTaskConf.Step is 1). Whole ms, because the state records every time
// in ms and the coordinator compares instants in memory with ones read
// back from it (a heartbeat's release: now − granted_at > two intervals):
// with a finer clock a decision could fall between two ms that the model
// cannot tell apart. A step of the real clock (a jump set by hand or by
// NTP) would break the order of the two processes' readings; slewing
// does not.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

const (
	linChildDirEnv  = "WDC_LIN_CHILD_DIR"     // the history's folder: state.db and runtime.json
	linChildBaseEnv = "WDC_LIN_CHILD_BASE_MS" // the history's start, in Unix ms
	linChildReady   = "LIN-CHILD"             // the child's first line: LIN-CHILD <url> <operator credential>
	// linCutCode is the protocol.Error code of the proxy's answer to a
	// call the kill cut; its message is the killed child's number.
	linCutCode = "coordinator_killed"
)

// linRuntime is what a coordinator child serves: the history's pools and
// tasks, which the parent writes once to runtime.json.
type linRuntime struct {
	Pools []coordinator.PoolRuntime
	Tasks []coordinator.TaskRuntime
}

// linRealClock is the coordinator's clock in a child: the real one in
// whole ms, with the Unix ms base moved to ct0 (see the top of the file).
func linRealClock(baseMS int64) func() time.Time {
	return func() time.Time {
		return ct0.Add(time.Duration(time.Now().UnixMilli()-baseMS) * time.Millisecond)
	}
}

// TestHelperLinCoordinator is not a test: linCrash runs the test binary
// with -test.run=^TestHelperLinCoordinator$ as a coordinator child. It
// opens the state file of WDC_LIN_CHILD_DIR, runs a coordinator on it on
// the real clock (Run sweeping every 2 ms), serves the protocol on
// 127.0.0.1 with three routes of its own under /lin/ (a launch
// credential, RevokeLeases, Finished; they take the operator credential),
// prints its URL and operator credential on one line, and runs until its
// standard input closes, or until it is killed.
func TestHelperLinCoordinator(t *testing.T) {
	dir := os.Getenv(linChildDirEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	base, err := strconv.ParseInt(os.Getenv(linChildBaseEnv), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", linChildBaseEnv, err)
	}
	var rt linRuntime
	if b, err := os.ReadFile(filepath.Join(dir, "runtime.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := state.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := newLinCoordinator(s, rt.Pools, rt.Tasks, linRealClock(base))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = c.Run(runCtx)
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", httpapi.New(c))
	control := func(h func(r *http.Request) (string, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+c.OperatorCredential() {
				http.Error(w, "the operator credential, please", http.StatusUnauthorized)
				return
			}
			body, err := h(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, body)
		}
	}
	mux.Handle("POST /lin/launch", control(func(r *http.Request) (string, error) {
		seq, err := strconv.Atoi(r.URL.Query().Get("seq"))
		if err != nil {
			return "", err
		}
		return issueLinLaunch(r.Context(), c, rt.Pools[0].Name, seq)
	}))
	mux.Handle("POST /lin/revoke", control(func(r *http.Request) (string, error) {
		_, err := c.RevokeLeases(r.Context(), linRevokeReason)
		return "", err
	}))
	mux.Handle("GET /lin/finished", control(func(*http.Request) (string, error) {
		return strconv.FormatBool(c.Finished()), nil
	}))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("%s http://%s %s\n", linChildReady, ln.Addr(), c.OperatorCredential())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it (or dies)
	_ = srv.Close()
	stop()
	<-runDone
	if err := c.Err(); err != nil {
		t.Errorf("coordinator failed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("closing the state: %v", err)
	}
}

// linCrash runs the coordinator of a linCluster in child processes, one
// at a time, behind a proxy (it is the handler behind linCluster.gate),
// and kills them.
type linCrash struct {
	lc     *linCluster
	dir    string
	baseMS int64 // the history's start in Unix ms: times are ms (and ns) since it
	proxy  *httputil.ReverseProxy

	stopKills  chan struct{}
	killerDone chan struct{}

	mu       sync.Mutex // guards the fields below
	cur      *linChild  // nil from a kill until the next child serves
	ready    chan struct{}
	broken   error // a child could not be started: the proxy answers 503
	children []*linChild
	pending  int // kills not made yet
	kills    int
	unknown  int // calls cut by a kill
	unseen   int // leases in the state whose grant no answer showed
	fin      bool
	finAt    time.Time
}

// linChild is one coordinator child process.
type linChild struct {
	n      int // its place in linCrash.children
	cmd    *exec.Cmd
	stdin  io.Closer
	url    *url.URL
	op     string // its operator credential
	client *http.Client
	stderr strings.Builder // read only once exited is closed

	// inflight counts the calls forwarded to it and not answered, by
	// linKind (0: those of no kind of the model).
	inflight [linRelease + 1]atomic.Int32
	// heldGrants counts the answers to claims with assignments the proxy
	// holds (linWholeAnswers): a kill now loses grants that were made.
	heldGrants atomic.Int32

	killed, stopping atomic.Bool
	exited           chan struct{} // closed once Wait returned, with waitErr set
	waitErr          error
	dead             chan struct{} // closed after a kill, once deadMS and deadNS are set
	deadMS, deadNS   int64         // after a kill: when it was known dead (guarded by linCrash.mu)
}

type linChildKey struct{}

func linChildOf(r *http.Request) *linChild { return r.Context().Value(linChildKey{}).(*linChild) }

// startLinCrash sets lc up to run its coordinator in children: it records
// the pools and tasks in the state file (once, before the first child),
// starts the proxy and the first child, and schedules lc.cfg.Kills kills.
func startLinCrash(lc *linCluster) {
	t := lc.t
	x := &linCrash{lc: lc, dir: filepath.Dir(lc.path), baseMS: time.Now().UnixMilli(), ready: make(chan struct{}),
		stopKills: make(chan struct{}), killerDone: make(chan struct{}), pending: lc.cfg.Kills}
	lc.crash = x
	for a, c := range lc.confs {
		c.Step = 1 // the real clock, read in whole ms
		lc.confs[a] = c
	}
	b, err := json.Marshal(linRuntime{Pools: lc.pools, Tasks: lc.tasks})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(x.dir, "runtime.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := state.Open(context.Background(), lc.path)
	if err != nil {
		t.Fatal(err)
	}
	upsertAll(t, s, lc.pools, lc.tasks, linRealClock(x.baseMS)())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	x.proxy = &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.SetURL(linChildOf(pr.In).url) },
		Transport:    linWholeAnswers{},
		ErrorHandler: x.proxyError,
	}
	lc.gate.h = x
	lc.srv = httptest.NewServer(&lc.gate)
	lc.http = lc.srv.Client()
	ch, err := x.start()
	if err != nil {
		t.Fatal(err)
	}
	x.serve(ch)
	go x.killer(rand.New(rand.NewPCG(lc.cfg.Seed, 4000)))
}

// ServeHTTP forwards a call to the current child, waiting for one after
// a kill.
func (x *linCrash) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ch := x.current()
	if ch == nil {
		http.Error(w, "no coordinator child", http.StatusServiceUnavailable)
		return
	}
	k := linKindOf(r.URL.Path)
	ch.inflight[k].Add(1)
	defer ch.inflight[k].Add(-1)
	x.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), linChildKey{}, ch)))
}

// linKindOf is the model's kind of a call by its route: claim (linGrant),
// heartbeat, result, lookup, sweep; 0 for the others.
func linKindOf(path string) linKind {
	for suffix, k := range map[string]linKind{"/claim": linGrant, "/heartbeat": linHeartbeat, "/result": linResult,
		"/operator/lease": linLookup, "/operator/sweep": linSweep} {
		if strings.HasSuffix(path, suffix) {
			return k
		}
	}
	return 0
}

func (x *linCrash) current() *linChild {
	for {
		x.mu.Lock()
		ch, ready, broken := x.cur, x.ready, x.broken
		x.mu.Unlock()
		if ch != nil || broken != nil {
			return ch
		}
		<-ready
	}
}

// linWholeAnswers is the proxy's transport: it sends a call to the child
// the proxy routed it to and reads the whole answer before the proxy
// hands it on, so that an answer the kill cut is an error (the call's
// outcome is unknown), never half an answer. It then holds the answer
// for up to 2 ms, as a network would, and loses it when the child is
// killed meanwhile: the calls a kill cuts are then also ones decided and
// not answered, not only ones not decided yet.
type linWholeAnswers struct{}

func (linWholeAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	ch := linChildOf(r)
	resp, err := ch.client.Transport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var claim protocol.ClaimResponse
	if linKindOf(r.URL.Path) == linGrant && json.Unmarshal(body, &claim) == nil && len(claim.Assignments) > 0 {
		ch.heldGrants.Add(1)
		defer ch.heldGrants.Add(-1)
	}
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	if ch.killed.Load() {
		return nil, errors.New("the answer was on its way when the coordinator was killed")
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// proxyError answers a call that got no answer from its child: when the
// child was killed, once it is dead, with linCutCode and the child's
// number (linCrash.cut reads them); otherwise as a failure of the run.
func (x *linCrash) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	ch := linChildOf(r)
	if !ch.killed.Load() {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	<-ch.dead
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_ = json.NewEncoder(w).Encode(protocol.Error{Code: linCutCode, Message: strconv.Itoa(ch.n)})
}

// cut reports whether err is the proxy's answer to a call a kill cut,
// and then marks rec unknown and ends it at the kill: its Return and To
// are the time its child was known dead, when every decision it made was
// made.
func (x *linCrash) cut(rec *linCall, err error) bool {
	var ae *protocol.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Code != linCutCode {
		return false
	}
	n, err := strconv.Atoi(ae.Message)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil || n < 0 || n >= len(x.children) {
		return false
	}
	rec.unknown = true
	rec.to, rec.ret = x.children[n].deadMS, x.children[n].deadNS
	x.unknown++
	return true
}

// pace holds the caller for one step of the fake clock after each call:
// on the real clock calls take a fraction of a ms, and a simulated worker
// would otherwise make hundreds of calls in one lease's ttl.
func (x *linCrash) pace() { time.Sleep(linClockStep) }

// stamp reads the real clock: ms and ns since the history's start.
func (x *linCrash) stamp() (ms, ns int64) {
	now := time.Now()
	return now.UnixMilli() - x.baseMS, now.UnixNano() - x.baseMS*int64(time.Millisecond)
}

// start starts a child on the state file and waits for its first line.
func (x *linCrash) start() (*linChild, error) {
	x.mu.Lock()
	n := len(x.children)
	x.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLinCoordinator$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), linChildDirEnv+"="+x.dir, linChildBaseEnv+"="+strconv.FormatInt(x.baseMS, 10))
	ch := &linChild{n: n, cmd: cmd, exited: make(chan struct{}), dead: make(chan struct{})}
	cmd.Stderr = &ch.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch.stdin = stdin
	first := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), linChildReady+" ") {
				first <- lines.Text()
			}
		}
		ch.waitErr = cmd.Wait()
		close(ch.exited)
		if !ch.killed.Load() && !ch.stopping.Load() {
			x.lc.errorf("coordinator child %d exited by itself: %v\n%s", n, ch.waitErr, ch.stderr.String())
		}
	}()
	var line string
	select {
	case line = <-first:
	case <-ch.exited:
		return nil, fmt.Errorf("coordinator child %d: %v before it served\n%s", n, ch.waitErr, ch.stderr.String())
	case <-time.After(time.Minute):
		ch.killed.Store(true)
		_ = cmd.Process.Kill()
		<-ch.exited
		return nil, fmt.Errorf("coordinator child %d did not serve within a minute\n%s", n, ch.stderr.String())
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		return nil, fmt.Errorf("coordinator child %d: first line %q", n, line)
	}
	if ch.url, err = url.Parse(f[1]); err != nil {
		return nil, err
	}
	ch.op, ch.client = f[2], &http.Client{Transport: &http.Transport{}}
	x.mu.Lock()
	x.children = append(x.children, ch)
	x.mu.Unlock()
	return ch, nil
}

// serve makes ch the child the proxy forwards to, and the operator's.
func (x *linCrash) serve(ch *linChild) {
	lc := x.lc
	lc.mu.Lock()
	lc.op = protocol.NewClient(lc.srv.URL, ch.op, lc.http)
	lc.mu.Unlock()
	x.mu.Lock()
	x.cur = ch
	close(x.ready)
	x.mu.Unlock()
}

// fail stops the proxy forwarding after a child could not be started.
func (x *linCrash) fail(err error) {
	x.lc.errorf("%v", err)
	x.mu.Lock()
	x.broken = err
	close(x.ready)
	x.mu.Unlock()
}

// kill kills the current child with SIGKILL while calls may be in flight
// and starts a new one on the same state file, recorded as a restart
// from the moment the old one was known dead (after every call it cut)
// until the new one served. Registrations, revokes and restarts wait
// (regMu), so every worker knows its epoch.
func (x *linCrash) kill() {
	lc := x.lc
	lc.regMu.Lock()
	defer lc.regMu.Unlock()
	x.mu.Lock()
	ch := x.cur
	x.cur, x.ready = nil, make(chan struct{})
	x.mu.Unlock()
	ch.killed.Store(true)
	if err := ch.cmd.Process.Kill(); err != nil {
		lc.errorf("killing coordinator child %d: %v", ch.n, err)
	}
	<-ch.exited
	deadMS, deadNS := x.stamp()
	x.mu.Lock()
	ch.deadMS, ch.deadNS = deadMS, deadNS
	x.kills++
	x.pending--
	x.mu.Unlock()
	close(ch.dead)
	next, err := x.start()
	if err != nil {
		x.fail(err)
		return
	}
	to, ret := x.stamp()
	lc.mu.Lock()
	// Its Call is after every cut call's Return: porcupine takes equal
	// times as concurrent.
	lc.calls = append(lc.calls, linCall{kind: linRestart, client: lc.cfg.Workers + 1, from: deadMS, call: deadNS + 1, to: to, ret: ret})
	lc.mu.Unlock()
	lc.epoch++
	x.serve(next)
}

// replace stops the current child cleanly and starts a new one: the
// restart of linCluster.restart, which holds the gate, so no call is in
// flight.
func (x *linCrash) replace() error {
	x.mu.Lock()
	ch := x.cur
	x.mu.Unlock()
	x.stop(ch)
	next, err := x.start()
	if err != nil {
		x.fail(err)
		return err
	}
	x.mu.Lock()
	x.ready = make(chan struct{})
	x.mu.Unlock()
	x.serve(next)
	return nil
}

// stop closes a child's standard input and waits for it to exit, which
// it must do cleanly.
func (x *linCrash) stop(ch *linChild) {
	ch.stopping.Store(true)
	_ = ch.stdin.Close()
	select {
	case <-ch.exited:
	case <-time.After(time.Minute):
		ch.killed.Store(true)
		_ = ch.cmd.Process.Kill()
		<-ch.exited
		x.lc.errorf("coordinator child %d did not stop within a minute", ch.n)
		return
	}
	if ch.waitErr != nil {
		x.lc.errorf("coordinator child %d: %v\n%s", ch.n, ch.waitErr, ch.stderr.String())
	}
}

// close ends the kills, stops the last child (lc.srv is closed: no
// call is in flight), and counts the leases of the state no answer showed.
func (x *linCrash) close() {
	close(x.stopKills)
	<-x.killerDone
	x.mu.Lock()
	ch := x.cur
	x.mu.Unlock()
	if ch != nil {
		x.stop(ch)
	}
	lc := x.lc
	seen := map[int64]bool{}
	lc.mu.Lock()
	for _, c := range lc.calls {
		for _, a := range c.asg {
			seen[a.FencingToken] = true
		}
	}
	lc.mu.Unlock()
	ctx := context.Background()
	s, err := state.Open(ctx, lc.path)
	if err != nil {
		lc.errorf("opening the state after the run: %v", err)
		return
	}
	defer s.Close()
	leases, err := s.Leases(ctx, "")
	if err != nil {
		lc.errorf("reading the leases: %v", err)
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, l := range leases {
		if !seen[l.Token] {
			x.unseen++
		}
	}
}

// killer makes the history's kills, at random call counts spread over
// its budget. Each waits for what it picked at random: the proxy holding
// the answer of a claim that granted leases (the hard case: grants nobody
// will see), or a claim, a result, a heartbeat, or any call in flight;
// then, but for the first, a random fraction of a millisecond more.
func (x *linCrash) killer(rng *rand.Rand) {
	defer close(x.killerDone)
	kills, calls := x.lc.cfg.Kills, x.lc.cfg.Calls
	stopped := func(d time.Duration) bool {
		select {
		case <-x.stopKills:
			return true
		case <-time.After(d):
			return false
		}
	}
	for k := range kills {
		span := calls / 2 / kills
		at := int64(calls/10 + k*span + rng.IntN(span))
		for x.lc.n.Load() < at {
			if stopped(time.Millisecond) {
				return
			}
		}
		pick := rng.IntN(5)
		kind := []linKind{linGrant, linGrant, linResult, linHeartbeat, 0}[pick]
		ready := func() bool { return x.inFlight(kind) }
		if pick == 0 {
			ready = x.holdingGrants
		}
		for since := time.Now(); !ready(); {
			if time.Since(since) > 100*time.Millisecond {
				pick, kind = 4, 0 // none came: any call will do
				ready = func() bool { return x.inFlight(kind) }
			}
			if stopped(100 * time.Microsecond) {
				return
			}
		}
		if pick != 0 {
			time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
		}
		x.kill()
	}
}

// holdingGrants reports whether the proxy holds the answer of a claim
// that granted leases, from the current child.
func (x *linCrash) holdingGrants() bool {
	x.mu.Lock()
	ch := x.cur
	x.mu.Unlock()
	return ch != nil && ch.heldGrants.Load() > 0
}

// inFlight reports whether a call of kind (0: any) is in flight in the
// current child.
func (x *linCrash) inFlight(kind linKind) bool {
	x.mu.Lock()
	ch := x.cur
	x.mu.Unlock()
	if ch == nil {
		return false
	}
	if kind != 0 {
		return ch.inflight[kind].Load() > 0
	}
	for i := range ch.inflight {
		if ch.inflight[i].Load() > 0 {
			return true
		}
	}
	return false
}

// control calls a /lin/ route of the current child (not through the
// proxy, and not recorded) and returns its answer's body.
func (x *linCrash) control(method, route string, body *string) error {
	x.mu.Lock()
	ch := x.cur
	x.mu.Unlock()
	if ch == nil {
		return errors.New("no coordinator child")
	}
	ctx, cancel := callCtx()
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ch.url.String()+"/lin/"+route, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+ch.op)
	resp, err := ch.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("coordinator child %d: /lin/%s: %s: %s", ch.n, route, resp.Status, strings.TrimSpace(string(b)))
	}
	if body != nil {
		*body = string(b)
	}
	return nil
}

func (x *linCrash) issueLaunch(_ context.Context, seq int) (string, error) {
	var cred string
	err := x.control(http.MethodPost, "launch?seq="+strconv.Itoa(seq), &cred)
	return cred, err
}

// finished reports whether every task has a final status, and no kill
// is left to make; it asks the child at most every 20 ms.
func (x *linCrash) finished() bool {
	x.mu.Lock()
	if x.pending > 0 || x.cur == nil || time.Since(x.finAt) < 20*time.Millisecond {
		defer x.mu.Unlock()
		return x.fin && x.pending == 0
	}
	x.mu.Unlock()
	var body string
	fin := x.control(http.MethodGet, "finished", &body) == nil && body == "true"
	x.mu.Lock()
	x.fin, x.finAt = fin, time.Now()
	x.mu.Unlock()
	return fin
}

func (x *linCrash) counts() (kills, unknown, unseen int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.kills, x.unknown, x.unseen
}

// TestLinearizabilityCrash checks short histories whose coordinator, in
// a child process on the real clock, is killed once or twice while calls
// are in flight (with a revoke and a clean restart in the second), then
// doctors the one whose check was quickest as TestLinearizability does
// (proving a doctored history Illegal searches at least as far as proving
// its history Ok: the random kills and their calls of unknown outcome make
// one history's search several times another's). Under the race detector
// the histories are half as long.
func TestLinearizabilityCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns coordinator processes")
	}
	t.Parallel()
	var quickest *linRun
	var quickestLimit time.Duration
	for _, cfg := range []linConfig{
		{Seed: 1, Workers: 4, Tasks: 20, Calls: 700, Kills: 2, Vanish: 0.01, Misbehave: 0.1, AtomicHeartbeats: true},
		{Seed: 2, Workers: 3, Tasks: 12, Calls: 500, Kills: 1, Revoke: true, Restart: true, Vanish: 0.03, Misbehave: 0.2, AtomicHeartbeats: true},
	} {
		limit := time.Minute
		if raceEnabled {
			// Under the race detector the checker is several times
			// slower: half the calls keep its search within the limit
			// (an Unknown answer is a timeout, not a violation), and
			// the limit is longer: a history of 282 calls with 5 of
			// unknown outcome took more than a minute on a CI machine
			// busy with other tests.
			cfg.Calls /= 2
			limit = 3 * time.Minute
		}
		run := runLinHistory(t, cfg, t.TempDir(), limit)
		for _, e := range run.Errors {
			t.Errorf("seed %d: %s", cfg.Seed, e)
		}
		t.Logf("seed %d: %d calls, %d operations, %d kills, %d calls of unknown outcome, %d leases granted unseen, %d accepted results, %d calls across an expiry: %s in %s",
			cfg.Seed, run.Calls, run.Ops, run.Kills, run.Unknown, run.Unseen, run.Accepted, run.Expiry, run.Result, run.Check)
		if testing.Verbose() {
			t.Logf("seed %d: %v", cfg.Seed, run.Counts)
		}
		if run.Kills == 0 {
			t.Errorf("seed %d: the coordinator was never killed", cfg.Seed)
		}
		if run.Result != porcupine.Ok {
			reportLinRun(t, run)
			t.Fatalf("seed %d: %s", cfg.Seed, run.Result)
		}
		if quickest == nil || run.Check < quickest.Check {
			quickest, quickestLimit = &run, limit
		}
	}
	checkDoctored(t, quickest.History, quickestLimit)
}
