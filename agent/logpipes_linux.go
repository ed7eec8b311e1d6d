package agent

import "golang.org/x/sys/unix"

// pipeBuffered returns how many bytes the pipe fd holds unread
// (ioctl FIONREAD, which Linux names TIOCINQ; pipe(7)).
func pipeBuffered(fd int) (int, error) {
	return unix.IoctlGetInt(fd, unix.TIOCINQ)
}
