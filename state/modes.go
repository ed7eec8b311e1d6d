package state

import (
	"io/fs"
	"os"
	"syscall"
)

// The state file holds the lineage, the hash key, every task's definition
// and every worker's registration: it and its side files (-wal, -shm,
// -writers) are readable by the user only, and a folder made for it too.
const (
	fileMode   fs.FileMode = 0o600
	folderMode fs.FileMode = 0o700
)

// tightenModes takes the group and other bits off the state file abs and
// its side files, each that exists, is a regular file and is owned by this
// user: a state file an earlier wdc made was 0644, and SQLite makes the
// -wal and -shm files with the state file's mode. Errors are ignored (the
// file is used as it is).
func tightenModes(abs string) {
	for _, suffix := range []string{"", "-wal", "-shm", "-writers"} {
		tighten(abs + suffix)
	}
}

// tighten takes the group and other bits off path when it is a regular
// file owned by this user; it reports whether it changed the mode.
func tighten(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return false
	}
	return os.Chmod(path, fi.Mode().Perm()&^0o077) == nil
}
