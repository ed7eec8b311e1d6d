package agent

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameInto renames src to dst; with exclusive, only when dst does not
// exist (RENAME_NOREPLACE: fs.ErrExist when it does).
func renameInto(src, dst string, exclusive bool) error {
	if !exclusive {
		return os.Rename(src, dst)
	}
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err != nil {
		return &os.LinkError{Op: "renameat2", Old: src, New: dst, Err: err}
	}
	return nil
}
