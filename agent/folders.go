package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	err := syscall.Flock(fd, syscall.LOCK_EX)
	for errors.Is(err, syscall.EINTR) {
		err = syscall.Flock(fd, syscall.LOCK_EX)
	}
	if err != nil {
		return fn(false)
	}
	defer syscall.Flock(fd, syscall.LOCK_UN)
	return fn(true)
}

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
	if err != nil && !errors.Is(err, io.EOF) || len(got) != len(names) {
		return false
	}
	for _, n := range names {
		if !slices.Contains(got, n) {
			return false
		}
	}
	return true
}

// makeTaskFolder makes a task's folder dir (in logs/ or scratch/, which it
// makes too when missing) from a free one of kind where the pool has one
// (pool.mkdir, fill readying it), and leaves one that is there as it is.
// It reports whether dir came from the pool, filled. The work folder's
// lock must be held.
func makeTaskFolder(pool *inodePool, kind byte, dir string, fill func(free string) error) (filled bool, err error) {
	filled, err = pool.mkdir(kind, dir, fill)
	if errors.Is(err, fs.ErrNotExist) { // logs/ or scratch/ itself
		if err = makeFolder(filepath.Dir(dir)); err == nil {
			filled, err = pool.mkdir(kind, dir, fill)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return false, makeFolder(dir) // a folder, or ENOTDIR
	}
	return filled, err
}

// makeLogFolders makes an attempt's log folder and its task's folder with
// the address file. With the work folder's lock held (no other agent
// recycles the task's folder meanwhile) they come from the pool where it
// can: a task's log folder comes with an address file, filled with task's
// address before it is renamed into place. The errors say which step
// failed.
func makeLogFolders(paths attemptPaths, task string) error {
	return paths.folders.do(func(locked bool) error {
		if !locked {
			if err := makeFolder(paths.logDir); err != nil {
				return fmt.Errorf("creating the log folder: %v", err)
			}
			return writeAddressOf(paths, task)
		}
		content := []byte(task + "\n")
		filled, err := makeTaskFolder(paths.pool, poolTaskLogs, filepath.Dir(paths.address), func(free string) error {
			return overwrite(filepath.Join(free, "address"), content)
		})
		if err != nil {
			return fmt.Errorf("creating the log folder: %v", err)
		}
		if !filled {
			if err := writeAddressOf(paths, task); err != nil {
				return err
			}
		}
		if _, err := paths.pool.mkdir(poolFolder, paths.logDir, nil); errors.Is(err, fs.ErrExist) {
			err = makeFolder(paths.logDir) // an earlier try of the attempt made it
		}
		if err != nil {
			return fmt.Errorf("creating the log folder: %v", err)
		}
		return nil
	})
}

// writeAddressOf writes the task address file of paths (writeAddress).
func writeAddressOf(paths attemptPaths, task string) error {
	if err := writeAddress(paths.pool, paths.address, task); err != nil {
		return fmt.Errorf("writing the task address file: %v", err)
	}
	return nil
}

// makeScratchFolder makes an attempt's scratch folder, new (never
// recycled: its command had it as its working directory, and a process it
// left could still write there), and its task's folder, from the pool
// where it can, with the work folder's lock held. It reports, as
// freshFolder, whether clearing what an earlier try left failed.
func makeScratchFolder(paths attemptPaths) (clearing bool, err error) {
	err = paths.folders.do(func(locked bool) error {
		if locked {
			if _, err := makeTaskFolder(paths.pool, poolFolder, filepath.Dir(paths.scratch), nil); err != nil {
				return err
			}
		}
		clearing, err = freshFolder(paths.scratch)
		return err
	})
	return clearing, err
}

// recycleLogFolders puts an attempt's log folder, which its tidying
// emptied, into the pool, then its task's when it holds only its address
// file, with the work folder's lock held. It reports false, having done
// nothing, when it could not take the lock.
func recycleLogFolders(paths attemptPaths) (done bool) {
	paths.folders.do(func(locked bool) error {
		if done = locked; locked && holdsOnly(paths.logDir) {
			paths.pool.put(poolFolder, paths.logDir)
			if taskDir := filepath.Dir(paths.address); holdsOnly(taskDir, "address") {
				paths.pool.put(poolTaskLogs, taskDir)
			}
		}
		return nil
	})
	return done
}

// recycleScratchTaskFolder puts a task's scratch folder into the pool when
// it holds nothing, with the work folder's lock held. It reports false,
// having done nothing, when it could not take the lock.
func recycleScratchTaskFolder(paths attemptPaths) (done bool) {
	paths.folders.do(func(locked bool) error {
		if done = locked; locked {
			if taskDir := filepath.Dir(paths.scratch); holdsOnly(taskDir) {
				paths.pool.put(poolFolder, taskDir)
			}
		}
		return nil
	})
	return done
}
