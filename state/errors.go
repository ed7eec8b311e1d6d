package state

import (
	"errors"
	"fmt"
)

// Sentinel errors. Methods wrap them with context; test with errors.Is.
var (
	// ErrNotFound: a named task, worker, pool or lock does not exist.
	ErrNotFound = errors.New("not found")

	// ErrLeaseHeld: the task already has an active lease. GrantLease returns
	// it when the database's unique index on active leases refuses a second one.
	ErrLeaseHeld = errors.New("task already has an active lease")

	// ErrTaskFinished: the task's status is final (succeeded, failed or
	// cancelled), so no lease is granted for it.
	ErrTaskFinished = errors.New("task is finished")

	// ErrWorkerNotActive: a lease was asked for a worker whose status is not
	// active (draining, stale and gone workers claim nothing).
	ErrWorkerNotActive = errors.New("worker is not active")

	// ErrNewerSchema: the state file was written by a newer wdc. The wrapping
	// error reads "state file <path> was written by a newer wdc (schema version
	// N; this wdc knows up to M); upgrade wdc".
	ErrNewerSchema = errors.New("state file has a newer schema")

	// ErrOutdatedSchema: a read-only open found a file whose schema this wdc
	// would migrate; a read-only store cannot migrate it.
	ErrOutdatedSchema = errors.New("state file has an older schema")

	// ErrNotState: the file is an SQLite database but not a wdc state file, or
	// its migration history is damaged.
	ErrNotState = errors.New("not a wdc state file")

	// ErrReadOnly: a write was attempted on a store opened with OpenReadOnly.
	ErrReadOnly = errors.New("state opened read-only")

	// ErrClosed: a write was submitted after Close.
	ErrClosed = errors.New("state store closed")

	// ErrInvalid: an argument failed validation before reaching the database.
	ErrInvalid = errors.New("invalid argument")

	// ErrConflict: the record named is not in the status the operation
	// needs: a recommendation already proposed or rejected, a proposal
	// already decided. The wrapping error says which status it has.
	ErrConflict = errors.New("conflict")

	// ErrLaunchUsed: a worker tried to register a launch that is not in
	// status launched (it registered already, expired or failed).
	ErrLaunchUsed = errors.New("launch is no longer open for registration")

	// ErrJoinTokenUnusable: a join token is revoked or past its expiry.
	ErrJoinTokenUnusable = errors.New("join token is revoked or expired")

	// ErrDamaged: the file records a schema version this wdc knows but lacks
	// tables, indexes or triggers of it. The error is a *DamagedError naming
	// them.
	ErrDamaged = errors.New("state file is damaged")

	// ErrCorrupt: SQLite found the state file's content damaged
	// (SQLITE_CORRUPT, "database disk image is malformed"). The error is
	// a *CorruptError naming the file and what to do.
	ErrCorrupt = errors.New("state file is corrupt")

	// ErrDiskFull: SQLite could not write the state file because its disk
	// is full (SQLITE_FULL, or ENOSPC from the file system). The error is a
	// *DiskFullError naming the file.
	ErrDiskFull = errors.New("disk full")

	// ErrNoAccess: the state file, or the folder that holds it, cannot be
	// created, read or written (permissions, a read-only file system). The
	// error is an *AccessError saying which path and why.
	ErrNoAccess = errors.New("state file not accessible")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
