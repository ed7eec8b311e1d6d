package wdctest

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wdc-dev/wdc/internal/folder"
)

// CopyConfig copies the configuration directory src into dst (made
// anew): folders, regular files with their permissions and symbolic links
// as links, leaving out the .wdc and .git folders at its top, dst itself
// and every path in skip, should they be inside src, and anything else
// (FIFOs, devices, sockets). A link to a path inside src, written
// absolute or relative, points to that path in dst, so that nothing
// written through it reaches src; a link to a path outside src points
// there (made absolute when it was relative: the copy is elsewhere).
func CopyConfig(src, dst string, skip []string) error {
	src, err := filepath.Abs(src)
	if err != nil {
		return err
	}
	roots := []string{src}
	if real, err := filepath.EvalSymlinks(src); err == nil && real != src {
		roots = append(roots, real)
	}
	skipped := map[string]bool{filepath.Join(src, ".wdc"): true, filepath.Join(src, ".git"): true}
	for _, s := range append(skip, dst) {
		if abs, err := filepath.Abs(s); err == nil {
			skipped[abs] = true
		}
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skipped[path] && path != src {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch mode := d.Type(); {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(linkInCopy(roots, path, link, target, dst), target)
		case mode.IsRegular():
			return copyFile(path, target)
		}
		return nil
	})
}

// linkInCopy is what the copy at target of the link at path, which
// points to link, points to: the same path in dst when link leads inside
// one of roots (src, and src with its links resolved), else the path it
// leads to outside, absolute.
func linkInCopy(roots []string, path, link, target, dst string) string {
	to := link
	if !filepath.IsAbs(to) {
		to = filepath.Join(filepath.Dir(path), to)
	}
	to = filepath.Clean(to)
	for _, root := range roots {
		if !folder.Holds(root, to) {
			continue
		}
		rel, _ := filepath.Rel(root, to) // Holds: a path below root
		if in, err := filepath.Rel(filepath.Dir(target), filepath.Join(dst, rel)); err == nil {
			return in
		}
	}
	return to
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
