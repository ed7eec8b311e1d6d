// Package folder answers questions about where a path lies.
package folder

import (
	"path/filepath"
	"strings"
)

// Holds reports whether path is folder dir or lies below it, by name: both
// are cleaned, and symbolic links are not followed. Relative paths are
// compared as they are given.
func Holds(dir, path string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
