package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/state"
	"golang.org/x/term"
)

// StateCmd groups the commands that move a whole state.
type StateCmd struct {
	Pull StatePullCmd `cmd:"" help:"Write a consistent copy of the state to FILE, or to standard output: from the backend when the configuration has one, else from the local state file. Changes nothing."`
	Push StatePushCmd `cmd:"" help:"Move a local state file into the configuration's backend: refused when the backend holds a state of another lineage, or of the same lineage with a serial as high."`
}

// StatePullCmd writes a copy of the state for inspection.
type StatePullCmd struct {
	File string `arg:"" optional:"" name:"file" predictor:"file" help:"Where to write the copy (relative to the configuration directory; never over an existing file). Default: standard output, when it is not a terminal."`
}

// Run copies the state: a pulled object is checked to be a wdc state
// file first.
func (c *StatePullCmd) Run(e *env) error {
	ctx := context.Background()
	cfg := e.quietConfig()
	b, err := e.stateBackend(cfg)
	if err != nil {
		return err
	}
	var out string
	if c.File != "" {
		dir, err := e.configDir()
		if err != nil {
			return err
		}
		out = resolve(dir, c.File)
		if _, err := os.Lstat(out); err == nil {
			return fmt.Errorf("%s already exists: wdc state pull never writes over a file; remove it or choose another path", c.File)
		}
	} else if f, ok := fileOf(e.stdout); ok && term.IsTerminal(int(f.Fd())) {
		return errors.New("the state is a SQLite file, not text: give a FILE, or redirect standard output")
	}
	tmpDir, err := os.MkdirTemp("", "wdc-state-pull-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	copyPath := filepath.Join(tmpDir, "state.db")
	from := ""
	if b != nil {
		from = b.Name()
		pulled := filepath.Join(tmpDir, "pulled.db")
		_, found, err := b.Get(ctx, pulled)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("backend %s holds no state yet: wdc apply makes one, and wdc state push FILE moves a local one there", b.Name())
		}
		if _, _, err := stateInfo(ctx, pulled); err != nil {
			return notAState(b, err)
		}
		copyPath = pulled
	} else {
		path, err := e.statePath(cfg)
		if err != nil {
			return err
		}
		from = path
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no state file at %s: there is no state to pull", path)
		}
		if _, _, err := stateInfo(ctx, path); err != nil {
			return err
		}
		if err := state.Copy(ctx, path, copyPath); err != nil {
			return err
		}
	}
	lineage, serial, err := stateInfo(ctx, copyPath)
	if err != nil {
		return err
	}
	if out == "" {
		f, err := os.Open(copyPath)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(e.stdout, f)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return err
	}
	if err := moveFile(copyPath, out); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "Pulled the state (lineage %s, serial %d) from %s to %s.\n", lineage, serial, from, c.File)
	return err
}

// StatePushCmd moves a local state into the backend.
type StatePushCmd struct {
	File        string        `arg:"" name:"file" predictor:"file" help:"The local state file to push (relative to the configuration directory)."`
	LockTimeout time.Duration `name:"lock-timeout" default:"0s" help:"How long to wait for the backend's lock held by a running apply (default: fail at once)."`
}

// Run pushes FILE under the backend's lock, with a conditional PUT on
// what the backend held (If-None-Match: * for an empty key).
func (c *StatePushCmd) Run(e *env) error {
	ctx := context.Background()
	cfg := e.quietConfig()
	b, err := e.stateBackend(cfg)
	if err != nil {
		return err
	}
	if b == nil {
		return errors.New("wdc state push needs a backend: add a backend \"s3\" block to the configuration's wdc block (docs/configuration.md, \"Backend\")")
	}
	dir, err := e.configDir()
	if err != nil {
		return err
	}
	src := resolve(dir, c.File)
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("state file %s: %w", c.File, err)
	}
	st, err := state.OpenReadOnly(ctx, src)
	if err != nil {
		return err
	}
	err = st.QuickCheck(ctx)
	var lineage string
	var serial int64
	if err == nil {
		lineage, serial, err = st.Info(ctx)
	}
	var snap *state.Snapshot
	if err == nil {
		snap, err = st.Snapshot(ctx)
	}
	st.Close()
	if err != nil {
		return err
	}
	if l := snap.Lock; l != nil && l.ExpiresAt.After(e.now()) {
		return fmt.Errorf("%s is locked by an apply (%s, host %s, pid %d, lock %s): push it once that apply has ended", c.File, l.Holder, l.Host, l.PID, l.ID)
	}
	tmpDir, err := os.MkdirTemp("", "wdc-state-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	copyPath := filepath.Join(tmpDir, "push.db")
	if err := state.Copy(ctx, src, copyPath); err != nil {
		return err
	}
	holder, host, pid := lockHolder(e)
	held, err := b.AcquireLock(ctx, backend.LockRequest{Operation: "state push", Holder: holder, Host: host, PID: pid,
		Wait: c.LockTimeout, TakeOver: deadOnThisHost(host)})
	if err != nil {
		return err
	}
	defer held.Release(context.Background()) //nolint:errcheck // it expires anyway
	cur := filepath.Join(tmpDir, "current.db")
	obj, found, err := b.Get(ctx, cur)
	if err != nil {
		return err
	}
	etag, replaced := "", ""
	if found {
		etag = obj.ETag
		rl, rs, err := stateInfo(ctx, cur)
		var newer *state.NewerSchemaError
		switch {
		case errors.As(err, &newer):
			return fmt.Errorf("backend %s holds a state that a newer wdc wrote: refusing to replace it; use that wdc", b.Name())
		case err != nil:
			// Not a state at all (damaged, or something else): what
			// push is for is putting a good one in its place.
			var be *backend.Error
			if errors.As(notAState(b, err), &be) {
				replaced = be.Err.Error()
			}
		case rl != lineage:
			return fmt.Errorf("backend %s holds another state (lineage %s, serial %d) than %s (lineage %s, serial %d): refusing to replace it; use another key for this state",
				b.Name(), rl, rs, c.File, lineage, serial)
		case rs >= serial:
			return fmt.Errorf("backend %s holds this state at serial %d, and %s is at serial %d: refusing to replace it with an older or equal one (wdc state pull shows what is there)",
				b.Name(), rs, c.File, serial)
		}
	}
	if err := held.Renew(ctx); err != nil {
		return err
	}
	if _, err := b.Put(ctx, copyPath, etag); err != nil {
		return err
	}
	if replaced != "" {
		fmt.Fprintf(e.stdout, "Replaced an object that was not a wdc state file (%s).\n", replaced)
	}
	_, err = fmt.Fprintf(e.stdout, "Pushed %s (lineage %s, serial %d) to %s.\n", c.File, lineage, serial, b.Name())
	return err
}

// stateInfo opens the state file path read-only, checks it (QuickCheck)
// and returns its lineage and serial.
func stateInfo(ctx context.Context, path string) (string, int64, error) {
	st, err := state.OpenReadOnly(ctx, path)
	if err != nil {
		return "", 0, err
	}
	defer st.Close()
	if err := st.QuickCheck(ctx); err != nil {
		return "", 0, err
	}
	return st.Info(ctx)
}

// moveFile renames src to dest, or copies it where a rename cannot go
// (another file system); dest is made 0600.
func moveFile(src, dest string) error {
	if err := os.Rename(src, dest); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dest)
		return err
	}
	return out.Close()
}
