package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
)

// fakeCoord is a fake coordinator speaking worker protocol v1 well enough
// to drive one agent: it grants queued assignments, records every call,
// and lets a test change its answers.
type fakeCoord struct {
	mu         sync.Mutex
	reg        protocol.RegisterResponse
	queue      []protocol.Assignment
	nextToken  int64
	registers  int
	leaves     int // POST /v1/workers/{id}/leave calls
	heartbeats []heartbeatRec
	claims     []claimRec
	results    []resultRec

	// Knobs a test may set (under mu).
	ignoreMax     bool                                      // grant the whole queue whatever max says
	drain         bool                                      // answer heartbeats and claims with drain
	cancelLeases  []int64                                   // answer heartbeats with these cancellations
	registerError int                                       // answer registration with this status
	workerError   int                                       // answer heartbeats and claims with this status
	resultHook    func(n int, r *http.Request) (status int) // n counts result posts from 1; 0 = answer normally
	// blobs, when not nil, is the fake's artifact store: a result naming a
	// hash it lacks is answered 409 missing_artifacts, and uploads land
	// here (checked against their hash).
	blobs map[string][]byte
	puts  int // uploads received
	// rejectAll, when set, answers every result rejected with this reason.
	rejectAll string
	// eager answers a result with up to its next assignments from the
	// queue, then up to its prefetch (one unstarted at most, counted in
	// unstarted until a result reports its start) marked prefetched.
	eager     bool
	unstarted map[int64]bool
	// refuseStarts answers every reported start in cancel_leases.
	refuseStarts bool
}

type heartbeatRec struct {
	at     time.Time
	leases []int64
}

type claimRec struct {
	at  time.Time
	req protocol.ClaimRequest
}

type resultRec struct {
	at    time.Time
	token int64
	req   protocol.ResultRequest
}

func newFakeCoord(capacity int, interval, ttl time.Duration) *fakeCoord {
	return &fakeCoord{
		reg: protocol.RegisterResponse{
			WorkerID: "w-1", SessionToken: "sess", Pool: "builders", Labels: map[string]string{"can": "build"}, Capacity: capacity,
			HeartbeatIntervalMS: interval.Milliseconds(), TTLMS: ttl.Milliseconds(),
		},
		nextToken: 100,
	}
}

// add queues assignments and returns them with their fencing tokens.
func (f *fakeCoord) add(asgs ...protocol.Assignment) []protocol.Assignment {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range asgs {
		f.nextToken++
		asgs[i].FencingToken = f.nextToken
		if strings.HasPrefix(asgs[i].DefHash, "hash-") {
			// assignment's placeholder: the real hash of the definition as
			// the test left it, as a coordinator sends it.
			asgs[i].DefHash = protocol.DefinitionHash(asgs[i].Definition, asgs[i].DepHashes)
		}
		f.queue = append(f.queue, asgs[i])
	}
	return asgs
}

func (f *fakeCoord) set(fn func(f *fakeCoord)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeCoord) resultsCopy() []resultRec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.results)
}

// result returns the last result posted for token.
func (f *fakeCoord) result(token int64) (resultRec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.results) - 1; i >= 0; i-- {
		if f.results[i].token == token {
			return f.results[i], true
		}
	}
	return resultRec{}, false
}

func (f *fakeCoord) writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(protocol.Error{Code: code, Message: "fake says " + code})
}

func (f *fakeCoord) handler() http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	// Registration takes the launch credential "tok"; every later call
	// the session it answers.
	authWith := func(want string, next http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+want || r.Header.Get(protocol.VersionHeader) != "1" {
				f.writeError(w, http.StatusUnauthorized, "unauthorized")
				return
			}
			next(w, r)
		}
	}
	auth := func(next http.HandlerFunc) http.HandlerFunc { return authWith("sess", next) }
	mux.HandleFunc("POST /v1/workers", authWith("tok", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.registers++
		status, reg := f.registerError, f.reg
		f.mu.Unlock()
		if status != 0 {
			f.writeError(w, status, "unauthorized")
			return
		}
		reply(w, reg)
	}))
	mux.HandleFunc("POST /v1/workers/{id}/heartbeat", auth(func(w http.ResponseWriter, r *http.Request) {
		var req protocol.HeartbeatRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, heartbeatRec{time.Now(), req.Leases})
		status := f.workerError
		resp := protocol.HeartbeatResponse{Drain: f.drain, CancelLeases: slices.Clone(f.cancelLeases)}
		f.mu.Unlock()
		if status != 0 {
			f.writeError(w, status, "not_found")
			return
		}
		reply(w, resp)
	}))
	mux.HandleFunc("POST /v1/workers/{id}/leave", auth(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.leaves++
		f.mu.Unlock()
		reply(w, protocol.LeaveResponse{Released: []int64{}})
	}))
	mux.HandleFunc("POST /v1/workers/{id}/claim", auth(func(w http.ResponseWriter, r *http.Request) {
		var req protocol.ClaimRequest
		json.NewDecoder(r.Body).Decode(&req)
		deadline := time.Now().Add(min(time.Duration(req.WaitMS)*time.Millisecond, 200*time.Millisecond))
		f.mu.Lock()
		f.claims = append(f.claims, claimRec{time.Now(), req})
		f.mu.Unlock()
		for {
			f.mu.Lock()
			if f.workerError != 0 {
				f.mu.Unlock()
				f.writeError(w, f.workerError, "not_found")
				return
			}
			n := min(req.Max, len(f.queue))
			if f.ignoreMax {
				n = len(f.queue)
			}
			if n > 0 || f.drain || time.Now().After(deadline) || r.Context().Err() != nil {
				resp := protocol.ClaimResponse{Assignments: slices.Clone(f.queue[:n]), Drain: f.drain}
				f.queue = f.queue[n:]
				f.mu.Unlock()
				reply(w, resp)
				return
			}
			f.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}))
	mux.HandleFunc("GET /v1/artifacts/{sha256}", auth(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		b, ok := f.blobs[r.PathValue("sha256")]
		f.mu.Unlock()
		if !ok {
			f.writeError(w, http.StatusNotFound, "not_found")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	}))
	mux.HandleFunc("PUT /v1/artifacts/{sha256}", auth(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != r.PathValue("sha256") {
			f.writeError(w, http.StatusBadRequest, protocol.CodeHashMismatch)
			return
		}
		f.mu.Lock()
		f.blobs[r.PathValue("sha256")] = b
		f.puts++
		f.mu.Unlock()
		reply(w, protocol.PutArtifactResponse{SHA256: r.PathValue("sha256"), Size: int64(len(b)), Created: true})
	}))
	mux.HandleFunc("POST /v1/leases/{token}/result", auth(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strconv.ParseInt(r.PathValue("token"), 10, 64)
		var req protocol.ResultRequest
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		if f.blobs != nil {
			var missing []string
			for _, a := range req.Artifacts {
				if _, ok := f.blobs[a.SHA256]; !ok {
					missing = append(missing, a.SHA256)
				}
			}
			if len(missing) > 0 {
				f.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				json.NewEncoder(w).Encode(protocol.Error{Code: protocol.CodeMissingArtifacts, Message: "upload them", Missing: missing})
				return
			}
		}
		f.results = append(f.results, resultRec{time.Now(), token, req})
		n, hook := len(f.results), f.resultHook
		f.mu.Unlock()
		if hook != nil {
			if status := hook(n, r); status != 0 {
				f.writeError(w, status, "internal")
				return
			}
		}
		f.mu.Lock()
		reject := f.rejectAll
		f.mu.Unlock()
		if reject != "" {
			reply(w, protocol.ResultResponse{Decision: protocol.DecisionRejected, Reason: reject})
			return
		}
		f.mu.Lock()
		resp := protocol.ResultResponse{Decision: protocol.DecisionAccepted}
		for _, tok := range req.Started {
			if f.refuseStarts {
				resp.CancelLeases = append(resp.CancelLeases, tok)
			}
			delete(f.unstarted, tok)
		}
		delete(f.unstarted, token) // a result is its lease's start too
		if f.eager {
			n := min(req.Next, len(f.queue))
			resp.Assignments = slices.Clone(f.queue[:n])
			f.queue = f.queue[n:]
			if req.Prefetch > 0 && len(f.unstarted) == 0 && len(f.queue) > 0 {
				a := f.queue[0]
				f.queue = f.queue[1:]
				a.Prefetched = true
				if f.unstarted == nil {
					f.unstarted = map[int64]bool{}
				}
				f.unstarted[a.FencingToken] = true
				resp.Assignments = append(resp.Assignments, a)
			}
		}
		f.mu.Unlock()
		reply(w, resp)
	}))
	return mux
}

// fakeServer serves a fakeCoord on a fixed loopback address that can be
// taken down (connection refused) and brought back up.
type fakeServer struct {
	*fakeCoord
	addr string
	srv  *http.Server
	mu   sync.Mutex
	ln   net.Listener
}

func startFake(t *testing.T, f *fakeCoord) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{fakeCoord: f, addr: ln.Addr().String(), srv: &http.Server{Handler: f.handler()}}
	// One connection per request, so that "down" really refuses the next call.
	s.srv.SetKeepAlivesEnabled(false)
	s.ln = ln
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *fakeServer) URL() string { return "http://" + s.addr }

// down stops accepting connections: new calls get "connection refused".
func (s *fakeServer) down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
}

// up accepts connections again on the same address.
func (s *fakeServer) up(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Errorf("listening again on %s: %v", s.addr, err)
		return
	}
	s.ln = ln
	go s.srv.Serve(ln)
}

// lockedBuffer collects an agent's logs; they are printed when a test fails.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is an agent started by startAgent.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // valid after done closes
	logs   *lockedBuffer
	opts   Options
}

// wait waits for Run to return, at most d.
func (r *running) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		t.Fatalf("agent still running after %s", d)
		return nil
	}
}

// startAgent runs an agent against url with short, test-friendly timings,
// changed by mod, and stops it at the end of the test.
func startAgent(t *testing.T, url string, mod func(*Options)) *running {
	t.Helper()
	logs := &lockedBuffer{}
	opts := Options{
		ServerURL: url,
		Pool:      "builders",
		WorkDir:   t.TempDir(),
		Environ:   []string{"PATH=" + os.Getenv("PATH"), protocol.LaunchCredentialEnv + "=tok", protocol.SessionTokenEnv + "=leaked-session", "BASE_VAR=from-agent"},
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version:   "test",
		ClaimWait: 200 * time.Millisecond,
		KillGrace: 300 * time.Millisecond,
		RetryBase: 20 * time.Millisecond,
		RetryMax:  200 * time.Millisecond,
		// Long enough that a test that does not mean to hit it never does.
		DrainTimeout:    30 * time.Second,
		RegisterTimeout: 5 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{}), logs: logs, opts: opts}
	go func() {
		defer close(r.done)
		r.err = Run(ctx, opts)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			t.Errorf("agent did not stop within 60s after the test")
		}
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs.String())
		}
	})
	return r
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assignment builds an assignment of attempt 1 running command in a fresh
// folder, with a one-minute timeout.
func assignment(t *testing.T, task string, command ...string) protocol.Assignment {
	return protocol.Assignment{
		Task:       task,
		Attempt:    1,
		DefHash:    "hash-" + task,
		Definition: protocol.Definition{Command: command, Env: map[string]string{}, Dir: "."},
		WorkDir:    t.TempDir(),
		TimeoutMS:  60_000,
		ExpiresAt:  time.Now().Add(time.Hour).UTC(),
	}
}

// processGone reports whether pid has exited (a zombie counts as gone).
func processGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && i+2 < len(data) && (data[i+2] == 'Z' || data[i+2] == 'X')
}

// readPID waits for a pid file written by a task and returns its number.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "pid file "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(data, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(string(bytes.TrimSpace(data)))
		return err == nil
	})
	return pid
}
