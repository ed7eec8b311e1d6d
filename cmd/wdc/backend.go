package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/apply"
	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/engine/operator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/protocol/tlsca"
	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// defaultBackendWorkPath is, with a backend, the local working copy of
// the state an apply works on (relative to the configuration
// directory); its folder is the apply's work folder (logs, scratch).
const defaultBackendWorkPath = ".wdc/backend/state.db"

// stateBackend returns the configuration's backend, or nil when it has
// no backend block (the state is the local file). --state and WDC_STATE
// name a local file, and are refused beside a backend.
func (e *env) stateBackend(cfg *wdchcl.Config) (*backend.S3, error) {
	if cfg == nil || cfg.Settings.Backend == nil {
		return nil, nil
	}
	bs := cfg.Settings.Backend
	name := "s3://" + bs.Bucket + "/" + bs.Key
	switch {
	case e.flags.State != "":
		return nil, fmt.Errorf("--state names a local state file, and the configuration keeps the state in backend %s: drop --state, or the backend block", name)
	case e.getenv("WDC_STATE") != "":
		return nil, fmt.Errorf("WDC_STATE names a local state file, and the configuration keeps the state in backend %s: unset WDC_STATE, or drop the backend block", name)
	}
	return backend.NewS3(backend.S3Config{Bucket: bs.Bucket, Key: bs.Key, Endpoint: bs.Endpoint, Region: bs.Region,
		PathStyle: bs.PathStyle, Profile: bs.Profile, LockTTL: bs.LockTTL}, e.getenv)
}

// quietConfig loads the configuration for its wdc block only, as the
// commands that only read the state do: a configuration that does not
// load (a missing variable) gives what it could decode. Nil when there is
// none.
func (e *env) quietConfig() *wdchcl.Config {
	dir, err := e.configDir()
	if err != nil {
		return nil
	}
	cfg, _ := wdchcl.Load(dir, wdchcl.Inputs{Vars: e.flags.Var, Environ: e.environ, Providers: providers.Schemas()})
	return cfg
}

// atExit registers f to run when the command has ended.
func (e *env) atExit(f func()) { e.cleanups = append(e.cleanups, f) }

// pullForReading downloads the backend's state into a temporary file,
// removed when the command ends, and returns its path: a consistent copy
// to read. With an empty key the path names no file (an empty state).
func (e *env) pullForReading(ctx context.Context, b *backend.S3) (string, error) {
	path, _, err := e.pullCopy(ctx, b)
	return path, err
}

// pullCopy is pullForReading, with the ETag of the object pulled ("" for
// an empty key).
func (e *env) pullCopy(ctx context.Context, b *backend.S3) (path, etag string, err error) {
	dir, err := os.MkdirTemp("", "wdc-state-")
	if err != nil {
		return "", "", err
	}
	e.atExit(func() { os.RemoveAll(dir) })
	path = filepath.Join(dir, "state.db")
	if e.pulled == nil {
		e.pulled = map[string]*backend.S3{}
	}
	e.pulled[path] = b
	obj, found, err := b.Get(ctx, path)
	if err != nil {
		return "", "", err
	}
	if found {
		if _, _, err := stateInfo(ctx, path); err != nil {
			return "", "", notAState(b, err)
		}
	}
	return path, obj.ETag, nil
}

// notAState is the error for a state object that is not a state this
// wdc can use.
func notAState(b *backend.S3, err error) error {
	// The state's own words name the temporary copy and what to do with
	// a local file; what counts here is what the object is.
	why := err.Error()
	var newer *state.NewerSchemaError
	switch {
	case errors.As(err, &newer):
		why = "a newer wdc wrote it: use that wdc or a later one"
	case errors.Is(err, state.ErrCorrupt):
		why = "it is damaged"
	case errors.Is(err, state.ErrNotState):
		why = "it is not a wdc state file"
	}
	return &backend.Error{Backend: b.Name(), Op: "read the state", Object: b.Key(), Err: errors.New(why),
		Hint: "if it was damaged, wdc state push FILE puts a good copy in its place"}
}

// planningState returns the state a plan is made from, to read only:
// the local state file, or, with a backend, a copy pulled from it (ref
// names the backend and the object's ETag, for the plan document); and
// the backend's lock when one is held (nil otherwise), for the plan's
// "an apply is running" warning.
func (e *env) planningState(ctx context.Context, cfg *wdchcl.Config) (path string, ref *jsonplan.BackendRef, held *state.Lock, err error) {
	b, err := e.stateBackend(cfg)
	if err != nil || b == nil {
		path, err = e.statePath(cfg)
		return path, nil, nil, err
	}
	path, etag, err := e.pullCopy(ctx, b)
	if err != nil {
		return "", nil, nil, err
	}
	l, _, err := b.ReadLock(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	if l != nil && !l.Free(e.now()) {
		held = asStateLock(*l)
	}
	return path, &jsonplan.BackendRef{Name: b.Name(), ETag: etag}, held, nil
}

// readingPath is the state a command that only reads it and has loaded
// the configuration reads: the local state file, or a copy pulled from
// the backend (removed when the command ends).
func (e *env) readingPath(cfg *wdchcl.Config) (string, error) {
	b, err := e.stateBackend(cfg)
	if err != nil || b == nil {
		if err != nil {
			return "", err
		}
		return e.statePath(cfg)
	}
	return e.pullForReading(context.Background(), b)
}

// asStateLock is a backend lock as the messages about a state lock show
// it.
func asStateLock(l backend.Lock) *state.Lock {
	return &state.Lock{ID: l.ID, Holder: l.Holder, Host: l.Host, PID: l.PID, StartedAt: l.StartedAt, ExpiresAt: l.ExpiresAt}
}

// errBackendUnsupported refuses a command that changes the state without
// an apply, with a backend: it would change a copy.
func errBackendUnsupported(verb string, b *backend.S3) error {
	return fmt.Errorf("%s does not work with a backend yet: it would change a copy of the state, not the state in %s; "+
		"do it from an apply's configuration without the backend block, or wait for a wdc that has it", verb, b.Name())
}

// refuseBackend is errBackendUnsupported when the configuration has a
// backend, nil otherwise.
func (e *env) refuseBackend(verb string) error {
	b, err := e.stateBackend(e.quietConfig())
	if err != nil {
		return err
	}
	if b != nil {
		return errBackendUnsupported(verb, b)
	}
	return nil
}

// pushState uploads the state file path to b with a conditional PUT on
// etag ("" for a key that held nothing), from a consistent copy made
// beside it. A conflict (someone else wrote the state) is an error that
// says the local copy is kept.
func pushState(ctx context.Context, b *backend.S3, path, etag string) (backend.Object, error) {
	tmp := path + ".push"
	os.Remove(tmp)
	if err := state.Copy(ctx, path, tmp); err != nil {
		return backend.Object{}, err
	}
	defer os.Remove(tmp)
	obj, err := b.Put(ctx, tmp, etag)
	if errors.Is(err, backend.ErrConflict) {
		return obj, fmt.Errorf("%w; the state this command wrote is kept in %s", err, path)
	}
	return obj, err
}

// lockHolder names this process for a lock: user@host, the host, the pid.
func lockHolder(e *env) (holder, host string, pid int) {
	host, _ = os.Hostname()
	name := e.getenv("USER")
	if name == "" {
		name = "unknown"
	}
	return name + "@" + host, host, os.Getpid()
}

// deadOnThisHost is the backend lock's TakeOver: a lock of this host
// whose pid does not run any more is taken at once (as a local state's
// is), without waiting for it to expire.
func deadOnThisHost(host string) func(backend.Lock) bool {
	return func(l backend.Lock) bool {
		return l.Host == host && l.PID != os.Getpid() && !apply.ProcessAlive(l.PID)
	}
}

// remoteApply is an apply's hold on a backend: its lock, and the state
// pulled into the local working copy (with the ETag it had).
type remoteApply struct {
	b      *backend.S3
	lock   *backend.HeldLock
	path   string // the working copy
	etag   string // "" when the key held nothing
	serial int64  // the pulled state's serial (0 for none)
	// uploaded holds the blobs put in the bucket by this apply.
	uploaded map[string]bool
}

// lockAndPull takes the backend's lock for an apply (waiting up to wait,
// telling onWait once) and pulls the state into the working copy path,
// replacing what an earlier apply on this machine left there: the
// backend's state is the one that counts.
func lockAndPull(ctx context.Context, e *env, b *backend.S3, path string, wait time.Duration, onWait func(backend.Lock)) (*remoteApply, error) {
	holder, host, pid := lockHolder(e)
	held, err := b.AcquireLock(ctx, backend.LockRequest{Operation: "apply", Holder: holder, Host: host, PID: pid,
		Wait: wait, TakeOver: deadOnThisHost(host), OnWait: onWait})
	if err != nil {
		return nil, err
	}
	held.KeepAlive()
	r := &remoteApply{b: b, lock: held, path: path}
	if err := r.pull(ctx); err != nil {
		held.Release(context.Background()) //nolint:errcheck // it expires anyway
		return nil, err
	}
	return r, nil
}

func (r *remoteApply) pull(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(r.path), 0o700); err != nil {
		return err
	}
	for _, p := range []string{r.path, r.path + "-wal", r.path + "-shm", r.path + "-journal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replace the working copy of the state: %w", err)
		}
	}
	obj, found, err := r.b.Get(ctx, r.path)
	if err != nil || !found {
		return err
	}
	r.etag = obj.ETag
	if _, r.serial, err = stateInfo(ctx, r.path); err != nil {
		return notAState(r.b, err)
	}
	return nil
}

// Put is the apply's Checkpointer: it renews the lock (a holder that lost
// it writes nothing), then puts the consistent copy at path in place of
// the state with a conditional PUT on the ETag pulled or last put. A
// conflict (another writer replaced the state) gives the lock up, which
// stops the apply (Operation.Fence).
func (r *remoteApply) Put(ctx context.Context, path string) error {
	if err := r.lock.Renew(ctx); err != nil {
		return err
	}
	// The blobs first: a state in the bucket never names a blob that is
	// not there.
	if err := r.putBlobs(ctx); err != nil {
		return err
	}
	obj, err := r.b.Put(ctx, path, r.etag)
	if errors.Is(err, backend.ErrConflict) {
		r.lock.Abandon(fmt.Errorf("%w: the state was replaced by another writer", backend.ErrLockLost))
		return err
	}
	if err != nil {
		return err
	}
	r.etag = obj.ETag
	return nil
}

// putBlobs uploads the blobs of the working copy's artifact store (logs,
// outputs, inputs) that this apply has not uploaded yet, under their
// content hash (backend.PutBlob: a blob there already is left alone).
func (r *remoteApply) putBlobs(ctx context.Context) error {
	store, err := artifact.OpenForReading(apply.ArtifactFolder(filepath.Dir(r.path)))
	if errors.Is(err, artifact.ErrNotFound) {
		return nil // no blob yet
	}
	if err != nil {
		return err
	}
	if r.uploaded == nil {
		r.uploaded = map[string]bool{}
	}
	return store.Walk(func(hash string, size int64) error {
		if r.uploaded[hash] {
			return nil
		}
		if err := r.b.PutBlob(ctx, hash, store.Path(hash)); err != nil {
			return err
		}
		r.uploaded[hash] = true
		return nil
	})
}

// errBlobMissing: the bucket does not hold a blob the state names.
var errBlobMissing = errors.New("the backend's bucket does not hold it")

// blobStore returns the artifact store that holds the blobs of the state
// at path: its work folder's; for a copy pulled from a backend
// (pullCopy), a store beside the copy, into which the blobs named by
// hashes that it lacks are fetched from the bucket first (each checked
// against its hash). A blob the bucket lacks is left out: reading it
// fails as for a blob missing from a work folder.
func (e *env) blobStore(ctx context.Context, path string, hashes ...string) (*artifact.Store, error) {
	dir := apply.ArtifactFolder(filepath.Dir(path))
	b := e.pulled[path]
	if b == nil {
		return artifact.OpenForReading(dir)
	}
	store, err := artifact.Open(dir, 1<<62)
	if err != nil {
		return nil, err
	}
	for _, h := range hashes {
		if _, ok, err := store.Stat(h); err != nil || ok {
			continue
		}
		pr, pw := io.Pipe()
		go func() {
			found, err := b.GetBlob(ctx, h, pw)
			if err == nil && !found {
				err = errBlobMissing
			}
			pw.CloseWithError(err)
		}()
		_, err := store.Put(ctx, h, pr)
		pr.Close()
		if err != nil && !errors.Is(err, errBlobMissing) {
			return nil, err
		}
	}
	return store, nil
}

// finish releases the lock, once the apply put its last checkpoint. A
// lost lock is the error (the apply put nothing after it).
func (r *remoteApply) finish(ctx context.Context) error {
	defer r.lock.Release(ctx) //nolint:errcheck // a lock not released expires
	if err := r.lock.LostError(); err != nil {
		return fmt.Errorf("%w (the working copy %s keeps what this apply did)", err, r.path)
	}
	return nil
}

// backendOperator is the operator of the state in b, for verb (the
// commands that change the state without an apply): each operation takes
// the backend's lock (refused while an apply holds it), pulls the state,
// writes the copy, puts it back with a conditional write when it
// changed, and releases the lock. pin gives the fingerprint a join file
// pins (nil for the commands that make none).
func (e *env) backendOperator(verb string, b *backend.S3, pin func() (string, error)) *operator.Backend {
	if pin == nil {
		pin = func() (string, error) { return "", fmt.Errorf("%s makes no join file", verb) }
	}
	return &operator.Backend{Now: e.now, Pin: pin,
		Checkout: func(ctx context.Context, create bool) (*operator.Copy, error) {
			return e.checkout(ctx, verb, b, create)
		}}
}

// errNoBackendState: the backend holds no state (and the command makes
// none).
var errNoBackendState = errors.New("the backend holds no state yet")

// checkout takes b's lock for verb and pulls the state into a copy in a
// folder of its own (removed at the commit); with create, a key that
// holds nothing gives a new state, else it is an error wrapping
// errNoBackendState. A state left locked by an apply that died is
// refused: that apply's takeover comes first.
func (e *env) checkout(ctx context.Context, verb string, b *backend.S3, create bool) (*operator.Copy, error) {
	holder, host, pid := lockHolder(e)
	held, err := b.AcquireLock(ctx, backend.LockRequest{Operation: verb, Holder: holder, Host: host, PID: pid, TakeOver: deadOnThisHost(host)})
	if err != nil {
		return nil, lockedForOperator(verb, err)
	}
	// Renewed while the command works (gc over many blobs may outlast
	// lock_ttl); Release stops it.
	held.KeepAlive()
	dir, err := os.MkdirTemp("", "wdc-operator-")
	if err != nil {
		held.Release(context.Background()) //nolint:errcheck // it expires anyway
		return nil, err
	}
	c := &backendCopy{b: b, lock: held, dir: dir, path: filepath.Join(dir, "state.db")}
	obj, found, err := b.Get(ctx, c.path)
	switch {
	case err != nil:
	case !found && !create:
		err = fmt.Errorf("%w (backend %s): there is nothing for %s to change", errNoBackendState, b.Name(), verb)
	case found:
		c.etag = obj.ETag
		if _, _, ierr := stateInfo(ctx, c.path); ierr != nil {
			err = notAState(b, ierr)
		}
	}
	if err == nil {
		c.store, err = state.Open(ctx, c.path)
	}
	if err == nil {
		var snap *state.Snapshot
		if snap, err = c.store.Snapshot(ctx); err == nil && snap.Lock != nil {
			l := snap.Lock
			err = fmt.Errorf("the state in backend %s was left by an apply that stopped without giving its lock back (%s, host %s, pid %d, since %s): run wdc apply, which takes it over and finishes what it left, then %s again",
				b.Name(), l.Holder, l.Host, l.PID, views.FormatTime(l.StartedAt), verb)
		} else if err == nil {
			c.serial = snap.Serial
		}
	}
	if err != nil {
		c.release()
		return nil, err
	}
	return &operator.Copy{Store: c.store, ArtifactDir: apply.ArtifactFolder(dir), Blobs: &bucketBlobs{ctx: ctx, b: b, lock: held},
		Put: c.put, Commit: c.commit}, nil
}

// lockedForOperator says what to do when verb finds the backend's lock
// held: it waits for no lock, and the holder (an apply's coordinator, on
// its own copy of the state) is the only writer while it runs.
func lockedForOperator(verb string, err error) error {
	var le *backend.LockedError
	if !errors.As(err, &le) {
		return err
	}
	l := le.Lock
	le.Hint = fmt.Sprintf("%s changes the state only when nothing holds its lock; run it again once that %s has finished", verb, l.Operation)
	if l.Operation == "apply" {
		le.Hint += fmt.Sprintf(" (its coordinator works on its own copy of the state, on host %s, and puts it back as it ends)", l.Host)
	}
	le.Hint += "; if it is gone for good, its lock expires at " + l.ExpiresAt.UTC().Format(time.RFC3339) + " unless renewed, or run wdc force-unlock " + l.ID
	return le
}

// backendCopy is a state checked out of a backend (checkout): the lock
// held, the copy open, and what was last put.
type backendCopy struct {
	b      *backend.S3
	lock   *backend.HeldLock
	dir    string // the copy's folder, removed at the end
	path   string
	store  *state.Store
	etag   string // the object's, as pulled or last put ("" when the key held nothing)
	serial int64  // the copy's serial, as pulled or last put
}

// put renews the lock (a holder that lost it writes nothing) and puts the
// copy in place of the object with a conditional write on the ETag pulled
// or last put.
func (c *backendCopy) put(ctx context.Context) error {
	if err := c.lock.Renew(ctx); err != nil {
		return err
	}
	_, serial, err := c.store.Info(ctx)
	if err != nil {
		return err
	}
	obj, err := pushState(ctx, c.b, c.path, c.etag)
	if err != nil {
		return err
	}
	c.etag, c.serial = obj.ETag, serial
	return nil
}

// commit puts the copy back when ok and its content changed since it was
// pulled or last put, then closes it and releases the lock.
func (c *backendCopy) commit(ctx context.Context, ok bool) error {
	defer c.release()
	_, serial, err := c.store.Info(ctx)
	if ok && err == nil && serial != c.serial {
		err = c.put(ctx)
	}
	if cerr := c.store.Close(); err == nil {
		err = cerr
	}
	c.store = nil
	return err
}

func (c *backendCopy) release() {
	if c.store != nil {
		c.store.Close()
	}
	c.lock.Release(context.Background()) //nolint:errcheck // it expires anyway
	os.RemoveAll(c.dir)
}

// bucketBlobs are the blobs of a backend's bucket, as garbage collection
// sweeps them (coordinator.Blobs), under lock: a blob is removed only
// while it is held, since the next holder (an apply) may upload a blob
// again, or find it there and upload nothing.
type bucketBlobs struct {
	ctx   context.Context
	b     *backend.S3
	lock  *backend.HeldLock
	sizes map[string]int64 // as listed
}

func (s *bucketBlobs) Walk(fn func(hash string, size int64) error) error {
	if s.sizes == nil {
		s.sizes = map[string]int64{}
	}
	return s.b.ListBlobs(s.ctx, func(hash string, size int64) error {
		s.sizes[hash] = size
		return fn(hash, size)
	})
}

func (s *bucketBlobs) Remove(hash string) (int64, error) {
	if err := s.lock.LostError(); err != nil {
		why := err
		var be *backend.Error
		if errors.As(err, &be) {
			why = be.Err // (its hint is an apply's)
		}
		return 0, fmt.Errorf("%w: backend %s: %v; the blobs removed before it were garbage: run wdc gc again", coordinator.ErrStopCollecting, s.b.Name(), why)
	}
	if err := s.b.RemoveBlob(s.ctx, hash); err != nil {
		return 0, err
	}
	return s.sizes[hash], nil
}

// CleanTemp: a bucket keeps nothing of an interrupted upload (each blob
// is one PUT).
func (s *bucketBlobs) CleanTemp(time.Duration) (int, error) { return 0, nil }

// backendCA returns the source of the state's own CA with backend b: the
// CA object beside the state (KEY.ca), made by the first command that
// needs it, so that every machine's apply serves HTTPS with it and join
// files pin it. Read once per command.
func backendCA(ctx context.Context, b *backend.S3) func() (*tlsca.CA, error) {
	return sync.OnceValues(func() (*tlsca.CA, error) { return loadBackendCA(ctx, b) })
}

// loadBackendCA reads b's CA object, or makes the CA and creates the
// object with a conditional create (two machines at once end with one:
// the loser reads the winner's).
func loadBackendCA(ctx context.Context, b *backend.S3) (*tlsca.CA, error) {
	for try := 0; ; try++ {
		data, found, err := b.ReadCA(ctx)
		if err != nil {
			return nil, err
		}
		if found {
			ca, err := tlsca.ParseBundle(data, "the CA object")
			if err != nil {
				return nil, &backend.Error{Backend: b.Name(), Object: b.Key() + backend.CASuffix, Op: "read the CA", Err: err,
					Hint: "it is not a CA wdc wrote: remove it, and the next command that needs the CA makes a new one (workers then need its fingerprint: join files made before stop working)"}
			}
			return ca, nil
		}
		// The CA's validity is the wall clock's, never a test clock's.
		ca, err := tlsca.New(time.Now())
		if err != nil {
			return nil, err
		}
		bundle, err := ca.Bundle()
		if err != nil {
			return nil, err
		}
		if err := b.CreateCA(ctx, bundle); err == nil {
			return ca, nil
		} else if !errors.Is(err, backend.ErrConflict) || try == 2 {
			return nil, err
		}
		// another command made it meanwhile: read that one
	}
}
