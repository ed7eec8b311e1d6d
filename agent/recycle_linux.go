package agent

import (
	"os"

	"golang.org/x/sys/unix"
)

// exclusiveRenames: renameInto can rename only where nothing is.
const exclusiveRenames = true

// renameInto renames the file src to dst; with exclusive, only when dst
// does not exist (RENAME_NOREPLACE: fs.ErrExist when it does). Without,
// it is rename(2) as it is: os.Rename's lstat of dst (to refuse replacing
// a folder) is no use for a file, which rename(2) never puts over a
// folder (EISDIR).
func renameInto(src, dst string, exclusive bool) error {
	if !exclusive {
		if err := unix.Rename(src, dst); err != nil {
			return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
		}
		return nil
	}
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err != nil {
		return &os.LinkError{Op: "renameat2", Old: src, New: dst, Err: err}
	}
	return nil
}
