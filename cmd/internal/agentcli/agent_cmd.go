package agentcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wdc-dev/wdc/agent"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/protocol/tlsca"
)

// AgentCmd runs one worker: it registers with the coordinator at --server,
// heartbeats, claims tasks its labels allow and runs them. Providers start
// it with a one-time launch credential in WDC_LAUNCH_CREDENTIAL (`wdc
// apply` launches local workers this way); a worker that joins from
// another machine reads a join credential from --join-file.
type AgentCmd struct {
	Server       string        `name:"server" required:"" placeholder:"URL" help:"Coordinator URL, as apply prints it, e.g. https://10.0.0.5:7070."`
	Pool         string        `name:"pool" placeholder:"NAME" help:"Pool this worker expects to join; registration fails if its credential belongs to another pool."`
	JoinFile     string        `name:"join-file" placeholder:"FILE" help:"Join with the credential in FILE (from wdc join-token create) instead of WDC_LAUNCH_CREDENTIAL; its CA fingerprint pins the coordinator."`
	CASHA256     string        `name:"ca-sha256" placeholder:"HEX" help:"SHA-256 fingerprint of the coordinator's CA, as apply prints it: verify the https server by it (default: WDC_CA_SHA256, the join file's, else the system's roots)."`
	WorkDir      string        `name:"work-dir" placeholder:"DIR" default:"." help:"Work folder: attempt logs go to logs/<task>/<attempt>/, scratch folders to scratch/<task>/<attempt>/."`
	DrainTimeout time.Duration `name:"drain-timeout" default:"60s" help:"On SIGTERM or SIGINT, how long running attempts may finish before they are killed."`
	Spool        string        `name:"spool" placeholder:"DIR" help:"Durable result buffer: results wait here until the coordinator decides, across a restart (default: spool in the work folder)."`
	Unconfined   bool          `name:"unconfined" help:"Run attempts without confinement: their commands can then read the work folder (the state, this worker's session) and signal this agent (default: confined where this machine allows)."`
}

// Run hands the agent's work to e.Then, to be done once the command line's
// parser can be freed: the agent lives for hours, and the parser's model
// would otherwise stay in its live heap (the collector lets the heap grow
// in proportion to it). The work runs the agent until it drains (first
// SIGTERM/SIGINT, or the coordinator asks) or fails; a second signal exits
// at once with code 1.
func (c *AgentCmd) Run(e *Env) error {
	e.Then = func() error { return c.run(e) }
	return nil
}

// run is the agent's work (see Run).
func (c *AgentCmd) run(e *Env) error {
	credential, pin, err := Credential(e.getenv, c.JoinFile, c.Pool, c.CASHA256)
	if err != nil {
		return err
	}
	if credential == "" {
		return fmt.Errorf("no credential: give a join file with --join-file, or set %s (apply's providers do)", protocol.LaunchCredentialEnv)
	}
	hc, err := protocol.HTTPClient(c.Server, pin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.WorkDir, 0o700); err != nil {
		return fmt.Errorf("--work-dir %s cannot be used for the attempts' logs and scratch: %w", c.WorkDir, err)
	}
	if c.Spool != "" {
		// A spool asked for must work: results would not survive a crash.
		if err := os.MkdirAll(c.Spool, 0o700); err != nil {
			return fmt.Errorf("--spool %s cannot be used: %w", c.Spool, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	logger := slog.New(slog.NewTextHandler(e.Stderr, nil))
	go func() {
		select {
		case s := <-sigs:
			logger.Info("signal received: draining", "signal", s.String(), "drain_timeout", c.DrainTimeout)
			cancel()
		case <-ctx.Done():
			return
		}
		if s, ok := <-sigs; ok {
			logger.Warn("second signal: exiting at once", "signal", s.String())
			os.Exit(1)
		}
	}()
	opts := agent.Options{
		ServerURL:    c.Server,
		Pool:         c.Pool,
		Credential:   credential,
		WorkDir:      c.WorkDir,
		DrainTimeout: c.DrainTimeout,
		Spool:        c.Spool,
		Unconfined:   c.Unconfined,
		HideFiles:    joinFiles(c.JoinFile),
		Logger:       logger,
		Version:      e.Build.Version,
		Environ:      e.Environ,
		HTTPClient:   hc,
	}
	var expires time.Time
	if c.JoinFile != "" {
		if jf, err := protocol.ReadJoinFile(c.JoinFile); err == nil {
			expires = jf.ExpiresAt
		}
	}
	rejoins := 0
	for {
		started := time.Now()
		err := agent.Run(ctx, opts)
		if ctx.Err() != nil {
			return err
		}
		why := rejoinReason(c.JoinFile != "", err)
		if why == "" {
			return err
		}
		// A join credential serves until its token expires or is
		// revoked (registration then answers 401, which is final).
		if !expires.IsZero() && !time.Now().Before(expires) {
			return fmt.Errorf("%w; the join token expired at %s: not joining again", err, expires.UTC().Format(time.RFC3339))
		}
		if time.Since(started) > rejoinMaxDelay {
			rejoins = 0 // it worked for a while: start the backoff again
		}
		d := rejoinDelay(rejoins)
		rejoins++
		logger.Warn(why+": joining again with the join file", "err", err, "try", rejoins, "in", d, "join_token_expires", expires)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// rejoinMaxDelay caps the wait between two tries of an agent rejoining
// with its join file.
const rejoinMaxDelay = 30 * time.Second

// rejoinDelay is the wait before try n (from 0) of rejoining: 1 s doubling
// to rejoinMaxDelay.
func rejoinDelay(n int) time.Duration {
	d := time.Second
	for i := 0; i < n && d < rejoinMaxDelay; i++ {
		d *= 2
	}
	return min(d, rejoinMaxDelay)
}

// rejoinReason says why an agent whose run ended with err joins again,
// or "" when it does not: only a worker with a join file (a launch
// credential registers once) whose apply ended or was replaced (the
// coordinator refused its session, or could not be reached). A drain
// (err nil), a refused credential (expired or revoked) or any other error
// ends it.
func rejoinReason(joinFile bool, err error) string {
	switch {
	case !joinFile || err == nil:
		return ""
	case errors.Is(err, agent.ErrSessionRefused):
		return "the apply this worker joined no longer knows it"
	case errors.Is(err, agent.ErrUnreachable):
		return "the coordinator cannot be reached (its apply may have ended)"
	}
	return ""
}

// Credential finds the credential a worker registers with: the join
// file's (checked against pool when both are given), else
// WDC_LAUNCH_CREDENTIAL; and the CA fingerprint to pin: pin (a flag's),
// else WDC_CA_SHA256, else the join file's. getenv looks a variable up in
// the command's environment. A pin that contradicts the join file, a join
// file for another pool, or one that cannot be read is an error; no
// credential at all is "" and no error (the caller says what to give).
func Credential(getenv func(string) string, joinFile, pool, pin string) (credential, caSHA256 string, err error) {
	if pin == "" {
		pin = getenv("WDC_CA_SHA256")
	}
	if joinFile == "" {
		return getenv(protocol.LaunchCredentialEnv), pin, nil
	}
	jf, err := protocol.ReadJoinFile(joinFile)
	if err != nil {
		return "", "", err
	}
	if pool != "" && jf.Pool != pool {
		return "", "", fmt.Errorf("the join file %s is for pool %q, not %q", joinFile, jf.Pool, pool)
	}
	if pin != "" && jf.CASHA256 != "" {
		if a, b := normalizePin(pin), normalizePin(jf.CASHA256); a != b {
			return "", "", errors.New("--ca-sha256 (or WDC_CA_SHA256) differs from the join file's CA fingerprint: one of them is for another state")
		}
	}
	if pin == "" {
		pin = jf.CASHA256
	}
	return jf.Credential, pin, nil
}

// normalizePin returns a fingerprint in lowercase hex without separators,
// or the text as given when it is not one (the HTTP client reports that).
func normalizePin(s string) string {
	if p, err := tlsca.ParseFingerprint(s); err == nil {
		return p
	}
	return s
}

// joinFiles is the join file, absolute, for an attempt not to read
// (agent.Options.HideFiles), or none.
func joinFiles(path string) []string {
	if path == "" {
		return nil
	}
	if abs, err := filepath.Abs(path); err == nil {
		return []string{abs}
	}
	return nil
}
