package state

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// openRetryBudget bounds how long Open and OpenReadOnly retry a step that
// fails with SQLITE_BUSY ("database is locked"), e.g. when several processes
// create the same new file at once (docs/sqlite.md: the switch to WAL can fail).
const openRetryBudget = 10 * time.Second

// Store is an open state file. Its methods are safe for concurrent use.
// Its writes go through one committer goroutine that commits the writes
// submitted at the same time in one transaction (Write: group commit);
// writers in other processes wait on SQLite's busy timeout (5 s).
type Store struct {
	path     string
	abs      string      // the state file's absolute path
	file     os.FileInfo // the file opened at abs, to tell whether it is still there (StillAtPath)
	db       *sql.DB
	readOnly bool
	// The group commit (Write): writes queue here for commitLoop.
	qmu     sync.Mutex
	qcond   *sync.Cond
	queue   []*writeReq
	closed  bool
	stopped chan struct{} // closed when commitLoop has returned
	// fullAfter, when set, is the injected full disk (FailWritesAfter).
	fullAfter atomic.Pointer[injectedFull]
	turns     *writerTurns // taking turns with other writers (turns.go)
	// guard, when set, is the apply lock ID every content write must still
	// hold (GuardWrites).
	guard atomic.Pointer[string]
}

// GuardWrites makes every later write of this Store that changes the
// state's content (everything but the lock methods) check, inside its own
// transaction, that the apply lock is still held under lockID, and fail
// with ErrLockLost otherwise. An apply whose lock was removed or taken over
// therefore cannot write a single row more: the lock fences the state the
// way a fencing token fences a result. An empty lockID turns the check off.
func (s *Store) GuardWrites(lockID string) {
	if lockID == "" {
		s.guard.Store(nil)
		return
	}
	s.guard.Store(&lockID)
}

// Open opens the state file at path for reading and writing, applies
// pending migrations, and checks that the file has every table, index and
// trigger of its schema version, so a damaged file is refused at once
// rather than failing query by query later.
//
// A missing file is created, with its parent directories. It is made and
// migrated under a temporary name beside it and linked into place only
// when complete, so no process ever sees a new state file empty or half
// made; several processes may create the same file at once (one file wins,
// the others open it). An existing file of 0 bytes is never re-created: it
// is refused. A step that fails with SQLITE_BUSY is retried with backoff
// for up to ~10 s.
//
// Errors: a *regularfile.NotRegularError (wrapped) for a path that names
// a FIFO, a device or a directory, saying which; *EmptyFileError (wrapping
// ErrNotState) for a 0-byte file; *DamagedError (ErrDamaged) when tables, indexes or triggers are missing;
// *NewerSchemaError (ErrNewerSchema) when the file was written by a newer
// wdc; ErrNotState when the file is another database or its migration
// history has a gap; *AccessError (ErrNoAccess) when the file or its folder
// cannot be written, saying which; *DiskFullError (ErrDiskFull) when the
// disk is full; file system and SQLite errors otherwise.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil:
		if err := notRegular(abs, path, fi); err != nil {
			return nil, err
		}
		if fi.Size() == 0 && !hasWAL(abs) {
			return nil, &EmptyFileError{Path: path}
		}
		tightenModes(abs)
	case errors.Is(err, fs.ErrNotExist):
		if err := create(ctx, abs, path); err != nil {
			return nil, err
		}
	default:
		return nil, explainOpen("open", abs, path, fmt.Errorf("state file %s: %w", path, err))
	}
	dsn := DSN(abs, false)
	var s *Store
	err = retryBusy(ctx, func() error {
		db, err := openDB(dsn)
		if err != nil {
			return err
		}
		if err := migrate(ctx, db, path); err != nil {
			db.Close()
			return err
		}
		s = newStore(path, abs, db, false)
		return nil
	})
	if err != nil {
		return nil, openError("open", abs, path, err)
	}
	return s, nil
}

// openError is the error Open or OpenReadOnly (op "open" or "read")
// returns for err: the typed errors that already name the file as they
// are, a disk or permission problem explained, anything else prefixed
// with the file.
func openError(op, abs, p string, err error) error {
	var newer *NewerSchemaError
	var damaged *DamagedError
	var empty *EmptyFileError
	if errors.As(err, &newer) || errors.As(err, &damaged) || errors.As(err, &empty) {
		return err
	}
	if err := corruptError(p, err); errors.Is(err, ErrCorrupt) {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) && op == "read" {
		return err
	}
	err = notDatabase(p, explainOpen(op, abs, p, err))
	if errors.Is(err, ErrNotState) {
		return err
	}
	var full *DiskFullError
	var access *AccessError
	if errors.As(err, &full) || errors.As(err, &access) {
		return err
	}
	if op == "read" {
		return fmt.Errorf("open state file %s read-only: %w", p, err)
	}
	return fmt.Errorf("open state file %s: %w", p, err)
}

// notRegular is the error for a state file abs (shown as p) that is not a
// regular file, saying what it is ("a FIFO (named pipe)", "a character
// device (a symbolic link to /dev/zero)"), or nil when it is one. Such a
// file is refused before SQLite opens it: a FIFO would hold the open, and
// a device is not empty for being 0 bytes long.
func notRegular(abs, p string, fi fs.FileInfo) error {
	var nr *regularfile.NotRegularError
	if !errors.As(regularfile.Check(abs, fi.Mode()), &nr) {
		return nil
	}
	nr.Path = p
	return fmt.Errorf("state file %w: give --state the path of a state file", nr)
}

// hasWAL reports whether the state file abs has a write-ahead log with
// content beside it (abs-wal): then a main file of 0 bytes is not empty.
func hasWAL(abs string) bool {
	fi, err := os.Stat(abs + "-wal")
	return err == nil && fi.Size() > 0
}

// create makes the state file abs (shown as p), migrated to the newest
// schema, under a temporary name in its folder, and links it into place
// only when it is complete and closed (its write-ahead log checkpointed
// into it). If another process created the file meanwhile, theirs is kept
// and this one is dropped.
func create(ctx context.Context, abs, p string) error {
	if hasWAL(abs) {
		return fmt.Errorf("state file %s does not exist, but its write-ahead log %s-wal does (it belongs to a state file that was removed): "+
			"move it away (mv %s-wal %s-wal.orphan, and %s-shm if there is one) and run the command again", p, p, p, p, p)
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, folderMode); err != nil {
		return explainOpen("create", abs, p, fmt.Errorf("state file %s: %w", p, err))
	}
	tmp := filepath.Join(dir, "."+filepath.Base(abs)+".new-"+randomHex(6))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if err != nil {
		return explainOpen("create", abs, p, fmt.Errorf("state file %s: %w", p, err))
	}
	f.Close()
	defer func() {
		// After a link only the temporary name goes; the file stays.
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmp + suffix)
		}
	}()
	db, err := openDB(DSN(tmp, false))
	if err == nil {
		err = migrate(ctx, db, p)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil && hasWAL(tmp) {
		// Closing the last connection checkpoints the log into the file
		// and removes it; a log left behind means the file is not complete.
		err = errors.New("its write-ahead log could not be written back into it")
	}
	if err != nil {
		return explainOpen("create", abs, p, fmt.Errorf("create state file %s: %w", p, err))
	}
	if err := os.Link(tmp, abs); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another process created it first: use theirs
		}
		// A file system without hard links: rename, unless the file
		// appeared meanwhile.
		if _, serr := os.Stat(abs); serr == nil {
			return nil
		}
		if err := os.Rename(tmp, abs); err != nil {
			return explainOpen("create", abs, p, fmt.Errorf("state file %s: %w", p, err))
		}
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new name durable; the content already is
		d.Close()
	}
	return nil
}

// OpenReadOnly opens an existing state file read-only (SQLite mode=ro), as
// `wdc plan` does: it never creates, migrates or writes the database file
// (SQLite may create the -wal/-shm side files it needs to read a WAL file).
// It checks the schema as Open does. Write methods of the returned Store
// fail with ErrReadOnly.
//
// Errors: a missing file returns an error wrapping fs.ErrNotExist (callers
// use EmptySnapshot then); a *regularfile.NotRegularError (wrapped),
// *EmptyFileError, *DamagedError, *NewerSchemaError
// and *AccessError as for Open; ErrOutdatedSchema when the file needs a
// migration this read-only open cannot apply; ErrNotState when the file is
// not a wdc state file.
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if err != nil {
		return nil, openError("read", abs, path, fmt.Errorf("state file %s: %w", path, err))
	}
	if err := notRegular(abs, path, fi); err != nil {
		return nil, err
	}
	if fi.Size() == 0 && !hasWAL(abs) {
		return nil, &EmptyFileError{Path: path}
	}
	dsn := DSN(abs, true)
	var s *Store
	err = retryBusy(ctx, func() error {
		db, err := openDB(dsn)
		if err != nil {
			return err
		}
		if err := checkSchemaReadOnly(ctx, db, path); err != nil {
			db.Close()
			return err
		}
		s = newStore(path, abs, db, true)
		return nil
	})
	if err != nil {
		return nil, openError("read", abs, path, err)
	}
	return s, nil
}

// newStore makes the Store of the open database db of the state file abs
// (given as path); a writable one starts its committer.
func newStore(path, abs string, db *sql.DB, readOnly bool) *Store {
	s := &Store{path: path, abs: abs, db: db, readOnly: readOnly, stopped: make(chan struct{})}
	s.file, _ = os.Stat(abs)
	s.qcond = sync.NewCond(&s.qmu)
	if readOnly {
		close(s.stopped)
	} else {
		s.turns = openTurns(abs)
		go s.commitLoop()
	}
	return s
}

// Path returns the path the store was opened with.
func (s *Store) Path() string { return s.path }

// StillAtPath reports whether the state file the store opened is still the
// file at its path: false once it was removed or replaced (its writes then
// go to a file nobody will read).
func (s *Store) StillAtPath() bool {
	if s.file == nil {
		return true // not known at open: nothing to compare
	}
	fi, err := os.Stat(s.abs)
	return err == nil && os.SameFile(fi, s.file)
}

// Close commits the writes already submitted, then closes the database.
// Writes submitted afterwards fail with ErrClosed; the Store must not be
// used otherwise.
func (s *Store) Close() error {
	s.qmu.Lock()
	s.closed = true
	s.qcond.Broadcast()
	s.qmu.Unlock()
	<-s.stopped
	s.turns.close()
	return s.db.Close()
}

// DSN returns the connection string a Store opens the state file at the
// absolute path abs with, for the driver named "sqlite"
// (github.com/glebarez/go-sqlite, which this package's GORM dialector
// registers): read-write (pages of 2 KiB for a file it creates, WAL,
// synchronous=FULL, foreign keys on, every write transaction BEGIN
// IMMEDIATE), or with readOnly mode=ro and
// query_only. The path is given as an SQLite URI (file:...) so that mode=ro
// reaches SQLite and odd characters in the path are escaped. The driver
// runs busy_timeout(5000) first, then the pragmas in order. _time_format is
// deliberately absent: it silently disables _txlock (docs/sqlite.md).
// page_size comes first, before journal_mode writes the file's first
// page: it applies only to a file that has none yet, and a file made with
// another page size keeps it (docs/sqlite.md, "Page size").
// Tests and benchmarks use it to open a connection of their own beside a
// Store (package statetest).
func DSN(abs string, readOnly bool) string {
	u := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()
	if readOnly {
		return u + "?mode=ro&_pragma=foreign_keys(1)&_pragma=query_only(1)"
	}
	return u + "?_pragma=page_size(2048)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate"
}

// openDB opens the database through GORM's SQLite dialector and returns the
// underlying *sql.DB; all queries of this package are hand-written SQL on it.
func openDB(dsn string) (*sql.DB, error) {
	g, err := gorm.Open(sqlite.Open(dsn), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		return nil, err
	}
	db, err := g.DB()
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	return db, nil
}

// retryBusy runs step until it succeeds, fails with an error that is not
// SQLITE_BUSY/SQLITE_LOCKED, or openRetryBudget has passed.
func retryBusy(ctx context.Context, step func() error) error {
	deadline := time.Now().Add(openRetryBudget)
	backoff := 5 * time.Millisecond
	for {
		err := step()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		d := backoff/2 + mrand.N(backoff)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(d):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// sqliteCode returns the (extended) SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var ce interface{ Code() int }
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

const (
	sqliteBusy             = 5
	sqliteLocked           = 6
	sqliteConstraint       = 19
	sqliteConstraintUnique = 19 | 8<<8
)

func isBusy(err error) bool {
	if err == nil {
		return false
	}
	switch sqliteCode(err) & 0xff {
	case sqliteBusy, sqliteLocked:
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY")
}

// isUniqueViolation reports whether err is SQLite refusing a row because of
// the UNIQUE index or constraint on target ("table.column").
func isUniqueViolation(err error, target string) bool {
	if err == nil {
		return false
	}
	if c := sqliteCode(err); c != sqliteConstraintUnique && c != 0 {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") && strings.Contains(msg, target)
}

// write runs fn in one BEGIN IMMEDIATE transaction and bumps the serial in
// the same transaction. Every write method goes through it. fn's error (or a
// failed commit) rolls everything back, including the serial bump.
func (s *Store) write(ctx context.Context, fn func(tx *Tx) error) error {
	return s.writeTx(ctx, true, fn)
}

// writeLock is write for the apply lock's own row and events: neither the
// guard nor the serial applies, because the lock is coordination beside the
// state's content (as Terraform's lock is), and taking or releasing it must
// not make a saved plan stale.
func (s *Store) writeLock(ctx context.Context, fn func(tx *Tx) error) error {
	return s.writeTx(ctx, false, fn)
}

// writeOutsideApply is write for the commands that may run with or without
// an apply (join tokens, later gc): on a store that GuardWrites it checks
// the guard's lock as every write does; on any other store it refuses with
// a *LockedError when an apply holds the lock, so such a command never
// writes beside a running coordinator. Taking the write transaction is what
// holds the lock for it: no apply can take the lock until it commits.
func (s *Store) writeOutsideApply(ctx context.Context, fn func(tx *Tx) error) error {
	if s.guard.Load() != nil {
		return s.write(ctx, fn)
	}
	return s.write(ctx, func(tx *Tx) error {
		cur, err := queryLock(ctx, tx)
		if err != nil {
			return err
		}
		if cur != nil {
			return &LockedError{Path: s.path, Lock: *cur}
		}
		return fn(tx)
	})
}

// writeTx runs fn in the group commit (see write and writeLock). An
// error that says the disk is full becomes a *DiskFullError naming the
// file, whichever step failed.
func (s *Store) writeTx(ctx context.Context, content bool, fn func(tx *Tx) error) error {
	return s.submit(ctx, content, fn, nil)
}

// Write runs fn as one write of the state, in the group commit: fn runs
// inside a BEGIN IMMEDIATE transaction that it may share with other
// writes submitted at the same time, and the commit (one fsync,
// synchronous=FULL) covers the whole group. An error of fn undoes fn's
// changes only: a write that fails before it changed a row is simply
// left out; one that fails after (or with an error of SQLite itself)
// makes the group roll back and run again without it. Write returns after the
// commit, never before its changes are on disk. Writes are run in the
// order they were submitted; fn sees the changes of the writes before it.
//
// after, when not nil, is called with fn's outcome (nil, fn's error, or
// the error of the commit that should have carried it) by the committer,
// before Write returns, in the order the writes were run: so a caller that
// keeps a copy of the state in memory updates it in the state's order of
// writes. after must be quick and must not write to this Store (that
// would wait for itself).
//
// fn must touch nothing but tx: it may run a second time, in a new
// transaction, when the transaction it ran in was rolled back for
// another write of its group (see above; SQLite also rolls a
// transaction back itself on disk full and I/O errors); its changes are
// then made once, by that second run. A write whose ctx ends before its turn is not run (its error is
// ctx's); once running, it runs to completion.
//
// Writes are checked against GuardWrites' lock and bump the serial, like
// every write method of the Store. Errors: fn's, ErrLockLost, ErrReadOnly,
// ErrClosed after Close, *DiskFullError and *CorruptError, SQLite errors.
func (s *Store) Write(ctx context.Context, fn func(tx *Tx) error, after func(error)) error {
	return s.submit(ctx, true, fn, after)
}

// maxGroup bounds how many writes one commit carries.
const maxGroup = 256

// writeReq is one write waiting for the committer.
type writeReq struct {
	ctx     context.Context
	content bool
	fn      func(tx *Tx) error
	after   func(error)
	err     error
	reran   bool // it ran once in a transaction that a Part of it ended
	// settled: it failed in a group that was rolled back; it is not run
	// again, only answered, in its place among the writes run again.
	settled bool
	done    chan struct{}
}

// submit queues a write for the committer and waits for its outcome.
func (s *Store) submit(ctx context.Context, content bool, fn func(tx *Tx) error, after func(error)) error {
	if s.readOnly {
		return fmt.Errorf("state file %s: %w", s.path, ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if f := s.fullAfter.Load(); content && f != nil && f.left.Add(-1) < 0 {
		f.once.Do(f.onFull)
		err := &DiskFullError{Path: s.path, Err: fmt.Errorf("%w (injected)", syscall.ENOSPC)}
		if after != nil {
			after(err)
		}
		return err
	}
	r := &writeReq{ctx: ctx, content: content, fn: fn, after: after, done: make(chan struct{})}
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return fmt.Errorf("state file %s: %w", s.path, ErrClosed)
	}
	s.queue = append(s.queue, r)
	s.qcond.Signal()
	s.qmu.Unlock()
	<-r.done
	return fullError(s.path, corruptError(s.path, r.err))
}

// commitLoop is the committer: the single writer of the Store. It takes
// every write queued (up to maxGroup) and commits them together; writes
// that arrive meanwhile wait for the next group, so the group grows with
// the load and a lone write waits for nothing (group commit without a
// delay, as in PostgreSQL with commit_delay = 0).
func (s *Store) commitLoop() {
	defer close(s.stopped)
	for {
		s.qmu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.qcond.Wait()
		}
		if len(s.queue) == 0 {
			s.qmu.Unlock()
			return
		}
		n := min(len(s.queue), maxGroup)
		batch := make([]*writeReq, n)
		copy(batch, s.queue)
		s.queue = append(s.queue[:0], s.queue[n:]...)
		s.qmu.Unlock()
		s.runBatch(batch)
		s.qmu.Lock()
		more := len(s.queue) > 0
		s.qmu.Unlock()
		if more {
			s.turns.stepAside() // let a writer of another process begin first
		}
	}
}

// runBatch commits batch in order: runs of content writes share a
// transaction; a lock write (content false) is its own.
func (s *Store) runBatch(batch []*writeReq) {
	for len(batch) > 0 {
		if !batch[0].content {
			again := s.commitGroup(batch[:1])
			batch = append(again, batch[1:]...)
			continue
		}
		n := 1
		for n < len(batch) && batch[n].content {
			n++
		}
		again := s.commitGroup(batch[:n])
		batch = append(again, batch[n:]...)
	}
}

// finish hands each write of group its outcome, in order.
func finish(group []*writeReq) {
	for _, r := range group {
		if r.after != nil {
			r.after(r.err)
		}
		close(r.done)
	}
}

// commitGroup runs group in one transaction and commits it. It returns
// the writes to run again: those of a transaction that ended by the error
// of one of its writes (which alone keeps its error).
func (s *Store) commitGroup(group []*writeReq) (again []*writeReq) {
	content := group[0].content
	begun := s.turns.waiting()
	traceBegin := time.Now()
	tx, err := s.db.BeginTx(context.Background(), nil) // BEGIN IMMEDIATE (_txlock=immediate)
	begun()
	if fn := statementTrace.Load(); fn != nil {
		(*fn)("BEGIN IMMEDIATE", time.Since(traceBegin))
	}
	if err != nil {
		for _, r := range group {
			r.err = fmt.Errorf("begin write: %w", err)
		}
		finish(group)
		return nil
	}
	t := &Tx{tx: tx, ctx: context.Background(), s: s, groupEvents: true}
	var ran []*writeReq // run without error, so far
	for i, r := range group {
		if r.settled {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		t.ctx = context.WithoutCancel(r.ctx)
		before := t.writes
		r.err = r.fn(t)
		if t.broken != nil {
			// A Part failed after changing rows: this write runs again,
			// in a new transaction, once; a second time it fails.
			broken := t.broken
			t.broken = nil
			if r.reran {
				r.err = broken
				return s.abandon(tx, group, i, ran, true)
			}
			r.reran, r.err = true, nil
			return s.abandon(tx, group, i, append(ran, r), false)
		}
		if r.err == nil {
			ran = append(ran, r)
			continue
		}
		if t.writes != before || sqliteCode(r.err) != 0 {
			// It failed after changing rows, which only a rollback
			// undoes (no savepoint is set: it would cost two statements
			// per write), or SQLite itself failed, which may have ended
			// the transaction: start again without it.
			return s.abandon(tx, group, i, ran, true)
		}
		// It failed before changing anything: nothing to undo.
	}
	t.ctx = context.Background()
	if len(ran) == 0 {
		_ = tx.Rollback()
		finish(group)
		return nil
	}
	var err2 error
	if len(t.events) > 0 {
		err2 = t.flushEvents()
	}
	if err2 == nil && content && t.writes > 0 {
		// A group that changed nothing (replays of a result) leaves the
		// serial alone, as a write that changes nothing should, and
		// needs no lock: it commits nothing.
		err2 = s.bumpSerial(t)
	}
	if err2 == nil {
		t.trace("COMMIT")
		err2 = tx.Commit()
		t.trace("")
		if err2 != nil {
			err2 = fmt.Errorf("commit: %w", err2)
		}
	} else {
		_ = tx.Rollback()
	}
	if err2 != nil {
		for _, r := range ran {
			r.err = err2
		}
	}
	finish(group)
	return nil
}

// abandon rolls back a transaction that the write group[i] cannot stay
// in (it failed after changing rows, or SQLite failed). With
// failed, group[i] keeps its error and ends; otherwise it runs again. The
// writes before it that were not refused (ran) run again, in a new
// transaction, with those after it.
func (s *Store) abandon(tx *sql.Tx, group []*writeReq, i int, ran []*writeReq, failed bool) []*writeReq {
	_ = tx.Rollback()
	isRan := map[*writeReq]bool{}
	for _, r := range ran {
		isRan[r] = true
	}
	again := make([]*writeReq, 0, len(group))
	for _, r := range group[:i+1] {
		if isRan[r] && (r != group[i] || !failed) {
			r.err = nil
		} else {
			// Answered with the next group, in its place, so after
			// functions keep the order the writes were submitted in.
			r.settled = true
		}
		again = append(again, r)
	}
	return append(again, group[i+1:]...)
}

// bumpSerial increments the state's serial: once per committed group of
// content writes, as its last statement. Under GuardWrites it does so
// only while the apply lock is held under the guard's lock id, in the
// same statement, and fails with ErrLockLost otherwise: the group's
// writes are then rolled back, never committed (the transaction has held
// the write lock since its BEGIN IMMEDIATE, so the lock cannot change
// between this check and the COMMIT).
func (s *Store) bumpSerial(t *Tx) error {
	guard := s.guard.Load()
	var res sql.Result
	var err error
	if guard == nil {
		res, err = t.ExecContext(t.ctx, `UPDATE state_info SET serial = serial + 1 WHERE id = 1`)
	} else {
		res, err = t.ExecContext(t.ctx, `UPDATE state_info SET serial = serial + 1
			WHERE id = 1 AND EXISTS (SELECT 1 FROM apply_lock WHERE id = 1 AND lock_id = ?)`, *guard)
	}
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("bump serial: %w", err)
	}
	if n == 1 {
		return nil
	}
	if guard != nil {
		// Refused by the guard, unless the row itself is missing.
		var rows int
		if err := t.QueryRowContext(t.ctx, `SELECT count(*) FROM state_info WHERE id = 1`).Scan(&rows); err != nil {
			return fmt.Errorf("bump serial: %w", err)
		}
		if rows == 1 {
			return fmt.Errorf("state file %s: write refused: %w (this apply no longer holds lock %s)", s.path, ErrLockLost, *guard)
		}
	}
	return fmt.Errorf("bump serial: %w: state_info row missing", ErrNotState)
}

// read runs fn in one read transaction (a consistent WAL snapshot).
func (s *Store) read(ctx context.Context, fn func(tx *Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // deferred BEGIN
	if err != nil {
		return corruptError(s.path, fmt.Errorf("begin read: %w", err))
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to lose
	return corruptError(s.path, fn(&Tx{tx: tx, ctx: ctx, s: s}))
}

// QuickCheck runs SQLite's PRAGMA quick_check on the state file (every
// page and row, and every CHECK constraint, without cross-checking indexes
// against their tables: a fraction of integrity_check's time) and returns
// a *CorruptError when it finds damage, so that a command can refuse a
// damaged state before it writes anything, or plans from it. A read-only
// Store checks an in-memory copy of the file (checkConstraints: SQLite
// verifies no CHECK constraint on a read-only connection), so it finds
// what a writable one finds, in the same words; a file too large for the
// copy (1 GiB) is checked as it is, CHECK constraints aside.
func (s *Store) QuickCheck(ctx context.Context) error {
	var lines []string
	var err error
	if s.readOnly {
		lines, err = checkConstraints(ctx, s.abs, 5)
		err = corruptError(s.path, err)
	}
	if !s.readOnly || errors.Is(err, errTooLargeToCopy) {
		err = s.read(ctx, func(tx *Tx) error {
			rows, err := tx.QueryContext(ctx, `PRAGMA quick_check(5)`)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					return err
				}
				lines = append(lines, line)
			}
			return rows.Err()
		})
	}
	if err != nil {
		return err
	}
	if len(lines) == 0 || len(lines) == 1 && lines[0] == "ok" {
		return nil
	}
	return &CorruptError{Path: s.path, Detail: "quick_check: " + strings.Join(lines, "; ")}
}

// ms converts t to integer milliseconds since the Unix epoch; the zero time
// is stored as NULL by nullMS.
func ms(t time.Time) int64 { return t.UnixMilli() }

// nullMS is ms(t), or NULL for the zero time.
func nullMS(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromMS converts stored milliseconds to a UTC time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// fromNullMS is fromMS, or the zero time for NULL.
func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMS(v.Int64)
}

// durMS converts a duration to whole milliseconds (rounding up, so a
// positive duration never becomes 0).
func durMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// randomHex returns n random bytes as 2n hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// injectedFull is a full disk FailWritesAfter injects.
type injectedFull struct {
	left   atomic.Int64
	once   sync.Once
	onFull func()
}

// FailWritesAfter makes the store's disk full after n more writes (`wdc
// test`'s disk_full fault): every write through Write after them fails
// with a *DiskFullError (wrapping ErrDiskFull and ENOSPC) before it
// changes anything, as a write SQLite could not make does; onFull (nil:
// none) is called once, at the first write refused. The lock's writes
// (AcquireLock, RenewLock, ReleaseLock) are not counted and still pass.
func (s *Store) FailWritesAfter(n int, onFull func()) {
	f := &injectedFull{onFull: func() {}}
	if onFull != nil {
		f.onFull = onFull
	}
	f.left.Store(int64(n))
	s.fullAfter.Store(f)
}
