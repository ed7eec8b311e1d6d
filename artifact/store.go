package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Folder names inside a store's folder.
const (
	// BlobDir holds the blobs, as BlobDir/<h[0:2]>/<h>.
	BlobDir = "sha256"
	// TempDir holds the files of Puts in progress, and of Puts a crash
	// interrupted until CleanTemp removes them.
	TempDir = "tmp"
)

// blobMode is the mode of a stored blob: read-only, since a blob never
// changes once in place, and the user's alone (a log may hold what only
// its user should read); folderMode that of the store's folders.
const (
	blobMode   = 0o400
	folderMode = 0o700
)

// Store is a content-addressed blob store in one folder. Its methods are
// safe for concurrent use. Several Stores, in one process or several, may
// share a folder: every blob stays whole, but only one Store's Puts agree
// exactly on which of them created a blob (PutResult.Created), and
// CleanTemp of one Store does not know the Puts in progress of another.
type Store struct {
	dir, blobs, tmp string
	maxSize         int64

	// mu orders the steps that change which blobs exist (the end of a
	// Put, Remove) and CleanTemp against the start of a Put; it is never
	// held while a blob's bytes are copied.
	mu sync.Mutex
	// active holds the base names of the temporary files of Puts in
	// progress, which CleanTemp leaves alone.
	active map[string]struct{}
}

// Open returns the store kept in dir, creating dir, dir/sha256 and dir/tmp
// (mode 0700) when missing. maxSize is the largest blob
// Put accepts, in bytes; it must be positive (ParseSize reads it from a
// setting). Errors: dir is "", maxSize is not positive, or a folder cannot
// be created (for example because a file has its name).
func Open(dir string, maxSize int64) (*Store, error) {
	if dir == "" {
		return nil, errors.New("artifact: no folder given for the artifact store")
	}
	if maxSize <= 0 {
		return nil, fmt.Errorf("artifact: the largest blob must be at least 1 byte, not %d", maxSize)
	}
	s := &Store{
		dir:     dir,
		blobs:   filepath.Join(dir, BlobDir),
		tmp:     filepath.Join(dir, TempDir),
		maxSize: maxSize,
		active:  map[string]struct{}{},
	}
	for _, d := range []string{s.blobs, s.tmp} {
		if err := os.MkdirAll(d, folderMode); err != nil {
			return nil, fmt.Errorf("artifact: %w", err)
		}
	}
	return s, nil
}

// EmptyHash is the SHA-256 of zero bytes: the hash of an empty log.
const EmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// OpenForReading returns the store kept in dir for reading (Stat, Open,
// Missing, Walk) without creating anything: commands that only read use
// it. Put is refused (it would need the temporary folder). Errors: dir
// does not exist or is not a folder (ErrNotFound wrapped when missing).
func OpenForReading(dir string) (*Store, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("artifact: no artifact store at %s: %w", dir, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("artifact: %s is not a folder", dir)
	}
	return &Store{dir: dir, blobs: filepath.Join(dir, BlobDir), tmp: filepath.Join(dir, TempDir), active: map[string]struct{}{}}, nil
}

// Dir returns the store's folder, as given to Open.
func (s *Store) Dir() string { return s.dir }

// MaxSize returns the largest blob Put accepts, in bytes.
func (s *Store) MaxSize() int64 { return s.maxSize }

// Path returns the file of the blob with the given hash,
// <dir>/sha256/<hash[0:2]>/<hash>, whether or not the store holds it. For
// a string that is not a valid hash (ParseHash) it returns "", so that no
// path outside the store is ever made from one.
func (s *Store) Path(hash string) string {
	if _, err := ParseHash(hash); err != nil {
		return ""
	}
	return filepath.Join(s.blobs, hash[:2], hash)
}

// Stat reports whether the store holds the blob with the given hash and its
// size in bytes (0 when not held). Only a regular file at Path(hash) is a
// blob: anything else there is reported as not held. Errors: the hash is
// invalid (ErrInvalidHash), or the file system fails.
func (s *Store) Stat(hash string) (size int64, ok bool, err error) {
	if _, err := ParseHash(hash); err != nil {
		return 0, false, err
	}
	fi, err := os.Lstat(s.Path(hash))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("artifact: %w", err)
	case !fi.Mode().IsRegular():
		return 0, false, nil
	}
	return fi.Size(), true, nil
}

// Open opens the blob with the given hash for reading and returns it with
// its size in bytes; the caller closes the file. A blob is never changed in
// place, so the file's bytes stay those of the hash even if the blob is
// removed while open. Errors: the hash is invalid (ErrInvalidHash); the
// store does not hold it (an error wrapping ErrNotFound that names the
// hash); the file system fails.
func (s *Store) Open(hash string) (*os.File, int64, error) {
	if _, ok, err := s.Stat(hash); err != nil {
		return nil, 0, err
	} else if !ok {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, hash)
	}
	f, err := os.Open(s.Path(hash))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, hash) // removed since Stat
	}
	if err != nil {
		return nil, 0, fmt.Errorf("artifact: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("artifact: %w", err)
	}
	return f, fi.Size(), nil
}

// Missing returns those of hashes the store does not hold, in the order
// given, each once. It has the shape of state.ResultInput.Held. Errors: a hash
// is invalid (ErrInvalidHash, naming its position, counted from 1), or the
// file system fails; then the result is nil.
func (s *Store) Missing(hashes []string) ([]string, error) {
	var missing []string
	seen := make(map[string]struct{}, len(hashes))
	for i, h := range hashes {
		if _, dup := seen[h]; dup {
			continue
		}
		seen[h] = struct{}{}
		_, ok, err := s.Stat(h)
		if err != nil {
			return nil, fmt.Errorf("hash %d of %d: %w", i+1, len(hashes), err)
		}
		if !ok {
			missing = append(missing, h)
		}
	}
	return missing, nil
}

// Walk calls fn with the hash and size in bytes of every blob the store
// holds, in increasing hash order. It skips, without failing, anything in
// sha256/ that is not a well-named blob: files and folders whose names are
// not those of a blob, a blob-named file in the wrong folder, and anything
// that is not a regular file. A blob put during the walk may or may not be
// seen; one removed during it is skipped if not reached yet.
//
// If fn returns an error Walk stops and returns it as it is; other errors
// are the file system's, wrapped.
func (s *Store) Walk(fn func(hash string, size int64) error) error {
	prefixes, err := os.ReadDir(s.blobs)
	if err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	for _, p := range prefixes { // ReadDir sorts by name
		if !p.IsDir() || !isPrefix(p.Name()) {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(s.blobs, p.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("artifact: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if !e.Type().IsRegular() || name[:min(2, len(name))] != p.Name() {
				continue
			}
			if _, err := ParseHash(name); err != nil {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("artifact: %w", err)
			}
			if err := fn(name, fi.Size()); err != nil {
				return err
			}
		}
	}
	return nil
}

// isPrefix reports whether name is two lowercase hex digits.
func isPrefix(name string) bool {
	if len(name) != 2 {
		return false
	}
	for i := 0; i < 2; i++ {
		if c := name[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Remove removes the blob with the given hash and returns its size in
// bytes. Removing a blob the store does not hold is not an error: the size
// is then 0. A reader that has the blob open keeps reading it whole.
// Deciding which blobs to remove is the caller's. Errors: the hash is
// invalid (ErrInvalidHash); something other than a regular file is at
// Path(hash); the file system fails.
func (s *Store) Remove(hash string) (size int64, err error) {
	if _, err := ParseHash(hash); err != nil {
		return 0, err
	}
	path := s.Path(hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("artifact: %w", err)
	case !fi.Mode().IsRegular():
		return 0, fmt.Errorf("artifact: %s is not a regular file; it is no blob, remove it by hand", path)
	}
	if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("artifact: %w", err)
	}
	syncDir(filepath.Dir(path))
	return fi.Size(), nil
}

// CleanTemp removes the files in tmp/ whose modification time is at least
// olderThan before now (it reads the clock), except those of this Store's
// Puts in progress, and returns how many it removed. olderThan of 0 or less
// removes every such file, which is safe when no other Store shares the
// folder (at start, say); otherwise give more than any upload takes, such
// as an hour. Folders in tmp/ are left alone. It tries every file and
// returns the count with all the errors met, joined.
func (s *Store) CleanTemp(olderThan time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.tmp)
	if err != nil {
		return 0, fmt.Errorf("artifact: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	var errs []error
	for _, e := range entries {
		if _, busy := s.active[e.Name()]; busy || e.IsDir() {
			continue
		}
		if olderThan > 0 {
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if fi.ModTime().After(cutoff) {
				continue
			}
		}
		switch err := os.Remove(filepath.Join(s.tmp, e.Name())); {
		case err == nil:
			removed++
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("artifact: cleaning %s: %w", s.tmp, err)
	}
	return removed, nil
}

// syncDir makes the renames and removals in dir durable where the system
// allows it; failing to is not an error (the blobs are whole either way).
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
