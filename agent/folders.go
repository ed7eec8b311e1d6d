package agent

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A folderLock is an exclusive flock(2) on a work folder, which the agents
// of that folder take while they make a folder inside a task's log or
// scratch folder and while they take a task's folder out of the work
// folder into their inodePool. A task's folder is shared: another attempt
// of the task, on another worker of the same work folder, may be making
// its own folder in it while this one tidies. rmdir(2) alone is atomic
// (it removes only an empty folder); a folder recycled by rename(2) is
// moved with whatever it holds, so "it holds nothing of anyone's" must
// stay true from the check to the rename, and the lock is what keeps it
// true. Only agents take it; a confined command cannot reach the work
// folder at all (package confine).
type folderLock struct {
	f *os.File
}

// openFolderLock opens the lock of workDir, or returns nil when the folder
// cannot be opened (the agent then makes and removes task folders as
// without a pool).
func openFolderLock(workDir string) *folderLock {
	f, err := os.Open(workDir)
	if err != nil {
		return nil
	}
	return &folderLock{f: f}
}

// close releases the lock's descriptor.
func (l *folderLock) close() {
	if l != nil {
		l.f.Close()
	}
}

// do runs fn holding the lock, with locked true, or without it (no lock,
// or flock refused, as on a file system without locks), with locked
// false: fn must then not recycle a task's folder.
func (l *folderLock) do(fn func(locked bool) error) error {
	if l == nil {
		return fn(false)
	}
	fd := int(l.f.Fd())
	var err error
	for err = syscall.Flock(fd, syscall.LOCK_EX); errors.Is(err, syscall.EINTR); {
		err = syscall.Flock(fd, syscall.LOCK_EX)
	}
	if err != nil {
		return fn(false)
	}
	defer syscall.Flock(fd, syscall.LOCK_UN)
	return fn(true)
}

// recycling reports whether an attempt's folders are recycled: with a
// pool, and a lock to take before touching a task's folder.
func (p attemptPaths) recycling() bool { return p.pool != nil && p.folders != nil }

// holdsOnly reports whether the folder dir holds the entries names and
// nothing else (an empty folder for none). It reads at most one entry
// more than names has.
func holdsOnly(dir string, names ...string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	got, err := f.Readdirnames(len(names) + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	if len(got) != len(names) {
		return false
	}
	for _, n := range names {
		found := false
		for _, g := range got {
			found = found || g == n
		}
		if !found {
			return false
		}
	}
	return true
}

// makeLogFolders makes an attempt's log folder and its task's folder with
// the address file, from the pool where it can (a task's log folder comes
// with an address file, filled with task's address before it is renamed
// into place), with the work folder's lock held: no other agent recycles
// the task's folder meanwhile.
func makeLogFolders(paths attemptPaths, task string) error {
	return paths.folders.do(func(locked bool) error {
		if !locked {
			if err := makeFolder(paths.logDir); err != nil {
				return err
			}
			return writeAddress(paths.pool, paths.address, task)
		}
		taskDir := filepath.Dir(paths.address)
		content := []byte(task + "\n")
		fill := func(free string) error { return overwrite(filepath.Join(free, "address"), content) }
		filled, err := paths.pool.mkdir(poolTaskLogs, taskDir, fill)
		if errors.Is(err, fs.ErrNotExist) { // the logs folder itself
			if err = makeFolder(filepath.Dir(taskDir)); err == nil {
				filled, err = paths.pool.mkdir(poolTaskLogs, taskDir, fill)
			}
		}
		if errors.Is(err, fs.ErrExist) {
			err = makeFolder(taskDir) // a folder, or ENOTDIR
		}
		if err != nil {
			return err
		}
		if !filled {
			if err := writeAddress(paths.pool, paths.address, task); err != nil {
				return err
			}
		}
		if _, err := paths.pool.mkdir(poolFolder, paths.logDir, nil); errors.Is(err, fs.ErrExist) {
			return makeFolder(paths.logDir) // an earlier try of the attempt made it
		} else {
			return err
		}
	})
}

// makeScratchFolder makes an attempt's scratch folder, new (never
// recycled: its command had it as its working directory, and a process it
// left could still write there), and its task's folder, from the pool
// where it can, with the work folder's lock held. It reports, as
// freshFolder, whether clearing what an earlier try left failed.
func makeScratchFolder(paths attemptPaths) (clearing bool, err error) {
	if !paths.recycling() {
		return freshFolder(paths.scratch)
	}
	err = paths.folders.do(func(locked bool) error {
		if !locked {
			clearing, err = freshFolder(paths.scratch)
			return err
		}
		taskDir := filepath.Dir(paths.scratch)
		_, err := paths.pool.mkdir(poolFolder, taskDir, nil)
		if errors.Is(err, fs.ErrNotExist) { // the scratch folder itself
			if err = makeFolder(filepath.Dir(taskDir)); err == nil {
				_, err = paths.pool.mkdir(poolFolder, taskDir, nil)
			}
		}
		if errors.Is(err, fs.ErrExist) {
			err = makeFolder(taskDir)
		}
		if err != nil {
			return err
		}
		clearing, err = freshFolder(paths.scratch)
		return err
	})
	return clearing, err
}
