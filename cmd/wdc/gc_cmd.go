package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/engine/operator"
	"github.com/wdc-dev/wdc/internal/plural"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// GCCmd removes the blobs of the work folder's artifact store (with a
// backend, of its bucket) that no attempt of the tasks' current
// definitions refers to.
type GCCmd struct {
	DryRun bool `name:"dry-run" help:"Only list what would be removed."`
}

// Run collects the garbage: through the running apply's coordinator when
// an apply holds the lock (it also keeps what results in flight are
// uploading), else itself inside one write transaction of the state, so
// that no apply starts meanwhile; with a backend, under the backend's
// lock, the blobs of its bucket (operator.Backend.CollectGarbage). It
// prints what it freed (count and bytes) and what it kept.
func (c *GCCmd) Run(e *env) error {
	b, err := e.stateBackend(e.quietConfig())
	if err != nil {
		return err
	}
	if b != nil {
		return c.runBackend(e, b)
	}
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
	return c.report(e, resp, "")
}

// runBackend collects the garbage of b's bucket.
func (c *GCCmd) runBackend(e *env, b *backend.S3) error {
	// No time limit (a bucket may hold many blobs), but an interrupt
	// stops it: what was removed was garbage, and the lock is given back.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	resp, err := e.backendOperator("wdc gc", b, nil).CollectGarbage(ctx, c.DryRun)
	if errors.Is(err, errNoBackendState) {
		_, err := fmt.Fprintf(e.stdout, "Nothing to remove: backend %s holds no state yet.\n", b.Name())
		return err
	}
	if err != nil {
		return err
	}
	return c.report(e, resp, b.Name()+backend.BlobsSuffix)
}

// collect asks the running apply when one holds the lock (it also keeps
// what results in flight are uploading), else the state itself.
func (c *GCCmd) collect(e *env, path string) (protocol.GCResponse, error) {
	var op operator.Operator
	ctx := context.Background()
	_, err := e.findApply("wdc gc", false)
	var none errNoApply
	switch {
	case err == nil:
		if op, err = e.remoteOperator("wdc gc"); err != nil {
			return protocol.GCResponse{}, err
		}
		var cancel context.CancelFunc
		ctx, cancel = callContext(0)
		defer cancel()
	case !errors.As(err, &none):
		return protocol.GCResponse{}, err
	default:
		var st *state.Store
		if c.DryRun {
			st, err = openForReading(ctx, path)
		} else {
			st, err = state.Open(ctx, path)
		}
		if err != nil {
			return protocol.GCResponse{}, err
		}
		defer st.Close()
		op = e.stateOperator("wdc gc", st, path, nil)
	}
	resp, err := op.CollectGarbage(ctx, c.DryRun)
	if err != nil {
		return resp, describeAPIError(err)
	}
	return resp, nil
}

// report prints r; bucket names the blobs' place in a backend's bucket
// ("" for the work folder's store).
func (c *GCCmd) report(e *env, r protocol.GCResponse, bucket string) error {
	from, in := "", ""
	if bucket != "" {
		from, in = " from "+bucket, " in "+bucket
	}
	kept := fmt.Sprintf("%s (%s)", plural.Count(r.Kept, "blob", "blobs"), artifact.FormatSize(r.KeptBytes))
	switch {
	case len(r.Removed) == 0:
		_, err := fmt.Fprintf(e.stdout, "Nothing to remove: the attempts of the current definitions refer to every blob%s. Kept %s.\n", in, kept)
		return err
	case r.DryRun:
		fmt.Fprintf(e.stdout, "Would remove %s%s (%s) that no attempt of the current definitions refers to:\n",
			plural.Count(len(r.Removed), "blob", "blobs"), from, artifact.FormatSize(r.RemovedBytes))
		for _, b := range r.Removed {
			fmt.Fprintf(e.stdout, "  %s  %s\n", b.SHA256, artifact.FormatSize(b.Size))
		}
		_, err := fmt.Fprintf(e.stdout, "Would keep %s. Run wdc gc without --dry-run to remove them.\n", kept)
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "Removed %s%s (%s freed) that no attempt of the current definitions referred to; kept %s.\n",
		plural.Count(len(r.Removed), "blob", "blobs"), from, artifact.FormatSize(r.RemovedBytes), kept)
	return err
}
