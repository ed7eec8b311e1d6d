package regularfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by *NotRegularError; ErrTooLarge by
// *TooLargeError.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// NotRegularError is returned for a path that names something other than
// a regular file (after following symbolic links).
type NotRegularError struct {
	Path string      // the path as given
	Mode fs.FileMode // the type of what it names
	Link string      // where the path's symbolic link points, when it is one
}

// Error reads "PATH is a FIFO (named pipe), not a regular file".
func (e *NotRegularError) Error() string { return e.Path + " is " + e.what() }

// Reason is Error without the path: "it is a FIFO (named pipe), not a
// regular file", or "it is a character device (a symbolic link to
// /dev/zero), not a regular file".
func (e *NotRegularError) Reason() string { return "it is " + e.what() }

func (e *NotRegularError) what() string {
	what := Kind(e.Mode)
	if e.Link != "" {
		what += " (a symbolic link to " + e.Link + ")"
	}
	return what + ", not a regular file"
}

// Is reports whether target is ErrNotRegular.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// TooLargeError is returned by Read for a file larger than its limit.
type TooLargeError struct {
	Path  string // the path as given
	Limit int64  // the most Read reads, in bytes
	Size  int64  // the file's size when it was opened; -1 when it grew past Limit while read
}

// Error reads "PATH is 40 MiB (41,943,040 bytes), more than the 32 MiB
// (33,554,432 bytes) allowed".
func (e *TooLargeError) Error() string { return e.Path + " is " + e.what() }

// Reason is Error without the path: "it is 40 MiB (…), more than …".
func (e *TooLargeError) Reason() string { return "it is " + e.what() }

func (e *TooLargeError) what() string {
	if e.Size < 0 {
		return fmt.Sprintf("more than the %s allowed (it grew while it was read)", Size(e.Limit))
	}
	return fmt.Sprintf("%s, more than the %s allowed", Size(e.Size), Size(e.Limit))
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Kind names the type of a file mode with its article, for messages: "a
// regular file", "a directory", "a FIFO (named pipe)", "a character
// device", "a block device", "a socket", "a symbolic link".
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "an irregular file (" + t.String() + ")"
	}
}

// Check returns a *NotRegularError for path when m, the mode of what it
// names, is not a regular file's, and nil when it is. It is for callers
// that only stat a file another library opens (the state file, which
// SQLite opens).
func Check(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	e := &NotRegularError{Path: path, Mode: m.Type()}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		e.Link, _ = os.Readlink(path)
	}
	return e
}

// Open opens path for reading, as os.Open does, but never blocks on a FIFO
// and returns only a regular file: anything else is closed again and
// refused with a *NotRegularError. The FileInfo is the open file's.
// Reading the returned file blocks as reading a file opened by os.Open.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return open(path, func(flags int) (*os.File, error) { return os.OpenFile(path, flags, 0) }, os.Stat)
}

// OpenIn opens name inside root as Open does, and refuses too a name
// whose last element is a symbolic link (O_NOFOLLOW; a *NotRegularError)
// or that leads out of root by a link or ".." (os.Root): a folder that
// someone else controls (an attempt's directory) cannot make the caller
// read a file elsewhere.
func OpenIn(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	// os.Root follows a last link that stays inside it, O_NOFOLLOW or not:
	// refuse one first. Whatever the name is by the time it is opened, the
	// file is inside root.
	if fi, err := root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, Check(name, fi.Mode())
	}
	return open(name, func(flags int) (*os.File, error) { return root.OpenFile(name, flags|syscall.O_NOFOLLOW, 0) }, root.Lstat)
}

// ReadIn reads name inside root as Read does, opened as OpenIn does.
func ReadIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, fi, err := OpenIn(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, fi, name, limit)
}

// open opens path by openFile with the flags of Open, and says what it is
// by stat when it cannot be opened.
func open(path string, openFile func(flags int) (*os.File, error), stat func(string) (fs.FileInfo, error)) (*os.File, fs.FileInfo, error) {
	f, err := openFile(os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY)
	if err != nil {
		// A socket cannot be opened (ENXIO), a link not followed (ELOOP):
		// say what it is.
		if fi, serr := stat(path); serr == nil && !fi.Mode().IsRegular() {
			return nil, nil, Check(path, fi.Mode())
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := Check(path, fi.Mode()); err != nil {
		f.Close()
		return nil, nil, err
	}
	// O_NONBLOCK was for the open only: a regular file reads the same
	// without it, and the caller gets an ordinary descriptor.
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
	return f, fi, nil
}

// Read reads the regular file at path (opened as Open does) when it holds
// at most limit bytes, and refuses a larger one with a *TooLargeError
// without reading it. A file that grows past limit while it is read is
// refused too: at most limit+1 bytes are ever read.
func Read(path string, limit int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, fi, path, limit)
}

// readLimited reads f, whose FileInfo is fi, when it holds at most limit
// bytes.
func readLimited(f *os.File, fi fs.FileInfo, path string, limit int64) ([]byte, error) {
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Limit: limit, Size: fi.Size()}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	switch {
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, &TooLargeError{Path: path, Limit: limit, Size: -1}
	}
	return b, nil
}

// Size writes a byte count for a message: "64 KiB (65,536 bytes)" for a
// whole number of KiB, MiB or GiB, else "1,000 bytes".
func Size(n int64) string {
	bytes := group(n) + " bytes"
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s (%s)", n/u.size, u.name, bytes)
		}
	}
	return bytes
}

// group writes n with a comma between groups of three digits.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := ""
	if n < 0 {
		neg, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return neg + s
}
