//go:build !linux

package agent

import (
	"errors"
	"os"
)

// exclusiveRenames: renameInto cannot rename only where nothing is.
const exclusiveRenames = false

// renameInto renames src to dst. Without renameat2 an exclusive rename
// is refused, and the caller makes the file at dst as without a pool.
func renameInto(src, dst string, exclusive bool) error {
	if exclusive {
		return errors.ErrUnsupported
	}
	return os.Rename(src, dst)
}
