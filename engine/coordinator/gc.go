package coordinator

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// GCOptions are the settings of CollectGarbage.
type GCOptions struct {
	// DryRun only reports what would be removed.
	DryRun bool
	// Keep, when set, returns blobs to keep beyond those the state refers
	// to (a coordinator's uploads in flight). It is called once, while the
	// state's write transaction is held.
	Keep func() map[string]bool
	// TempOlderThan is how old a temporary file of an interrupted upload
	// must be to be removed; 0 removes all of them (safe only when no
	// other process writes the store: no apply runs).
	TempOlderThan time.Duration
}

// Blobs is a store of blobs CollectGarbage sweeps: the work folder's
// artifact store (an *artifact.Store), or the blobs of a backend's bucket.
type Blobs interface {
	// Walk calls fn with the hash and size of every blob held.
	Walk(fn func(hash string, size int64) error) error
	// Remove removes a blob and returns its size (0, and no error, when
	// it is not held). An error wrapping ErrStopCollecting ends the
	// collection at once; any other is collected and the next blob
	// tried.
	Remove(hash string) (size int64, err error)
	// CleanTemp removes what interrupted uploads left, older than
	// olderThan, and returns how many.
	CleanTemp(olderThan time.Duration) (int, error)
}

var _ Blobs = (*artifact.Store)(nil)

// ErrStopCollecting, wrapped by an error of Blobs.Remove, says that no
// blob may be removed any more (a backend's lock was lost: another holder
// may be uploading), so CollectGarbage stops there.
var ErrStopCollecting = errors.New("garbage collection stopped")

// CollectGarbage removes the blobs of blobs that st does not refer to
// (state.Store.ReferencedBlobs: the artifacts of attempts of the tasks'
// current definitions and their inputs), inside one write transaction of
// st, so that nothing is accepted or recorded meanwhile. With
// opts.DryRun it removes nothing and reads st without writing. Errors:
// those of state.Store.CollectGarbage (a *state.LockedError when an
// apply holds the lock of a store that is not its own) and of the
// artifact store; blobs removed before an error stay removed (they were
// garbage).
func CollectGarbage(ctx context.Context, st *state.Store, blobs Blobs, opts GCOptions) (protocol.GCResponse, error) {
	resp := protocol.GCResponse{DryRun: opts.DryRun, Removed: []protocol.GCBlob{}}
	sweep := func(ref map[string]bool) error {
		if opts.Keep != nil {
			for h := range opts.Keep() {
				ref[h] = true
			}
		}
		var garbage []protocol.GCBlob
		err := blobs.Walk(func(hash string, size int64) error {
			if hash == artifact.EmptyHash && !ref[hash] {
				return nil // never garbage: every coordinator holds it from the start
			}
			if ref[hash] {
				resp.Kept++
				resp.KeptBytes += size
			} else {
				garbage = append(garbage, protocol.GCBlob{SHA256: hash, Size: size})
			}
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(garbage, func(i, j int) bool { return garbage[i].SHA256 < garbage[j].SHA256 })
		if opts.DryRun {
			resp.Removed = garbage
			for _, g := range garbage {
				resp.RemovedBytes += g.Size
			}
			return nil
		}
		var errs []error
		for _, g := range garbage {
			if err := ctx.Err(); err != nil {
				return err
			}
			size, err := blobs.Remove(g.SHA256)
			if errors.Is(err, ErrStopCollecting) {
				return errors.Join(append(errs, err)...)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			resp.Removed = append(resp.Removed, protocol.GCBlob{SHA256: g.SHA256, Size: size})
			resp.RemovedBytes += size
		}
		n, err := blobs.CleanTemp(opts.TempOlderThan)
		resp.TempFiles = n
		return errors.Join(append(errs, err)...)
	}
	if opts.DryRun {
		ref, err := st.ReferencedBlobs(ctx)
		if err != nil {
			return resp, err
		}
		return resp, sweep(ref)
	}
	err := st.CollectGarbage(ctx, sweep)
	return resp, err
}
