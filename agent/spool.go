package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// The spool (docs/protocol.md, "The spool") is the agent's durable result
// buffer. Before it posts an attempt's result, the agent writes the result
// and its artifacts into a folder of its own in the spool; it deletes the
// entry only once the coordinator decided. It also keeps its worker id and
// session token there (mode 0600). An agent that starts finds the folders
// of agents that are gone (their lock is free) and posts their pending
// results with their sessions, with the same idempotency keys, so a result
// is delivered once across a crash; when such a session no longer works
// (the apply ended, the worker was marked gone) the result goes to
// quarantine/ instead, as does a result the coordinator rejected. Nothing
// is synced to disk: the page cache outlives a crashed process, and a
// machine crash only loses results whose tasks are then retried.
//
// Layout: <spool>/<worker id>/{session.json, lock, <token>/{result.json,
// blobs/<sha256>}, .free/} and <spool>/quarantine/<worker id>-<token>/;
// .free is the worker's inodePool (recycle.go).

// spoolSession is what a worker's spool folder keeps about the worker.
type spoolSession struct {
	ServerURL    string `json:"server_url"`
	WorkerID     string `json:"worker_id"`
	SessionToken string `json:"session_token"`
}

// spoolEntry is one result waiting for a decision.
type spoolEntry struct {
	Token  int64                  `json:"token"`
	Result protocol.ResultRequest `json:"result"`
}

// spool is one agent's folder of a spool.
type spool struct {
	root string // the spool folder
	dir  string // this worker's folder in it
	lock *os.File
	// pool keeps decided entries' folders, and the work folder's files
	// the agent writes, for the next attempts (recycle.go); nil when its
	// folder could not be made.
	pool *inodePool
}

// openSpool creates the worker's folder in root, takes its lock (held for
// the agent's lifetime: other agents then know it is alive) and writes the
// session file.
func openSpool(root string, s spoolSession) (*spool, error) {
	dir := filepath.Join(root, s.WorkerID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	lock, err := lockFolder(dir, false)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	b, _ := json.Marshal(s) // strings only
	if err := renameio.WriteFile(filepath.Join(dir, "session.json"), b, 0o600, renameio.WithStaticPermissions(0o600)); err != nil {
		lock.Close()
		return nil, fmt.Errorf("spool: %w", err)
	}
	pool, err := newInodePool(filepath.Join(dir, ".free"))
	if err != nil {
		pool = nil // every entry and file is made and removed
	}
	return &spool{root: root, dir: dir, lock: lock, pool: pool}, nil
}

// close releases the worker's folder, removing it when nothing is pending.
func (sp *spool) close() {
	entries, _ := os.ReadDir(sp.dir)
	if len(pendingEntries(entries)) == 0 {
		os.RemoveAll(sp.dir) // with its pool
	} else if sp.pool != nil {
		os.RemoveAll(sp.pool.dir)
	}
	sp.lock.Close()
}

// lockFolder takes the exclusive lock of a spool folder (flock on its
// "lock" file); with try it fails at once when another process holds it.
func lockFolder(dir string, try bool) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if try {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// put writes a result and its artifacts into an entry, atomically (a
// temporary folder renamed into place); files maps each artifact's hash to
// the file it was hashed from. It returns the entry's folder and the
// artifacts' copies in it, by hash.
func (sp *spool) put(token int64, req protocol.ResultRequest, files map[string]string) (string, map[string]string, error) {
	entry := filepath.Join(sp.dir, strconv.FormatInt(token, 10))
	// A decided entry's folder, from the pool (its result.json is
	// written over in place), else a new one.
	tmp := sp.pool.take(poolEntry)
	if tmp == "" {
		var err error
		if tmp, err = os.MkdirTemp(sp.dir, ".tmp-"); err != nil {
			return "", nil, err
		}
	}
	renamed := false
	defer func() {
		if !renamed {
			os.RemoveAll(tmp)
		}
	}()
	if len(files) > 0 {
		if err := os.Mkdir(filepath.Join(tmp, "blobs"), 0o700); err != nil {
			return "", nil, err
		}
	}
	for h, src := range files {
		if err := linkOrCopy(src, filepath.Join(tmp, "blobs", h)); err != nil {
			return "", nil, fmt.Errorf("spooling %s: %w", src, err)
		}
	}
	b, err := json.Marshal(spoolEntry{Token: token, Result: req})
	if err != nil {
		return "", nil, err
	}
	if err := writeOpened(filepath.Join(tmp, "result.json"), os.O_CREATE|os.O_TRUNC, b); err != nil {
		return "", nil, err
	}
	// Into place, where there is normally nothing: rename(2) fails when
	// an earlier try of the same attempt left an entry there (a folder
	// that is not empty, or anything else than a folder), which is
	// removed first then.
	if syscall.Rename(tmp, entry) != nil {
		os.RemoveAll(entry)
		if err := os.Rename(tmp, entry); err != nil {
			return "", nil, err
		}
	}
	renamed = true
	return entry, blobsOf(entry, files), nil
}

func blobsOf(entry string, files map[string]string) map[string]string {
	out := make(map[string]string, len(files))
	for h := range files {
		out[h] = filepath.Join(entry, "blobs", h)
	}
	return out
}

// linkOrCopy hard-links src to dst, or copies it when it cannot.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, _, err := regularfile.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := openFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// done removes a decided entry.
func done(entry string) { os.RemoveAll(entry) }

// recycle puts a decided entry of this worker's folder in the pool: its
// blobs (links to the attempt's logs) removed when it has them (put made
// its blobs folder: the result had files), its result.json kept to be
// written over by the next put.
func (sp *spool) recycle(entry string, blobs bool) {
	if blobs {
		if err := os.RemoveAll(filepath.Join(entry, "blobs")); err != nil {
			os.RemoveAll(entry)
			return
		}
	}
	sp.pool.put(poolEntry, entry)
}

// quarantine moves an entry to <root>/quarantine/<worker>-<token>, with a
// note of why, never over another entry; it returns where it went.
func quarantine(root, entry, why string) (string, error) {
	q := filepath.Join(root, "quarantine")
	if err := os.MkdirAll(q, 0o700); err != nil {
		return "", err
	}
	base := filepath.Base(filepath.Dir(entry)) + "-" + filepath.Base(entry)
	dst := filepath.Join(q, base)
	for n := 2; ; n++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = filepath.Join(q, base+"."+strconv.Itoa(n))
	}
	// The note goes in first, so a quarantined entry always has it.
	_ = os.WriteFile(filepath.Join(entry, "why"), []byte(why+"\n"), 0o600)
	if err := os.Rename(entry, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// The most the agent reads of a spool file (docs/protocol.md, "The
// spool"): a session file holds a URL, a worker id and a token; an entry
// holds one result, which the coordinator takes only up to 1 MiB.
const (
	maxSessionFileBytes = 64 << 10
	maxEntryFileBytes   = 2 << 20
)

// orphan is the spool folder of an agent that is gone, with what it left.
type orphan struct {
	dir     string
	lock    *os.File
	session spoolSession
	// sessionErr is why the folder's session.json gives no session (it is
	// missing, not a regular file, too large, not JSON, names no token).
	sessionErr error
	entries    []string // entry folders, by token
}

// orphans finds the folders of root whose agent is gone (their lock is
// free) and takes their locks. The caller releases each lock.
func orphans(root string) []orphan {
	dirs, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []orphan
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "quarantine" {
			continue
		}
		dir := filepath.Join(root, d.Name())
		lock, err := lockFolder(dir, true)
		if err != nil {
			continue // its agent is alive (or the folder is not ours)
		}
		o := orphan{dir: dir, lock: lock}
		o.session, o.sessionErr = readSession(filepath.Join(dir, "session.json"))
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() && e.Name()[0] != '.' {
				o.entries = append(o.entries, filepath.Join(dir, e.Name()))
			}
		}
		sort.Strings(o.entries)
		out = append(out, o)
	}
	return out
}

// readSession reads a spool folder's session file: a regular file of at
// most maxSessionFileBytes (opened without blocking, so a FIFO in its
// place is refused, not waited on) that names a session token.
func readSession(path string) (spoolSession, error) {
	var s spoolSession
	b, err := regularfile.Read(path, maxSessionFileBytes)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return spoolSession{}, fmt.Errorf("%s is not a session: %v", path, err)
	}
	if s.SessionToken == "" {
		return spoolSession{}, fmt.Errorf("%s names no session token", path)
	}
	return s, nil
}

// readEntry reads an entry's result: a regular file of at most
// maxEntryFileBytes, opened without blocking.
func readEntry(entry string) (spoolEntry, error) {
	var e spoolEntry
	b, err := regularfile.Read(filepath.Join(entry, "result.json"), maxEntryFileBytes)
	if err != nil {
		return e, err
	}
	return e, json.Unmarshal(b, &e)
}
