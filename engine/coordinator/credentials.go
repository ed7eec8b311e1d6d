package coordinator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Credentials (docs/protocol.md, "Credentials"). A launched worker gets a
// one-time launch credential bound to (pool, apply id, launch sequence); a
// worker that joins from anywhere presents a join token; registration
// exchanges either for a session token that only that worker can use. The
// operator credential opens the operator routes. The coordinator keeps
// only SHA-256 hashes of the secrets, in memory; the state keeps the
// hashes of launch credentials and join tokens. Pool, labels and capacity
// come from the credential, never from a request.

// CredentialKind is what a credential is; each route of the protocol takes
// some kinds (package httpapi says which).
type CredentialKind uint8

// The kinds of credential.
const (
	// KindLaunch is a launch credential: it registers one worker of its
	// launch, once, within launch_timeout.
	KindLaunch CredentialKind = iota + 1
	// KindJoin is a join token: it registers workers of its pool, up to
	// the pool's max, until it expires or is revoked.
	KindJoin
	// KindSession is a session token: the calls of the one worker it was
	// issued to.
	KindSession
	// KindOperator is the operator credential: the operator routes.
	KindOperator
)

// String names the kind in messages: "a launch credential".
func (k CredentialKind) String() string {
	switch k {
	case KindLaunch:
		return "a launch credential"
	case KindJoin:
		return "a join credential"
	case KindSession:
		return "a session token"
	case KindOperator:
		return "the operator credential"
	}
	return "an unknown credential"
}

// launchState is where a launch credential stands.
type launchState uint8

const (
	launchOpen    launchState = iota // may register once
	launchUsed                       // a worker registered with it
	launchExpired                    // launch_timeout passed, or the launch failed
)

// Credential is one secret the coordinator accepts, by the SHA-256 of its
// text: what Authenticate found a bearer credential to be. Only the
// coordinator reads its fields.
type Credential struct {
	kind CredentialKind
	pool *poolState // launch, join

	// launch
	seq       int
	deadline  time.Time
	launch    launchState
	requestID string                    // of the registration that used it
	answer    protocol.RegisterResponse // what that registration was told

	// join
	join   state.JoinToken
	joined map[string]protocol.RegisterResponse // by request id, so a retried join gets the same worker

	// session
	worker  *workerState
	revoked bool // the worker is gone or the apply is ending

	// refusals thins out the records of its refused registrations
	// (refusalText).
	refusals refusalLog
}

// Kind says what the credential is.
func (cr *Credential) Kind() CredentialKind { return cr.kind }

// launchKey names a launch of this apply.
type launchKey struct {
	pool string
	seq  int
}

// newSecret returns prefix followed by 256 random bits in hex.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

// secretHash is the SHA-256 of a secret, as the maps and the state key it.
func secretHash(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

func hexHash(h [32]byte) string { return hex.EncodeToString(h[:]) }

// MaxJoinTTL is the longest a join token may live (366 days).
const MaxJoinTTL = 366 * 24 * time.Hour

// NewJoinCredential returns a fresh join credential (prefix
// protocol.JoinCredentialPrefix, 256 random bits), for `wdc join-token
// create` when no apply runs; record it with HashSecret.
func NewJoinCredential() string { return newSecret(protocol.JoinCredentialPrefix) }

// HashSecret returns the lowercase hex SHA-256 of a credential's text, as
// the state stores launch credentials and join tokens.
func HashSecret(secret string) string { return hexHash(secretHash(secret)) }

// Authenticate returns the credential whose secret is secret, when it is
// of one of kinds. Errors (*Error, CodeUnauthorized): a secret that is not
// one of this apply's (unknown_credential), a revoked session
// (session_revoked), a credential of another kind (wrong_credential).
func (c *Coordinator) Authenticate(secret string, kinds ...CredentialKind) (*Credential, error) {
	h := secretHash(secret)
	c.mu.Lock()
	cred := c.creds[h]
	c.mu.Unlock()
	if cred == nil && subtle.ConstantTimeCompare(h[:], c.operatorHash[:]) == 1 {
		cred = &Credential{kind: KindOperator}
	}
	if cred == nil {
		return nil, unauthorized(protocol.ReasonUnknownCredential, "the bearer credential is not one of this apply (it may belong to an apply that ended)")
	}
	for _, k := range kinds {
		if cred.kind != k {
			continue
		}
		if cred.kind == KindSession {
			c.mu.Lock()
			revoked := cred.revoked
			c.mu.Unlock()
			if revoked {
				return nil, unauthorized(protocol.ReasonSessionRevoked, "the session of worker %s was revoked: the worker is gone or its apply is ending", cred.worker.id)
			}
		}
		return cred, nil
	}
	want := make([]string, len(kinds))
	for i, k := range kinds {
		want[i] = k.String()
	}
	return nil, unauthorized(protocol.ReasonWrongCredential, "this route takes %s, not %s", strings.Join(want, " or "), cred.kind)
}

// OperatorCredential returns the secret that opens the operator routes.
// Apply writes it to a file only its user can read; never log it.
func (c *Coordinator) OperatorCredential() string { return c.operator }

// ApplyID returns the id of the apply this coordinator serves.
func (c *Coordinator) ApplyID() string { return c.applyID }

// IssueLaunch records launch seq of pool (launch sequence numbers count up
// from 1 within an apply, one per launch) and returns its launch
// credential: a one-time secret that registers one worker of the pool
// within timeout (launch_timeout), and is worthless afterwards. Hand it to
// the worker in protocol.LaunchCredentialEnv, never on a command line.
// Errors: an unknown pool; state errors (nothing was issued).
func (c *Coordinator) IssueLaunch(ctx context.Context, pool string, seq int, provider string, timeout time.Duration) (string, error) {
	ps := c.poolByNam[pool]
	if ps == nil {
		return "", fmt.Errorf("coordinator: unknown pool %q", pool)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	secret := newSecret(protocol.LaunchCredentialPrefix)
	h := secretHash(secret)
	if err := c.store.RecordLaunch(ctx, state.Launch{ApplyID: c.applyID, Pool: pool, Seq: seq, Provider: provider}, hexHash(h), now); err != nil {
		return "", fmt.Errorf("coordinator: %w", err)
	}
	cred := &Credential{kind: KindLaunch, pool: ps, seq: seq, deadline: now.Add(timeout)}
	c.mu.Lock()
	c.creds[h] = cred
	c.launches[launchKey{pool, seq}] = cred
	c.mu.Unlock()
	return secret, nil
}

// CloseLaunch revokes the credential of a launch that never registered:
// expired when its launch_timeout passed (failed=false), or failed when
// the provider could not launch it. It reports whether it revoked it:
// false when a worker registered with it first. Errors: an unknown launch;
// state errors.
func (c *Coordinator) CloseLaunch(ctx context.Context, pool string, seq int, failed bool) (bool, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	cred := c.launches[launchKey{pool, seq}]
	c.mu.Unlock()
	if cred == nil {
		return false, fmt.Errorf("coordinator: no launch %d of pool %q", seq, pool)
	}
	status := state.LaunchExpired
	if failed {
		status = state.LaunchFailed
	}
	changed, err := c.store.CloseLaunch(ctx, c.applyID, pool, seq, status, c.now())
	if err != nil {
		return false, fmt.Errorf("coordinator: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !changed || cred.launch == launchUsed {
		return false, nil
	}
	cred.launch = launchExpired
	return true, nil
}

// refuseRegistration counts a registration refused for reason with cred
// (wdc_registrations_refused_total), records it (an event in the state and
// for OnEvent) unless one of cred was recorded less than RefusalInterval
// ago (Credential.refusalText), and returns its refusal
// (CodeUnauthorized, reason).
func (c *Coordinator) refuseRegistration(ctx context.Context, cred *Credential, reason, msg string) error {
	now := c.now()
	pool := ""
	if cred.pool != nil {
		pool = cred.pool.rt.Name
	}
	c.poolMetrics(pool).registrationRefused(reason).Inc()
	c.mu.Lock()
	text := cred.refusalText(now, reason, msg)
	c.mu.Unlock()
	if text != "" {
		if err := c.store.AppendEvent(ctx, state.Event{Kind: EventRegistrationRefused, Message: text}, now); err != nil {
			c.log.Warn("recording a refused registration", "err", err)
		}
		c.emitAndFlush([]Event{{At: now, Kind: EventRegistrationRefused, Pool: pool, Message: text}})
	}
	return unauthorized(reason, "%s", msg)
}

// Register exchanges a launch or join credential for a worker and its
// session (docs/protocol.md, "Credentials"); a retry of the same
// registration (its request id) gets the same answer. Errors (*Error): a
// launch credential used before, past its launch_timeout or closed, a
// revoked or expired join token (CodeUnauthorized, recorded as a
// registration_refused event, at most once per RefusalInterval for one
// credential); a join token of a pool its provider
// launches (CodeForbidden, not_joinable); a join past the pool's max
// (CodeConflict, pool_full); another kind of credential
// (CodeUnauthorized, wrong_credential); the state's.
func (c *Coordinator) Register(ctx context.Context, cred *Credential, req protocol.RegisterRequest) (protocol.RegisterResponse, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	ps := cred.pool
	w := state.Worker{
		Pool: ps.rt.Name, Capacity: ps.rt.Capacity, Host: req.Host, PID: req.PID, Version: req.Version,
		HeartbeatInterval: ps.rt.HeartbeatInterval, TTL: ps.rt.TTL, ApplyID: c.applyID,
	}
	labels := ps.rt.Labels
	recorded := ps.rt.Labels
	if ps.rt.RecordedLabels != nil {
		recorded = ps.rt.RecordedLabels
	}
	var how string
	switch cred.kind {
	case KindLaunch:
		c.mu.Lock()
		st, reqID, answer := cred.launch, cred.requestID, cred.answer
		c.mu.Unlock()
		switch {
		case st == launchUsed && req.RequestID != "" && req.RequestID == reqID:
			// The answer of this very registration was lost: same worker,
			// same session.
			return answer, nil
		case st == launchUsed:
			return protocol.RegisterResponse{}, c.refuseRegistration(ctx, cred, protocol.ReasonCredentialUsed,
				fmt.Sprintf("launch %d of pool %s already registered worker %s: a launch credential registers once", cred.seq, ps.rt.Name, answer.WorkerID))
		case st == launchExpired || !now.Before(cred.deadline):
			return protocol.RegisterResponse{}, c.refuseRegistration(ctx, cred, protocol.ReasonCredentialExpired,
				fmt.Sprintf("launch %d of pool %s did not register within its launch_timeout; its credential is revoked", cred.seq, ps.rt.Name))
		}
		w.LaunchSeq = cred.seq
		how = fmt.Sprintf("launch %d", cred.seq)
	case KindJoin:
		c.mu.Lock()
		j := cred.join
		live := c.liveWorkersLocked(ps)
		answer, replay := cred.joined[req.RequestID]
		c.mu.Unlock()
		switch {
		case req.RequestID != "" && replay:
			return answer, nil
		case !ps.rt.Joinable:
			return protocol.RegisterResponse{}, refuse(CodeForbidden, protocol.ReasonNotJoinable,
				"pool %s is launched by its provider; only workers of provider = \"external\" pools join with a join token", ps.rt.Name)
		case !j.RevokedAt.IsZero():
			return protocol.RegisterResponse{}, c.refuseRegistration(ctx, cred, protocol.ReasonCredentialRevoked,
				fmt.Sprintf("join token %s of pool %s was revoked", j.ID, ps.rt.Name))
		case !now.Before(j.ExpiresAt):
			return protocol.RegisterResponse{}, c.refuseRegistration(ctx, cred, protocol.ReasonCredentialExpired,
				fmt.Sprintf("join token %s of pool %s expired at %s", j.ID, ps.rt.Name, j.ExpiresAt.Format(time.RFC3339)))
		case ps.rt.Max > 0 && live >= ps.rt.Max:
			return protocol.RegisterResponse{}, refuse(CodeConflict, protocol.ReasonPoolFull,
				"pool %s already has %d live workers, its max; try again when one leaves", ps.rt.Name, live)
		}
		if j.Labels != nil {
			labels, recorded = narrow(labels, j.Labels), narrow(recorded, j.Labels)
		}
		w.JoinTokenID = j.ID
		how = "join token " + j.ID
	default:
		return protocol.RegisterResponse{}, unauthorized(protocol.ReasonWrongCredential, "registration takes a launch or join credential")
	}
	w.Labels = recorded
	reg, err := c.store.RegisterWorker(ctx, w, now)
	if errors.Is(err, state.ErrLaunchUsed) {
		return protocol.RegisterResponse{}, c.refuseRegistration(ctx, cred, protocol.ReasonCredentialUsed,
			fmt.Sprintf("launch %d of pool %s is no longer open for registration", cred.seq, ps.rt.Name))
	}
	if err != nil {
		return protocol.RegisterResponse{}, fmt.Errorf("register worker of pool %s: %w", ps.rt.Name, err)
	}
	msg := fmt.Sprintf("pool %s, %s, host %s, pid %d, version %s", ps.rt.Name, how, req.Host, req.PID, req.Version)
	if err := c.store.AppendEvent(ctx, state.Event{Kind: state.EventRegistered, WorkerID: reg.ID, Message: msg}, now); err != nil {
		c.log.Warn("recording a registration", "worker", reg.ID, "err", err)
	}
	session := newSecret(protocol.SessionTokenPrefix)
	ws := &workerState{id: reg.ID, pool: ps, status: state.WorkerActive, labels: maps(labels),
		narrowed: cred.kind == KindJoin && cred.join.Labels != nil, joinID: w.JoinTokenID, seq: w.LaunchSeq, pid: req.PID, session: secretHash(session), idleSince: now, lastSeen: now}
	resp := protocol.RegisterResponse{
		WorkerID:            reg.ID,
		SessionToken:        session,
		Pool:                ps.rt.Name,
		Labels:              maps(labels),
		Capacity:            ps.rt.Capacity,
		HeartbeatIntervalMS: ps.rt.HeartbeatInterval.Milliseconds(),
		TTLMS:               ps.rt.TTL.Milliseconds(),
		HideFolders:         c.hideFolders,
	}
	if c.artifacts != nil {
		resp.MaxArtifactSize = c.artifacts.MaxSize()
	}
	c.mu.Lock()
	c.workers[reg.ID] = ws
	c.creds[ws.session] = &Credential{kind: KindSession, pool: ps, worker: ws}
	switch {
	case cred.kind == KindLaunch:
		cred.launch, cred.requestID, cred.answer = launchUsed, req.RequestID, resp
	case req.RequestID != "":
		if cred.joined == nil {
			cred.joined = map[string]protocol.RegisterResponse{}
		}
		cred.joined[req.RequestID] = resp
	}
	c.mu.Unlock()
	c.emitAndFlush([]Event{{At: now, Kind: EventRegistered, WorkerID: reg.ID, Pool: ps.rt.Name, Launch: w.LaunchSeq, Message: msg}})
	return resp, nil
}

// liveWorkersLocked counts the pool's active and draining workers. c.mu
// must be held.
func (c *Coordinator) liveWorkersLocked(ps *poolState) int {
	n := 0
	for _, w := range c.workers {
		if w.pool == ps && (w.status == state.WorkerActive || w.status == state.WorkerDraining) {
			n++
		}
	}
	return n
}

// narrow restricts labels to the entries of want with the same value.
func narrow(labels, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if lv, ok := labels[k]; ok && lv == v {
			out[k] = v
		}
	}
	return out
}

// Session is a registered worker's session: what its session token opens
// once a request names that worker (Coordinator.Session). The worker
// operations take it. The zero Session is not valid.
type Session struct{ w *workerState }

// WorkerID is the id of the session's worker.
func (s Session) WorkerID() string { return s.w.id }

// Session returns the session of a session token, cred, for a request
// that names worker id ("" names the session's own worker). Errors
// (*Error): a credential that is not a session token (CodeUnauthorized,
// wrong_credential), a revoked session (CodeUnauthorized,
// session_revoked), another worker's id (CodeForbidden,
// session_mismatch).
func (c *Coordinator) Session(cred *Credential, id string) (Session, error) {
	if cred.kind != KindSession {
		return Session{}, unauthorized(protocol.ReasonWrongCredential, "this call takes %s, not %s", KindSession, cred.kind)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := cred.worker
	if cred.revoked {
		return Session{}, unauthorized(protocol.ReasonSessionRevoked, "the session of worker %s was revoked: the worker is gone or its apply is ending", w.id)
	}
	if id != "" && id != w.id {
		return Session{}, refuse(CodeForbidden, protocol.ReasonSessionMismatch, "this session belongs to worker %s, not %q", w.id, id)
	}
	return Session{w: w}, nil
}

// revokeSessionLocked ends a worker's session: its token is refused from
// now on, with reason session_revoked. c.mu must be held.
func (c *Coordinator) revokeSessionLocked(w *workerState) {
	if cur := c.creds[w.session]; cur != nil && cur.worker == w {
		cur.revoked = true
	}
}

// WorkerGone marks a worker gone and revokes its session, leaving its
// leases alone (apply calls it for the workers it stopped itself; it deals
// with their leases at its end). An unknown worker is not an error.
func (c *Coordinator) WorkerGone(ctx context.Context, id string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	w := c.workers[id]
	c.mu.Unlock()
	if w == nil {
		return nil
	}
	if err := c.store.SetWorkerStatus(ctx, id, state.WorkerGone, c.now()); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	c.mu.Lock()
	w.status = state.WorkerGone
	c.revokeSessionLocked(w)
	c.broadcastLocked()
	c.mu.Unlock()
	return nil
}

// WorkerLost is what apply calls when a worker's provider reports it gone
// while the apply runs (its process exited or was killed, its pod or job
// ended): the worker is marked gone and its session revoked, and its
// active leases are revoked at once as lost with reason
// (state.LoseWorker), so their tasks are queued again without waiting for
// the lease to expire, and without backoff. An unknown worker is not an
// error.
func (c *Coordinator) WorkerLost(ctx context.Context, id, reason string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	w := c.workers[id]
	c.mu.Unlock()
	if w == nil {
		return nil
	}
	now := c.now()
	outs, err := c.store.LoseWorker(ctx, id, reason, c.policy, now)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	var evs []Event
	c.mu.Lock()
	w.status = state.WorkerGone
	c.revokeSessionLocked(w)
	for _, out := range outs {
		w.pool.metrics.leasesRevoked.Inc()
		evs = append(evs, Event{At: now, Kind: EventRevoked, Task: out.Task, WorkerID: out.WorkerID, Pool: w.pool.rt.Name,
			Attempt: out.Attempt, Token: out.Token, Message: "attempt lost: lease revoked: " + reason})
		evs = c.applyOutcomeLocked(out, now, evs)
	}
	c.broadcastLocked()
	c.mu.Unlock()
	c.emitAndFlush(evs)
	return nil
}

// loadJoinTokens makes the state's usable join tokens of this apply's
// pools credentials.
func (c *Coordinator) loadJoinTokens(ctx context.Context) error {
	all, err := c.store.JoinTokens(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	hashes, err := c.store.JoinTokenSecretHashes(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	for _, j := range all {
		ps := c.poolByNam[j.Pool]
		if ps == nil {
			continue
		}
		raw, err := hex.DecodeString(hashes[j.ID])
		if err != nil || len(raw) != 32 {
			continue
		}
		c.creds[[32]byte(raw)] = &Credential{kind: KindJoin, pool: ps, join: j}
	}
	return nil
}

// CreateJoinToken makes a join token for a pool while the apply runs (the
// operator route behind `wdc join-token create`); req is checked already
// (its pool named, its ttl in range). Errors (*Error): a pool the apply
// does not have (CodeNotFound); a pool its provider launches
// (CodeBadRequest, not_joinable); a label that is not one of the pool's
// (CodeBadRequest); the state's.
func (c *Coordinator) CreateJoinToken(ctx context.Context, req protocol.JoinTokenRequest) (protocol.JoinTokenResponse, error) {
	ps := c.poolByNam[req.Pool]
	switch {
	case ps == nil:
		return protocol.JoinTokenResponse{}, refuse(CodeNotFound, "", "this apply has no pool %q", req.Pool)
	case !ps.rt.Joinable:
		return protocol.JoinTokenResponse{}, refuse(CodeBadRequest, protocol.ReasonNotJoinable,
			"pool %s is launched by its provider; join tokens are for provider = \"external\" pools", req.Pool)
	}
	for k, v := range req.Labels {
		if pv, ok := ps.rt.Labels[k]; !ok || pv != v {
			return protocol.JoinTokenResponse{}, invalid("label %s=%s is not one of pool %s's labels: a join token only narrows them", k, v, req.Pool)
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	secret := newSecret(protocol.JoinCredentialPrefix)
	h := secretHash(secret)
	j, err := c.store.CreateJoinToken(ctx, state.JoinToken{Pool: req.Pool, Labels: req.Labels,
		ExpiresAt: now.Add(time.Duration(req.TTLMS) * time.Millisecond)}, hexHash(h), now)
	if err != nil {
		return protocol.JoinTokenResponse{}, err
	}
	c.mu.Lock()
	c.creds[h] = &Credential{kind: KindJoin, pool: ps, join: j}
	c.mu.Unlock()
	return protocol.JoinTokenResponse{ID: j.ID, Pool: j.Pool, Labels: j.Labels, Credential: secret, ExpiresAt: j.ExpiresAt}, nil
}

// RevokeJoinToken revokes a join token while the apply runs: no new
// registrations, and the workers that joined with it are asked to drain.
// Errors: an unknown join token (state.ErrNotFound); the state's.
func (c *Coordinator) RevokeJoinToken(ctx context.Context, id string) (protocol.RevokeJoinTokenResponse, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := c.now()
	j, err := c.store.RevokeJoinToken(ctx, id, now)
	if err != nil {
		return protocol.RevokeJoinTokenResponse{}, err
	}
	resp := protocol.RevokeJoinTokenResponse{ID: j.ID, Pool: j.Pool, RevokedAt: j.RevokedAt, Draining: []string{}}
	var drain []*workerState
	c.mu.Lock()
	for _, cred := range c.creds {
		if cred.kind == KindJoin && cred.join.ID == id {
			cred.join.RevokedAt = j.RevokedAt // refused from now on, as credential_revoked
		}
	}
	for _, w := range c.workers {
		if w.joinID != id {
			continue
		}
		w.drainRequested = true
		if w.status == state.WorkerActive {
			drain = append(drain, w)
		}
	}
	c.mu.Unlock()
	for _, w := range drain {
		if err := c.store.SetWorkerStatus(ctx, w.id, state.WorkerDraining, now); err != nil {
			return resp, err
		}
		c.mu.Lock()
		w.status = state.WorkerDraining
		c.mu.Unlock()
		resp.Draining = append(resp.Draining, w.id)
	}
	c.mu.Lock()
	c.broadcastLocked()
	c.mu.Unlock()
	return resp, nil
}
