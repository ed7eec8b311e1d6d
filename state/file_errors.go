package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// SQLite primary result codes this file recognizes (sqlite3.h).
const (
	sqlitePerm     = 3
	sqliteReadOnly = 8
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

// EmptyFileError is returned (wrapping ErrNotState) by Open, OpenReadOnly
// and Inspect for a state file of 0 bytes: it holds no state, and wdc
// neither reads nor silently re-creates it (it may be what is left of a
// state that was lost).
type EmptyFileError struct {
	Path string // the state file as given
}

// Error says the file is empty, how to start fresh, and that a backup is
// the other way.
func (e *EmptyFileError) Error() string {
	return fmt.Sprintf("state file %s is empty (0 bytes), so it holds no state. To start a fresh state, remove it (rm %s) and run the command again; "+
		"if it should hold the state of earlier applies, restore it from a backup", e.Path, e.Path)
}

// Unwrap returns ErrNotState.
func (e *EmptyFileError) Unwrap() error { return ErrNotState }

// DiskFullError is returned (wrapping ErrDiskFull and the SQLite or file
// system error) when the state file cannot be written because its disk is
// full. Nothing of the failed write was kept.
type DiskFullError struct {
	Path string // the state file as given
	Err  error  // what SQLite or the file system said
}

// Error names the file, what SQLite or the file system said, and what to
// free.
func (e *DiskFullError) Error() string {
	return fmt.Sprintf("state file %s: the disk is full (%v): free space on the file system that holds %s, then run the command again",
		e.Path, e.Err, filepath.Dir(e.Path))
}

// Unwrap returns ErrDiskFull and the underlying error.
func (e *DiskFullError) Unwrap() []error { return []error{ErrDiskFull, e.Err} }

// AccessError is returned (wrapping ErrNoAccess and the underlying error)
// when the state file cannot be created, opened or read because of file
// permissions or a read-only file system. Its message says which path and
// why, e.g. "cannot create the state file /x/.wdc/state.db: the folder
// /x/.wdc is not writable".
type AccessError struct {
	Op     string // "create", "open" or "read"
	Path   string // the state file as given
	Reason string // which path is not writable or readable, and why that matters
	Err    error  // what SQLite or the file system said
}

// Error reads "cannot OP the state file PATH: REASON".
func (e *AccessError) Error() string {
	return fmt.Sprintf("cannot %s the state file %s: %s", e.Op, e.Path, e.Reason)
}

// Unwrap returns ErrNoAccess and the underlying error.
func (e *AccessError) Unwrap() []error { return []error{ErrNoAccess, e.Err} }

// CorruptError is returned (wrapping ErrCorrupt and the SQLite error) by
// any read or write of a state file whose content SQLite found damaged
// (SQLITE_CORRUPT), and by QuickCheck. Its message is what wdc doctor's
// state.integrity says: which file, that it is damaged, what to do.
type CorruptError struct {
	Path   string // the state file as given
	Detail string // what SQLite said, e.g. "database disk image is malformed (11)"
	Err    error  // the SQLite error, or nil (QuickCheck)
}

// Error names the file and says what to do.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("state file %s is damaged (SQLite: %s). Run wdc doctor for what it finds; restore the state file from a backup, "+
		"or, to start a fresh state (every task runs again), move it away with its -wal and -shm files, if any: mv %s %s.damaged",
		e.Path, e.Detail, e.Path, e.Path)
}

// Unwrap returns ErrCorrupt and the SQLite error.
func (e *CorruptError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Err}
}

// corruptError wraps err in a *CorruptError for the file p when SQLite
// says the file is damaged, and returns it unchanged otherwise.
func corruptError(p string, err error) error {
	var ce *CorruptError
	if err == nil || sqliteCode(err)&0xff != sqliteCorrupt || errors.As(err, &ce) {
		return err
	}
	detail := err.Error()
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		detail = coded.(error).Error()
	}
	return &CorruptError{Path: p, Detail: detail, Err: err}
}

// isFull reports whether err says the disk is full: SQLITE_FULL, or ENOSPC
// or EDQUOT from the file system.
func isFull(err error) bool {
	return err != nil && (sqliteCode(err)&0xff == sqliteFull || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}

// isAccessDenied reports whether err is SQLite or the file system refusing
// to open or write a file (permissions, a read-only file system).
func isAccessDenied(err error) bool {
	if err == nil {
		return false
	}
	switch sqliteCode(err) & 0xff {
	case sqliteCantOpen, sqliteReadOnly, sqlitePerm:
		return true
	}
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// fullError wraps err in a *DiskFullError for the file p when it says the
// disk is full, and returns it unchanged otherwise.
func fullError(p string, err error) error {
	var dfe *DiskFullError
	if isFull(err) && !errors.As(err, &dfe) {
		return &DiskFullError{Path: p, Err: err}
	}
	return err
}

// explainOpen turns an error of opening or creating the state file abs
// (shown as p) into a *DiskFullError or an *AccessError that says which
// path is at fault, when it is one of those; other errors are returned
// unchanged. op is "create", "open" (for writing) or "read".
func explainOpen(op, abs, p string, err error) error {
	if isFull(err) {
		return fullError(p, err)
	}
	var ae *AccessError
	if !isAccessDenied(err) || errors.As(err, &ae) {
		return err
	}
	reason := accessReason(op, abs)
	if reason == "" {
		reason = err.Error()
	}
	return &AccessError{Op: op, Path: p, Reason: reason, Err: err}
}

// accessReason finds out why the state file abs cannot be used for op:
// which folder or file is not writable or readable, with what SQLite
// needs of it. It returns "" when every permission it checks is there.
func accessReason(op, abs string) string {
	dir := filepath.Dir(abs)
	base := filepath.Base(abs)
	switch op {
	case "create":
		return folderReason(nearestFolder(dir), "")
	case "open":
		if r := folderReason(dir, fmt.Sprintf("; SQLite writes %s-wal and %s-shm beside the state file", base, base)); r != "" {
			return r
		}
		if r := fileReason(abs, unix.W_OK, "writable"); r != "" {
			return r
		}
	case "read":
		if _, err := os.Stat(abs + "-shm"); errors.Is(err, fs.ErrNotExist) {
			if r := folderReason(dir, fmt.Sprintf("; SQLite creates %s-shm beside the state file to read it", base)); r != "" {
				return r
			}
		}
	}
	return fileReason(abs, unix.R_OK, "readable")
}

// folderReason says why dir is not writable, followed by why, or "" when
// it is.
func folderReason(dir, why string) string {
	err := unix.Access(dir, unix.W_OK|unix.X_OK)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("the folder %s is on a read-only file system%s", dir, why)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Sprintf("the folder %s does not exist", dir)
	default:
		return fmt.Sprintf("the folder %s is not writable (%v)%s", dir, err, why)
	}
}

// fileReason says why the file abs lacks the access mode (unix.R_OK or
// unix.W_OK, named adjective), or "" when it has it.
func fileReason(abs string, mode uint32, adjective string) string {
	err := unix.Access(abs, mode)
	switch {
	case err == nil || errors.Is(err, syscall.ENOENT):
		return ""
	case errors.Is(err, syscall.EROFS):
		return "the file is on a read-only file system"
	default:
		return fmt.Sprintf("the file is not %s (%v)", adjective, err)
	}
}

// nearestFolder returns dir, or its nearest ancestor that exists: the
// folder in which something has to be created.
func nearestFolder(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}
