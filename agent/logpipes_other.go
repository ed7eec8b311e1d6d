//go:build !linux

package agent

// pipeBuffered returns at most how many bytes the pipe fd holds unread.
// Without Linux's FIONREAD it answers the largest pipe buffer Linux allows
// by default (1 MiB, /proc/sys/fs/pipe-max-size): takeBuffered then reads
// until the pipe is empty or that much came through.
func pipeBuffered(fd int) (int, error) {
	return 1 << 20, nil
}
