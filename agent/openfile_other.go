//go:build !unix

package agent

import (
	"io/fs"
	"os"
)

// openFile is os.OpenFile where there is no open(2) (openfile_unix.go).
func openFile(path string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag, perm)
}
