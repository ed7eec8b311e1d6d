//go:build linux

package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// hide covers each Hide folder with an empty tmpfs and binds each Show
// folder back in place, cloned before it was covered (byMount; the calling
// thread is in a mount namespace of its own).
func hide(p Policy) error {
	trees := make([]int, 0, len(p.Show))
	defer func() {
		for _, fd := range trees {
			unix.Close(fd)
		}
	}()
	for _, s := range p.Show {
		fd, err := unix.OpenTree(unix.AT_FDCWD, s, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("confining the attempt: %s: %w", s, err)
		}
		trees = append(trees, fd)
	}
	// Each folder above a Hide folder becomes a mount of its own (bound
	// onto itself), which no rename or removal in this namespace can move
	// (EBUSY): a root command that renamed one would otherwise leave the
	// work folder under a new name, uncovered for the next attempt, and a
	// decoy where the agent looks for it.
	for _, a := range foldersAbove(p.Hide) {
		if err := unix.Mount(a, a, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("confining the attempt: pinning %s: %w", a, err)
		}
	}
	for _, h := range p.Hide {
		if err := unix.Mount("tmpfs", h, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
			return fmt.Errorf("confining the attempt: hiding %s: %w", h, err)
		}
	}
	for i, s := range p.Show {
		if err := os.MkdirAll(s, 0o700); err != nil {
			return fmt.Errorf("confining the attempt: %w", err)
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, s, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("confining the attempt: showing %s: %w", s, err)
		}
	}
	for _, r := range p.ReadOnly {
		if err := readOnly(r); err != nil {
			return fmt.Errorf("confining the attempt: %s read-only: %w", r, err)
		}
	}
	for _, f := range p.HideFiles {
		if err := coverFile(f); err != nil {
			return fmt.Errorf("confining the attempt: hiding %s: %w", f, err)
		}
	}
	for _, h := range p.Hide {
		// Nothing may be written into the cover (the binds inside stay
		// writable).
		if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("confining the attempt: %s read-only: %w", h, err)
		}
	}
	return nil
}

// readOnly makes folder dir and every mount below it read-only in the
// calling thread's mount namespace; a folder that is no mount of its own
// is bound onto itself first.
func readOnly(dir string) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	err := unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, attr)
	if err == unix.EINVAL {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		err = unix.MountSetattr(unix.AT_FDCWD, dir, unix.AT_RECURSIVE, attr)
	}
	return err
}

// foldersAbove lists the folders above the hidden ones, / left out,
// outermost first, each once.
func foldersAbove(hidden []string) []string {
	var out []string
	for _, h := range hidden {
		var chain []string
		for d := filepath.Dir(h); d != "/" && d != "."; d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if !slices.Contains(out, chain[i]) {
				out = append(out, chain[i])
			}
		}
	}
	return out
}

// coverFile covers the regular file path with /dev/null, read-only: it
// reads empty and takes no write. Anything else at path is left alone.
func coverFile(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if err := unix.Mount("/dev/null", path, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
}
