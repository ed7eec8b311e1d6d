package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/coordinator/httpapi"
	"github.com/wdc-dev/wdc/engine/operator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// JoinTokenCmd groups the join token commands.
type JoinTokenCmd struct {
	Create JoinTokenCreateCmd `cmd:"" help:"Make a join token of a pool and write its join file (the credential and the CA fingerprint) to stdout or -o FILE."`
	List   JoinTokenListCmd   `cmd:"" help:"List join tokens: id, pool, labels, status, expiry."`
	Revoke JoinTokenRevokeCmd `cmd:"" help:"Revoke a join token: no new registrations, and its workers drain."`
}

// JoinTokenCreateCmd makes a join token.
type JoinTokenCreateCmd struct {
	Pool  string        `arg:"" help:"The pool whose workers join with it (a pool of the configuration)."`
	Label []string      `name:"label" sep:"none" placeholder:"K=V" help:"Restrict the joining workers' labels to these of the pool's (repeatable): narrow placement, never broaden it."`
	TTL   time.Duration `name:"ttl" default:"1h" help:"How long the token can register workers."`
	Out   string        `name:"out" short:"o" placeholder:"FILE" help:"Write the join file to FILE (mode 0600) instead of stdout."`
}

// Run checks the pool against the configuration, makes the token (through
// the running apply's coordinator when an apply holds the lock, else under
// the lock for one transaction, creating the state if needed; with a
// backend, under the backend's lock, the state put back, and the join
// file pinning the CA kept beside the backend's state) and writes the
// join file.
func (c *JoinTokenCreateCmd) Run(e *env) error {
	const verb = "wdc join-token create"
	if c.TTL < time.Second || c.TTL > coordinator.MaxJoinTTL {
		return fmt.Errorf("--ttl must be from 1s to %s, have %s", coordinator.MaxJoinTTL, c.TTL)
	}
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	var pool *wdchcl.Pool
	for _, p := range cfg.Pools {
		if p.Name == strings.TrimPrefix(c.Pool, "pool.") {
			pool = p
		}
	}
	if pool == nil {
		names := make([]string, len(cfg.Pools))
		for i, p := range cfg.Pools {
			names[i] = p.Name
		}
		return fmt.Errorf("the configuration has no pool %q (pools: %s)", c.Pool, strings.Join(names, ", "))
	}
	if pool.Provider != providers.External {
		return fmt.Errorf("pool %s has provider %q: apply launches its workers, each with a one-time credential; join tokens are for pools with provider = \"external\"", pool.Name, pool.Provider)
	}
	labels, err := narrowing(pool, c.Label)
	if err != nil {
		return err
	}
	b, err := e.stateBackend(cfg)
	if err != nil {
		return err
	}
	// Check where the join file goes before a token exists that nobody
	// could hold: never over an existing file (a configuration, a device).
	var out string
	if c.Out != "" {
		dir, err := e.configDir()
		if err != nil {
			return err
		}
		out = resolve(dir, c.Out)
		if _, err := os.Lstat(out); err == nil {
			return fmt.Errorf("%s already exists: a join file holds a secret and is never written over another file; remove it or choose another path", c.Out)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	serve, err := e.serveSettings(cfg)
	if err != nil {
		return err
	}
	var op operator.Operator
	if b != nil {
		// The state's CA is the backend's (KEY.ca), the one every apply
		// on it serves with, on any machine.
		serve.CA = backendCA(context.Background(), b)
		op = e.backendOperator(verb, b, serve.Pin)
	} else {
		path, err := e.statePath(cfg)
		if err != nil {
			return err
		}
		serve.CADir = httpapi.CAFolder(filepath.Dir(path))
		store, err := state.Open(context.Background(), path)
		if err != nil {
			return err
		}
		defer store.Close()
		op = e.stateOperator(verb, store, path, serve.Pin)
	}
	cctx, cancel := callContext(0)
	defer cancel()
	jf, err := op.CreateJoinToken(cctx, operator.JoinTokenRequest{Pool: pool.Name, Labels: labels, TTL: c.TTL})
	if err != nil {
		return describeAPIError(err)
	}
	if c.Out == "" {
		_, err := e.stdout.Write(jf.Encode())
		return err
	}
	if err := protocol.WriteJoinFile(out, jf); err != nil {
		// Nobody holds the secret: take the token back, the way it was
		// made (the running apply's coordinator, when one holds the lock).
		if _, rerr := op.RevokeJoinToken(cctx, jf.ID); rerr != nil {
			return fmt.Errorf("writing the join file: %w (and revoking join token %s failed: %v; run wdc join-token revoke %s)", err, jf.ID, describeAPIError(rerr), jf.ID)
		}
		return fmt.Errorf("writing the join file: %w (join token %s was revoked again)", err, jf.ID)
	}
	hint := "wdc agent --server URL --pool " + pool.Name + " --join-file " + c.Out
	fmt.Fprintf(e.stderr, "Join token %s for pool %s, valid until %s, written to %s (it holds a secret: mode 0600).\nOn a worker: %s\n",
		jf.ID, pool.Name, views.FormatTime(jf.ExpiresAt), c.Out, hint)
	return nil
}

// narrowing parses --label K=V flags: each must be one of the pool's labels
// with that value, so a join token narrows placement and never broadens
// it. No flags means nil: the pool's labels.
func narrowing(pool *wdchcl.Pool, flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: write K=V", f)
		}
		pv, has := pool.Labels[k]
		switch {
		case !has:
			return nil, fmt.Errorf("--label %s: pool %s has no label %q (its labels: %s); a join token can only narrow the pool's labels", f, pool.Name, k, views.FormatLabels(pool.Labels))
		case pool.SensitiveLabels || pool.SensitiveLabelKeys[k]:
			if pv != v {
				return nil, fmt.Errorf("--label %s: the pool's label %q has another value", f, k)
			}
		case pv != v:
			return nil, fmt.Errorf("--label %s: pool %s has %s=%s; a join token can only narrow the pool's labels, not change them", f, pool.Name, k, pv)
		}
		out[k] = v
	}
	return out, nil
}

// JoinTokenListCmd lists join tokens.
type JoinTokenListCmd struct {
	JSON bool `name:"json" help:"Print a JSON array instead of a table."`
}

type joinTokenJSON struct {
	ID        string            `json:"id"`
	Pool      string            `json:"pool"`
	Labels    map[string]string `json:"labels"`
	Status    string            `json:"status"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	RevokedAt *time.Time        `json:"revoked_at,omitempty"`
}

// Run prints the state's join tokens (never their secrets: the state does
// not have them).
func (c *JoinTokenListCmd) Run(e *env) error {
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	ctx := context.Background()
	store, err := openForReading(ctx, path)
	if err != nil {
		return err
	}
	var list []state.JoinToken
	if store != nil {
		defer store.Close()
		if list, err = store.JoinTokens(ctx); err != nil {
			return err
		}
	}
	now := e.now()
	out := make([]joinTokenJSON, 0, len(list))
	for _, j := range list {
		st := "active"
		switch {
		case !j.RevokedAt.IsZero():
			st = "revoked"
		case !now.Before(j.ExpiresAt):
			st = "expired"
		}
		out = append(out, joinTokenJSON{ID: j.ID, Pool: j.Pool, Labels: j.Labels, Status: st, CreatedAt: j.CreatedAt, ExpiresAt: j.ExpiresAt,
			RevokedAt: views.JSONTime(j.RevokedAt)})
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].CreatedAt.Before(out[k].CreatedAt) })
	if c.JSON {
		return views.WriteJSON(e.stdout, out)
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(e.stdout, "No join tokens in the state"+noStateHint(store != nil, path)+".")
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "ID\tPOOL\tLABELS\tSTATUS\tCREATED\tEXPIRES")
	for _, j := range out {
		labels := "(the pool's)"
		if j.Labels != nil {
			labels = views.FormatLabels(j.Labels)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Pool, labels, j.Status, views.FormatTime(j.CreatedAt), views.FormatTime(j.ExpiresAt))
	}
	return tw.Flush()
}

// JoinTokenRevokeCmd revokes a join token.
type JoinTokenRevokeCmd struct {
	ID string `arg:"" help:"The join token's id (wdc join-token list)."`
}

// Run revokes the token: through the running apply's coordinator when an
// apply holds the lock (its workers are asked to drain), else under the
// lock for one transaction.
func (c *JoinTokenRevokeCmd) Run(e *env) error {
	const verb = "wdc join-token revoke"
	b, err := e.stateBackend(e.quietConfig())
	if err != nil {
		return err
	}
	var op operator.Operator
	if b != nil {
		op = e.backendOperator(verb, b, nil)
	} else {
		store, path, err := e.openExistingState(verb, "there is no join token to revoke")
		if err != nil {
			return err
		}
		defer store.Close()
		op = e.stateOperator(verb, store, path, nil)
	}
	cctx, cancel := callContext(0)
	defer cancel()
	resp, err := op.RevokeJoinToken(cctx, c.ID)
	switch {
	case errors.Is(err, operator.ErrNotFound):
		return fmt.Errorf("no join token %q in the state (wdc join-token list shows them)", c.ID)
	case err != nil:
		return describeAPIError(err)
	}
	fmt.Fprintf(e.stdout, "Revoked join token %s of pool %s.", resp.ID, resp.Pool)
	if len(resp.Draining) > 0 {
		fmt.Fprintf(e.stdout, " Draining its workers: %s.", strings.Join(resp.Draining, ", "))
	}
	fmt.Fprintln(e.stdout)
	return nil
}
