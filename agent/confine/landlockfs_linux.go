//go:build linux

package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/wdc-dev/wdc/internal/folder"
)

// scopes are what every confined attempt's Landlock domain scopes to
// itself: signals and abstract UNIX sockets (ABI 6).
const scopes = ll.ScopeSignal | ll.ScopeAbstractUnixSocket

// fsAll are the file-system rights of Landlock ABI 5 to 7, all handled by
// a byLandlock ruleset: what no rule grants is denied.
const fsAll = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
	ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
	ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
	ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSTruncate | ll.AccessFSIoctlDev

// fsRead are the rights of fsAll on a Policy.ReadOnly folder.
const fsRead = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir

// fsFile are the rights of fsAll that a rule on a file that is not a
// folder may grant.
const fsFile = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
	ll.AccessFSTruncate | ll.AccessFSIoctlDev

// scopesRuleset is the ruleset of byMount: scopes only, the file system
// as the mounts make it.
func scopesRuleset() (int, error) {
	return ll.LandlockCreateRuleset(&ll.RulesetAttr{Scoped: scopes}, 0)
}

// newRuleset is an empty byLandlock ruleset: every file-system right
// handled, none granted yet.
func newRuleset() (int, error) {
	return ll.LandlockCreateRuleset(&ll.RulesetAttr{HandledAccessFS: fsAll, Scoped: scopes}, 0)
}

// holdsHidden refuses, with ErrUnavailable, a command whose dir is or
// holds a Hide folder: under byLandlock it could not create a file in its
// own dir (the rights of a folder reach everything below it, so a folder
// above a hidden one gets none).
func holdsHidden(dir string, p Policy) error {
	if dir == "" {
		return nil
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("confining the attempt: %w", err)
	}
	for _, h := range p.Hide {
		if folder.Holds(d, h) {
			return fmt.Errorf("%w: its dir %s holds the work folder %s, and without a mount namespace (CAP_SYS_ADMIN) a confined attempt cannot write directly in a folder above the work folder: "+
				"keep the state (and so the work folder) outside the tasks' dirs, or run the agent as root", ErrUnavailable, dir, h)
		}
	}
	return nil
}

// fileSystemRuleset builds the byLandlock ruleset of p: every right on
// every file and folder but the Hide folders, the folders above them (of
// those, only listing, which reaches the names below them but no content)
// and what is below them, except the Show folders, granted in full. The
// rules beside the Hide folders come from the agent's cache of them
// (besides), built once per set of Hide folders and again when a folder
// above one changes.
func fileSystemRuleset(p Policy) (fd int, err error) {
	fd, err = newRuleset()
	if err != nil {
		return -1, err
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
			fd = -1
		}
	}()
	besides.mu.Lock()
	defer besides.mu.Unlock()
	if err := besides.refresh(p.Hide, p.ReadOnly); err != nil {
		return -1, err
	}
	for _, r := range besides.rules {
		if err := ll.LandlockAddPathBeneathRule(fd, &ll.PathBeneathAttr{AllowedAccess: r.rights, ParentFd: r.fd}, 0); err != nil {
			return -1, fmt.Errorf("a Landlock rule for %s: %w", r.path, err)
		}
	}
	if !besides.keep {
		besides.drop()
	}
	for _, s := range p.Show {
		if err := os.MkdirAll(s, 0o700); err != nil {
			return -1, err
		}
		if err := grant(fd, s, fsAll, nil); err != nil {
			return -1, err
		}
	}
	return fd, nil
}

// maxCachedRules bounds the descriptors the cache keeps open; a walk that
// finds more (a crowded /tmp above the work folder) is made again for
// each attempt.
const maxCachedRules = 2048

// besides caches the rules beside the Hide folders: O_PATH descriptors
// of every entry of every folder above a Hide folder (and of those folders
// themselves, for listing), held open so that an attempt's ruleset costs one
// system call per rule.
var besides ruleCache

type ruleCache struct {
	mu     sync.Mutex
	hide   string     // the Hide folders the rules are for, NUL-joined
	stamps []dirStamp // the folders walked, as they were
	rules  []cachedRule
	keep   bool // false: rules exceed maxCachedRules, dropped after use
}

type cachedRule struct {
	path   string
	fd     int
	rights uint64
}

// dirStamp is a walked folder's identity and change times: an entry made,
// removed or renamed in it changes them.
type dirStamp struct {
	path         string
	id           fileID
	mtime, ctime unix.Timespec
}

func stampOf(path string) (dirStamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return dirStamp{}, err
	}
	return dirStamp{path, fileID{st.Dev, st.Ino}, st.Mtim, st.Ctim}, nil
}

// refresh makes c's rules those of hide: kept if nothing changed, else
// walked again.
func (c *ruleCache) refresh(hide, readOnly []string) error {
	key := strings.Join(hide, "\x00") + "\x00\x00" + strings.Join(readOnly, "\x00")
	if key == c.hide && c.rules != nil && c.fresh() {
		return nil
	}
	c.drop()
	// procfs makes and drops a folder per process: rules cannot be
	// walked beside a folder of it (a read-only one there is left to the
	// mounts, which containers make read-only themselves).
	readOnly = slices.DeleteFunc(slices.Clone(readOnly), func(r string) bool { return folder.Holds("/proc", r) })
	above, walk := map[string]bool{}, []string{}
	for _, h := range append(append([]string(nil), hide...), readOnly...) {
		for d := filepath.Dir(h); ; d = filepath.Dir(d) {
			if !above[d] {
				above[d] = true
				walk = append(walk, d)
			}
			if d == "/" {
				break
			}
		}
	}
	protected, err := identities(hide, walk)
	if err != nil {
		return err
	}
	c.rules = []cachedRule{}
	for _, d := range walk {
		st, err := stampOf(d)
		if err != nil {
			return err
		}
		c.stamps = append(c.stamps, st)
		if err := c.add(d, ll.AccessFSReadDir, nil); err != nil {
			return err
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		for _, e := range entries {
			path := filepath.Join(d, e.Name())
			if above[path] || hidden(path, hide) {
				continue
			}
			real, err := filepath.EvalSymlinks(path)
			if err != nil || above[real] || hidden(real, hide) {
				continue // dangling, or a way back to what is hidden
			}
			rights := uint64(fsAll)
			if hidden(real, readOnly) {
				rights = fsRead
			}
			if err := c.add(real, rights, protected); err != nil {
				return err
			}
		}
	}
	c.hide, c.keep = key, len(c.rules) <= maxCachedRules
	return nil
}

// fresh reports whether no walked folder changed since the walk.
func (c *ruleCache) fresh() bool {
	for _, old := range c.stamps {
		now, err := stampOf(old.path)
		if err != nil || now != old {
			return false
		}
	}
	return true
}

// add opens path for a rule giving rights beneath it (only fsFile's, if
// path is not a folder), unless path is one of protected or, no longer
// what it was, a symbolic link or gone.
func (c *ruleCache) add(path string, rights uint64, protected map[fileID]bool) error {
	f, rights, err := openForRule(path, rights, protected)
	if err != nil || f < 0 {
		return err
	}
	c.rules = append(c.rules, cachedRule{path, f, rights})
	return nil
}

// drop closes c's descriptors and forgets its rules.
func (c *ruleCache) drop() {
	for _, r := range c.rules {
		unix.Close(r.fd)
	}
	c.hide, c.stamps, c.rules = "", nil, nil
}

// fileID is a file's device and inode: what a Landlock rule is tied to.
type fileID struct{ dev, ino uint64 }

// identities are the fileIDs of the Hide folders and the folders above
// them.
func identities(lists ...[]string) (map[fileID]bool, error) {
	ids := map[fileID]bool{}
	for _, list := range lists {
		for _, d := range list {
			var st unix.Stat_t
			if err := unix.Stat(d, &st); err != nil {
				return nil, err
			}
			ids[fileID{st.Dev, st.Ino}] = true
		}
	}
	return ids, nil
}

// hidden reports whether path is a Hide folder or below one.
func hidden(path string, hide []string) bool {
	for _, h := range hide {
		if folder.Holds(h, path) {
			return true
		}
	}
	return false
}

// grant adds a rule giving rights beneath path (only fsFile's, if path is
// not a folder), unless path is one of protected or a symbolic link.
func grant(rulesetFD int, path string, rights uint64, protected map[fileID]bool) error {
	f, rights, err := openForRule(path, rights, protected)
	if err != nil || f < 0 {
		return err
	}
	defer unix.Close(f)
	if err := ll.LandlockAddPathBeneathRule(rulesetFD, &ll.PathBeneathAttr{AllowedAccess: rights, ParentFd: f}, 0); err != nil {
		return fmt.Errorf("a Landlock rule for %s: %w", path, err)
	}
	return nil
}

// openForRule opens path (O_PATH, not following a link) for a rule, and
// returns the rights a rule on it may grant (only fsFile's, if it is not a
// folder); -1 and no error when there is nothing to grant: path is gone,
// a symbolic link, or one of protected (by identity: a bind mount of a
// protected folder is that folder).
func openForRule(path string, rights uint64, protected map[fileID]bool) (int, uint64, error) {
	f, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return -1, 0, nil
		}
		return -1, 0, fmt.Errorf("%s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		unix.Close(f)
		return -1, 0, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case protected[fileID{st.Dev, st.Ino}], st.Mode&unix.S_IFMT == unix.S_IFLNK:
		unix.Close(f)
		return -1, 0, nil
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		rights &= fsFile
	}
	return f, rights, nil
}
