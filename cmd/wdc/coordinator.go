package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/operator"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Commands that talk to the coordinator of a running apply: the worker
// verbs (a worker in any language, from any machine) and the operator
// verbs (this machine, with the operator credential apply writes).

// coordinatorFlags are the flags of every worker verb.
type coordinatorFlags struct {
	Server   string `name:"server" placeholder:"URL" help:"Coordinator URL (default: the coordinator of the apply holding this state's lock)."`
	CASHA256 string `name:"ca-sha256" placeholder:"HEX" help:"SHA-256 fingerprint of the coordinator's CA to verify https by (default: WDC_CA_SHA256, the join file's, or the one in the state's lock row)."`
}

// errNoApply says a verb needs a running apply.
type errNoApply struct {
	verb, path string
	// remote: the verb takes --server (a worker verb), so it can also
	// reach a coordinator of another machine.
	remote bool
}

func (e errNoApply) Error() string {
	hint := "start one with wdc apply"
	if e.remote {
		hint += ", or give --server"
	}
	return fmt.Sprintf("no apply is running on the state %s: %s talks to a running apply's coordinator (%s)", e.path, e.verb, hint)
}

// runningApply is the lock row of the apply holding the state, with its
// coordinator's URL, and the state's work folder.
type runningApply struct {
	lock    state.Lock
	workDir string
	path    string
}

// findApply reads the lock row of the state (read-only; it never creates
// the state). remote says the verb could take --server instead. Errors: errNoApply when no apply holds the lock; a lock
// whose coordinator is not serving yet.
func (e *env) findApply(verb string, remote bool) (*runningApply, error) {
	path, err := e.statePathForReading()
	if err != nil {
		return nil, err
	}
	snap, err := readSnapshot(context.Background(), path)
	if err != nil {
		return nil, err
	}
	if snap.Lock == nil {
		return nil, errNoApply{verb: verb, path: path, remote: remote}
	}
	if snap.Lock.CoordinatorURL == "" {
		return nil, fmt.Errorf("the apply holding the state %s (lock %s, since %s) has no coordinator serving yet: try again in a moment",
			path, snap.Lock.ID, views.FormatTime(snap.Lock.StartedAt))
	}
	return &runningApply{lock: *snap.Lock, workDir: filepath.Dir(path), path: path}, nil
}

// workerClient returns a client for the coordinator of the worker verbs,
// sending token: at --server when given (verified by --ca-sha256 or the
// system's roots), else the one named in the state's lock row (verified by
// the fingerprint recorded there).
// token is asked for only once a coordinator is found, so that with no
// apply running the verb says that first.
func (e *env) workerClient(verb string, f coordinatorFlags, token func() (string, error), pin string) (*protocol.Client, error) {
	server := f.Server
	if v := e.getenv("WDC_CA_SHA256"); v != "" && f.CASHA256 == "" {
		f.CASHA256 = v
	}
	if f.CASHA256 != "" {
		pin = f.CASHA256
	}
	if server == "" {
		ap, err := e.findApply(verb, true)
		if err != nil {
			return nil, err
		}
		server = ap.lock.CoordinatorURL
		if pin == "" {
			pin = ap.lock.CASHA256
		}
	}
	hc, err := protocol.HTTPClient(server, pin)
	if err != nil {
		return nil, err
	}
	tok, err := token()
	if err != nil {
		return nil, err
	}
	return protocol.NewClient(server, tok, hc), nil
}

// given returns a token func for a credential already in hand.
func given(tok string) func() (string, error) { return func() (string, error) { return tok, nil } }

// maxOperatorCredentialBytes is the most read of the operator credential
// file: apply writes a credential of a few dozen bytes.
const maxOperatorCredentialBytes = 4 << 10

// operatorClient returns a client for the running apply's coordinator with
// the operator credential apply wrote into the work folder. Errors:
// errNoApply; an unreadable credential file.
func (e *env) operatorClient(verb string) (*protocol.Client, *runningApply, error) {
	ap, err := e.findApply(verb, false)
	if err != nil {
		return nil, nil, err
	}
	b, err := regularfile.Read(apply.OperatorCredentialFile(ap.workDir), maxOperatorCredentialBytes)
	if err != nil {
		return nil, ap, fmt.Errorf("reading the running apply's operator credential (%s needs to run as the user of that apply, on its machine): %w", verb, err)
	}
	hc, err := protocol.HTTPClient(ap.lock.CoordinatorURL, ap.lock.CASHA256)
	if err != nil {
		return nil, ap, err
	}
	return protocol.NewClient(ap.lock.CoordinatorURL, strings.TrimSpace(string(b)), hc), ap, nil
}

// remoteOperator returns the operator of the running apply (its operator
// routes, with the operator credential). Errors: those of operatorClient.
func (e *env) remoteOperator(verb string) (operator.Operator, error) {
	cl, ap, err := e.operatorClient(verb)
	if err != nil {
		return nil, err
	}
	return &operator.Remote{Client: cl, Lock: ap.lock}, nil
}

// stateOperator returns the operator of the state at path, open as store:
// it writes the state itself, and through the running apply when one holds
// the lock. pin gives the CA fingerprint of a join file made locally (nil
// when the verb makes none).
func (e *env) stateOperator(verb string, store *state.Store, path string, pin func() (string, error)) *operator.Fallback {
	local := &operator.Local{Store: store, ArtifactDir: apply.ArtifactFolder(filepath.Dir(path)), Pin: pin, Now: e.now}
	return &operator.Fallback{Local: local, Remote: func() (operator.Operator, error) { return e.remoteOperator(verb) }}
}

// sessionToken returns WDC_SESSION_TOKEN, or an error saying where it
// comes from.
func (e *env) sessionToken() (string, error) {
	tok := e.getenv(protocol.SessionTokenEnv)
	if tok == "" {
		return "", fmt.Errorf("no session token: set %s to the session_token wdc workers register printed", protocol.SessionTokenEnv)
	}
	return tok, nil
}

// callContext is the deadline of one call of a verb: wait (a claim's long
// poll) plus 30 s.
func callContext(wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), wait+30*time.Second)
}

// describeAPIError rewrites a coordinator's refusal as a sentence for the
// command line.
func describeAPIError(err error) error {
	var ae *protocol.APIError
	if !errors.As(err, &ae) {
		return err
	}
	msg := fmt.Sprintf("the coordinator refused: %s", ae.Message)
	if ae.Reason != "" {
		msg += " (" + ae.Reason + ")"
	}
	return errors.New(msg)
}
