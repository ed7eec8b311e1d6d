//go:build linux

package confine

import (
	"fmt"
	"os"

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
