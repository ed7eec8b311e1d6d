package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// Copy writes a consistent copy of the state file src to dest, a path
// that must not exist yet: SQLite's VACUUM INTO, from a read-only
// connection, copies one transaction's view of the file (an apply may be
// writing it meanwhile; src is never written) into a complete database of
// its own, without the side files (-wal, -shm) of the original. The copy
// is made 0600, as every state file is. Errors: one wrapping
// fs.ErrNotExist when src does not exist, fs.ErrExist when dest does.
func Copy(ctx context.Context, src, dest string) error {
	abs, err := filepath.Abs(src)
	if err != nil {
		return fmt.Errorf("state file %s: %w", src, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("state file %s: %w", src, err)
	}
	destAbs, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("copy of the state to %s: %w", dest, err)
	}
	if _, err := os.Lstat(destAbs); err == nil {
		return fmt.Errorf("copy of the state to %s: %w", dest, fs.ErrExist)
	}
	// mode=ro without query_only: query_only refuses VACUUM INTO, while
	// mode=ro alone keeps src from being written (checkConstraints).
	db, err := openDB("file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	err = retryBusy(ctx, func() error {
		_, err := db.ExecContext(ctx, `VACUUM INTO ?`, destAbs)
		return err
	})
	if err != nil {
		os.Remove(destAbs)
		return openError("read", abs, src, fmt.Errorf("copy the state file %s to %s: %w", src, dest, err))
	}
	if err := os.Chmod(destAbs, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("copy of the state to %s: %w", dest, err)
	}
	return nil
}

// NewPutID gives the state a new random put id (migration 008) and
// returns it, so that a copy made after it differs from every copy made
// before, and so does the ETag an object store gives it (the hash of its
// bytes): a conditional PUT on an older object's ETag is then refused.
// Like the lock's writes it is coordination, not content: it does not
// bump the serial (a saved plan stays valid).
func (s *Store) NewPutID(ctx context.Context) (string, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	put := hex.EncodeToString(id[:])
	err := s.writeLock(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE put_id SET put_id = ? WHERE id = 1`, put)
		return err
	})
	return put, err
}
