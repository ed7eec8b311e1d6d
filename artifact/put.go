package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// copyBuf is the size of the buffer Put reads into, in bytes: the most of a
// blob it holds in memory at a time.
const copyBuf = 32 << 10

// PutResult says what Put stored.
type PutResult struct {
	// Hash is the blob's hash (the one claimed, since it matched).
	Hash string
	// Size is the blob's size in bytes.
	Size int64
	// Created is true when this Put placed the blob, false when the store
	// already held it and the bytes were dropped.
	Created bool
}

// Put stores the bytes of r as the blob with hash want, which must be a
// valid hash (ParseHash) of the bytes the caller expects r to hold.
//
// It reads r into a temporary file in tmp/, hashing as it writes and never
// holding more than 32 KiB of it in memory, until r reports io.EOF. Then,
// if the bytes hash to want, it syncs the file and renames it into place as
// a read-only file of the user's alone (mode 0400): a reader sees the whole blob or nothing.
// If the store already holds the blob, the new copy is dropped and Created
// is false; a file of another size at the blob's path is taken as damaged
// and replaced. Concurrent Puts of one blob all succeed and leave one whole
// blob; on one Store exactly one of them reports Created.
//
// Errors (nothing is stored and no temporary file is left after any):
//   - want is invalid: ErrInvalidHash, before r is read;
//   - more than MaxSize bytes arrive: ErrTooLarge, wrapped with the cap; r
//     is read no further than one byte past the cap;
//   - the bytes hash to something else: a *MismatchError;
//   - ctx is done: ctx.Err(), wrapped. ctx is checked before each read of
//     r, so a read that blocks is not interrupted: the caller unblocks it
//     (an HTTP server closes a request's body when the request ends);
//   - r fails: its error, wrapped;
//   - the file system fails: its error, wrapped.
func (s *Store) Put(ctx context.Context, want string, r io.Reader) (PutResult, error) {
	if _, err := ParseHash(want); err != nil {
		return PutResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return PutResult{}, fmt.Errorf("artifact: put %s: %w", want, err)
	}
	if s.maxSize <= 0 {
		return PutResult{}, fmt.Errorf("artifact: put %s: the store was opened for reading", want)
	}
	f, err := s.createTemp()
	if err != nil {
		return PutResult{}, err
	}
	name := f.Name()
	placed := false
	defer func() {
		if !placed {
			f.Close()
			os.Remove(name)
		}
		s.mu.Lock()
		delete(s.active, filepath.Base(name))
		s.mu.Unlock()
	}()

	size, got, err := s.copy(ctx, f, want, r)
	if err != nil {
		return PutResult{}, err
	}
	if got != want {
		return PutResult{}, &MismatchError{Want: want, Got: got, Size: size}
	}
	if err := f.Chmod(blobMode); err != nil {
		return PutResult{}, fmt.Errorf("artifact: %w", err)
	}
	if err := f.Sync(); err != nil {
		return PutResult{}, fmt.Errorf("artifact: %w", err)
	}
	if err := f.Close(); err != nil {
		return PutResult{}, fmt.Errorf("artifact: %w", err)
	}
	created, err := s.place(name, want, size)
	if err != nil {
		return PutResult{}, err
	}
	placed = created // else the deferred function drops the copy
	return PutResult{Hash: want, Size: size, Created: created}, nil
}

// createTemp creates a new temporary file in tmp/ and records it as a Put
// in progress, so that CleanTemp leaves it alone.
func (s *Store) createTemp() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	s.active[filepath.Base(f.Name())] = struct{}{}
	return f, nil
}

// copy reads r into f until io.EOF, at most maxSize+1 bytes, and returns
// how many bytes it wrote and their hash.
func (s *Store) copy(ctx context.Context, f *os.File, want string, r io.Reader) (int64, string, error) {
	h := sha256.New()
	buf := make([]byte, copyBuf)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return 0, "", fmt.Errorf("artifact: put %s: %w", want, err)
		}
		p := buf
		if left := s.maxSize - n; left < int64(len(p)) {
			p = p[:left+1] // one byte past the cap tells that it was passed
		}
		k, rerr := r.Read(p)
		if k < 0 || k > len(p) {
			return 0, "", fmt.Errorf("artifact: put %s: the reader returned %d bytes for a buffer of %d", want, k, len(p))
		}
		if k > 0 {
			n += int64(k)
			if n > s.maxSize {
				return 0, "", tooLarge(s.maxSize)
			}
			h.Write(p[:k])
			if _, err := f.Write(p[:k]); err != nil {
				return 0, "", fmt.Errorf("artifact: %w", err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, "", fmt.Errorf("artifact: reading blob %s: %w", want, rerr)
		}
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// place renames the synced temporary file tmp into place as the blob hash of
// size bytes, unless a blob of that size is there already. It reports
// whether it renamed.
func (s *Store) place(tmp, hash string, size int64) (bool, error) {
	path := s.Path(hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode().IsRegular() && fi.Size() == size:
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("artifact: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), folderMode); err != nil {
		return false, fmt.Errorf("artifact: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("artifact: %w", err)
	}
	syncDir(filepath.Dir(path))
	return true, nil
}
