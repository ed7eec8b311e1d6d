package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// An inodePool keeps the files and folders the agent made for one attempt
// and is done with, and hands them out again for the next attempt by
// renaming them, instead of removing them and making new ones. A rename
// allocates and frees nothing; making and removing inodes is what an
// attempt's bookkeeping costs on some file systems (ext4 without a
// journal scans past every inode freed in the last minute each time it
// allocates one, so the cost of a creation grows with the rate of
// removals: docs/PERFORMANCE.md, "Inodes per attempt").
//
// It holds only what the agent alone wrote: spool entry folders (their
// result.json, never a blob: blobs are links to the command's logs and
// are removed first), files whose content the agent writes (a task's log
// address file, a process group's record), and folders no command can
// reach (an attempt's log folder, a task's log folder with its address
// file, a task's scratch folder, the parent of its attempts' folders:
// folders.go, which takes the work folder's lock for the shared ones).
// Never a log, an attempt's scratch folder or anything else a command had
// a descriptor of or could write into: a process the command left could
// still read or write it, and would then see the next attempt's. Its
// folder is <spool>/<worker id>/.free, hidden from confined commands with
// the rest of the spool. Kinds are kept apart: a spool entry is never
// handed out as a file of the work folder.
//
// Every method is safe for concurrent use; a nil pool makes and removes,
// as without one. A rename that fails (another file system: EXDEV; a
// full pool) falls back to making or removing.
type inodePool struct {
	dir string

	mu    sync.Mutex
	free  map[byte][]string // kind → names in dir
	seq   int
	limit int // per kind
}

// Kinds of what the pool holds.
const (
	poolEntry byte = 'e' // a spool entry folder
	poolFile  byte = 'f' // a regular file the agent writes
	// poolFolder is an empty folder of the work folder that commands do
	// not write in: an attempt's log folder (its command writes its logs
	// through descriptors, and the logs themselves are never recycled) or
	// a task's scratch folder (a command works in its attempt's folder
	// inside it, which is never recycled).
	poolFolder byte = 'd'
	// poolTaskLogs is a task's log folder holding its address file and
	// nothing else.
	poolTaskLogs byte = 'l'
)

// newInodePool makes the pool's folder dir (emptied: what a pool of an
// earlier agent left is not known to be what this one put there).
func newInodePool(dir string) (*inodePool, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	return &inodePool{dir: dir, free: map[byte][]string{}, limit: 64}, nil
}

// take hands out a free one of kind, at its path in the pool's folder,
// or "" when there is none.
func (p *inodePool) take(kind byte) string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	names := p.free[kind]
	if len(names) == 0 {
		return ""
	}
	name := names[len(names)-1]
	p.free[kind] = names[:len(names)-1]
	return filepath.Join(p.dir, name)
}

// put takes path back as a free one of kind (renamed into the pool's
// folder), or removes it, with what it holds, when the pool has enough of
// kind or the rename fails. path must be what kind says, and not in use.
func (p *inodePool) put(kind byte, path string) {
	if p == nil {
		os.RemoveAll(path)
		return
	}
	p.mu.Lock()
	if len(p.free[kind]) >= p.limit || (!exclusiveRenames && (kind == poolFolder || kind == poolTaskLogs)) {
		// Full, or a folder the pool could never hand out (mkdir).
		p.mu.Unlock()
		os.RemoveAll(path)
		return
	}
	p.seq++
	name := string(kind) + strconv.Itoa(p.seq)
	p.mu.Unlock()
	// A name the pool never gave: rename(2) as it is, without the lstat
	// of the destination os.Rename makes (to refuse replacing a folder).
	if err := syscall.Rename(path, filepath.Join(p.dir, name)); err != nil {
		os.RemoveAll(path)
		return
	}
	p.mu.Lock()
	p.free[kind] = append(p.free[kind], name)
	p.mu.Unlock()
}

// back returns a free one taken from the pool and not used (at its path in
// the pool's folder).
func (p *inodePool) back(kind byte, path string) {
	p.mu.Lock()
	p.free[kind] = append(p.free[kind], filepath.Base(path))
	p.mu.Unlock()
}

// writeFile puts a regular file (mode 0600) holding data at dst, a
// recycled one when the pool has one: written in the pool's folder, then
// renamed into place, so dst never holds less than data. With exclusive
// it fails with fs.ErrExist when dst exists, and changes nothing then.
func (p *inodePool) writeFile(dst string, data []byte, exclusive bool) error {
	if src := p.take(poolFile); src != "" {
		err := overwrite(src, data)
		if err == nil {
			err = renameInto(src, dst, exclusive)
		}
		if err == nil {
			return nil
		}
		p.back(poolFile, src)
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// Another file system, no renameat2: make it as without a pool.
	}
	flags := os.O_CREATE | os.O_TRUNC
	if exclusive {
		flags = os.O_CREATE | os.O_EXCL
	}
	return writeOpened(dst, flags, data)
}

// mkdir makes the folder dir (mode 0700) from a free one of kind when the
// pool has one, renamed into place only where nothing is; fill, when set,
// readies it first (a task's log folder gets its address). Without one,
// or when the rename fails (something is at dir, or a folder above it is
// missing, or another file system), it is mkdir(2) and its answer. It
// reports whether dir came from the pool, filled.
func (p *inodePool) mkdir(kind byte, dir string, fill func(free string) error) (fromPool bool, err error) {
	if src := p.take(kind); src != "" {
		if fill != nil {
			err = fill(src)
		}
		if err == nil {
			err = renameInto(src, dir, true)
		}
		if err == nil {
			return true, nil
		}
		if _, serr := os.Lstat(src); serr == nil {
			p.back(kind, src)
		}
	}
	return false, os.Mkdir(dir, 0o700)
}

// overwrite makes the file at path hold data, in the same inode.
func overwrite(path string, data []byte) error {
	if len(data) == 0 {
		return os.Truncate(path, 0)
	}
	return writeOpened(path, os.O_TRUNC, data)
}

// writeOpened opens path for writing with flags (mode 0600 when it makes
// the file; openFile) and writes data.
func writeOpened(path string, flags int, data []byte) error {
	f, err := openFile(path, os.O_WRONLY|flags, 0o600)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// emptyFile puts an empty regular file at path, recycled when the pool
// has one (procgroup.RecordWith's create).
func (p *inodePool) emptyFile(path string) error { return p.writeFile(path, nil, false) }

// putFile takes back a file the agent wrote at path, or removes it
// (procgroup.RecordWith's remove).
func (p *inodePool) putFile(path string) { p.put(poolFile, path) }
