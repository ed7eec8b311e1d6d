package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// GCCmd removes the blobs of the work folder's artifact store that no
// attempt of the tasks' current definitions refers to.
type GCCmd struct {
	DryRun bool `name:"dry-run" help:"Only list what would be removed."`
}

// Run collects the garbage: through the running apply's coordinator when
// an apply holds the lock (it also keeps what results in flight are
// uploading), else itself inside one write transaction of the state, so
// that no apply starts meanwhile. It prints what it freed (count and
// bytes) and what it kept.
func (c *GCCmd) Run(e *env) error {
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(e.stdout, "Nothing to remove: there is no state file at %s yet.\n", path)
		return nil
	}
	resp, err := c.collect(e, path)
	if err != nil {
		return err
	}
	return c.report(e, resp)
}

func (c *GCCmd) collect(e *env, path string) (protocol.GCResponse, error) {
	_, err := e.findApply("wdc gc", false)
	var none errNoApply
	switch {
	case err == nil:
		return c.remote(e)
	case !errors.As(err, &none):
		return protocol.GCResponse{}, err
	}
	ctx := context.Background()
	dir := engine.ArtifactFolder(filepath.Dir(path))
	var st *state.Store
	var blobs *artifact.Store
	if c.DryRun {
		if st, err = openForReading(ctx, path); err == nil {
			blobs, err = artifact.OpenForReading(dir)
		}
	} else {
		if st, err = state.Open(ctx, path); err == nil {
			blobs, err = artifact.Open(dir, 1) // never Puts: the size cap is unused
		}
	}
	if st != nil {
		defer st.Close()
	}
	if errors.Is(err, artifact.ErrNotFound) {
		return protocol.GCResponse{DryRun: c.DryRun, Removed: []protocol.GCBlob{}}, nil
	}
	if err != nil {
		return protocol.GCResponse{}, err
	}
	resp, err := coordinator.CollectGarbage(ctx, st, blobs, coordinator.GCOptions{DryRun: c.DryRun})
	var locked *state.LockedError
	if errors.As(err, &locked) {
		// An apply took the lock since: its coordinator collects.
		return c.remote(e)
	}
	return resp, err
}

func (c *GCCmd) remote(e *env) (protocol.GCResponse, error) {
	cl, _, err := e.operatorClient("wdc gc")
	if err != nil {
		return protocol.GCResponse{}, err
	}
	ctx, cancel := callContext(0)
	defer cancel()
	resp, err := cl.GC(ctx, protocol.GCRequest{DryRun: c.DryRun})
	if err != nil {
		return resp, describeAPIError(err)
	}
	return resp, nil
}

func (c *GCCmd) report(e *env, r protocol.GCResponse) error {
	kept := fmt.Sprintf("%s (%s)", plural(r.Kept, "blob"), artifact.FormatSize(r.KeptBytes))
	switch {
	case len(r.Removed) == 0:
		_, err := fmt.Fprintf(e.stdout, "Nothing to remove: the attempts of the current definitions refer to every blob. Kept %s.\n", kept)
		return err
	case r.DryRun:
		fmt.Fprintf(e.stdout, "Would remove %s (%s) that no attempt of the current definitions refers to:\n",
			plural(len(r.Removed), "blob"), artifact.FormatSize(r.RemovedBytes))
		for _, b := range r.Removed {
			fmt.Fprintf(e.stdout, "  %s  %s\n", b.SHA256, artifact.FormatSize(b.Size))
		}
		_, err := fmt.Fprintf(e.stdout, "Would keep %s. Run wdc gc without --dry-run to remove them.\n", kept)
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "Removed %s (%s freed) that no attempt of the current definitions referred to; kept %s.\n",
		plural(len(r.Removed), "blob"), artifact.FormatSize(r.RemovedBytes), kept)
	return err
}

// plural writes n and the noun, with an "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
