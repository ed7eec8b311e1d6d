package regularfile

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// within runs f and fails the test when it has not returned after a few
// seconds: what this package guards against is a call that hangs.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not return within 5 s (it blocks)")
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(write("target", "via a link"), link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		path    string
		limit   int64
		want    string // the content read, when no error
		wantErr error  // errors.Is
		message string // the error's text
	}{
		{name: "regular", path: write("a", "hello"), limit: 10, want: "hello"},
		{name: "exactly the limit", path: write("b", "12345"), limit: 5, want: "12345"},
		{name: "empty", path: write("c", ""), limit: 5, want: ""},
		{name: "symbolic link to a regular file", path: link, limit: 64, want: "via a link"},
		{name: "oversized", path: write("d", strings.Repeat("x", 2049)), limit: 1024, wantErr: ErrTooLarge,
			message: dir + "/d is 2,049 bytes, more than the 1 KiB (1,024 bytes) allowed"},
		{name: "FIFO", path: fifo, limit: 1 << 20, wantErr: ErrNotRegular,
			message: fifo + " is a FIFO (named pipe), not a regular file"},
		{name: "symbolic link to /dev/zero", path: zero, limit: 1 << 20, wantErr: ErrNotRegular,
			message: zero + " is a character device (a symbolic link to /dev/zero), not a regular file"},
		{name: "directory", path: sub, limit: 1 << 20, wantErr: ErrNotRegular,
			message: sub + " is a directory, not a regular file"},
		{name: "socket", path: sock, limit: 1 << 20, wantErr: ErrNotRegular,
			message: sock + " is a socket, not a regular file"},
		{name: "missing", path: filepath.Join(dir, "none"), limit: 1, wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			var err error
			within(t, func() { got, err = Read(tt.path, tt.limit) })
			if tt.wantErr == nil {
				if err != nil || string(got) != tt.want {
					t.Fatalf("Read = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Read = %q, %v; want an error that is %v", got, err, tt.wantErr)
			}
			if tt.message != "" && err.Error() != tt.message {
				t.Errorf("error:\n got %s\nwant %s", err, tt.message)
			}
		})
	}
}

func TestReasonHasNoPath(t *testing.T) {
	for _, err := range []interface{ Reason() string }{
		&NotRegularError{Path: "/x/y", Mode: fs.ModeNamedPipe},
		&TooLargeError{Path: "/x/y", Limit: 64 << 10, Size: 70000},
		&TooLargeError{Path: "/x/y", Limit: 64 << 10, Size: -1},
	} {
		if r := err.Reason(); strings.Contains(r, "/x/y") || !strings.HasPrefix(r, "it is ") {
			t.Errorf("Reason() = %q: want a sentence without the path", r)
		}
	}
}

// TestOpenGivesABlockingDescriptor: the open is non-blocking, the file
// the caller reads is not.
func TestOpenGivesABlockingDescriptor(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, fi, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi.Size() != 1 {
		t.Errorf("size %d, want 1", fi.Size())
	}
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	_ = rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		t.Error("the descriptor Open returns is non-blocking")
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		mode fs.FileMode
		want string
	}{
		{0o644, "a regular file"},
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeNamedPipe, "a FIFO (named pipe)"},
		{fs.ModeDevice | fs.ModeCharDevice, "a character device"},
		{fs.ModeDevice, "a block device"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeSymlink, "a symbolic link"},
		{fs.ModeIrregular, "an irregular file (?---------)"},
	}
	for _, tt := range tests {
		if got := Kind(tt.mode); got != tt.want {
			t.Errorf("Kind(%v) = %q, want %q", tt.mode, got, tt.want)
		}
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1000, "1,000 bytes"},
		{1024, "1 KiB (1,024 bytes)"},
		{64 << 10, "64 KiB (65,536 bytes)"},
		{32 << 20, "32 MiB (33,554,432 bytes)"},
		{1 << 30, "1 GiB (1,073,741,824 bytes)"},
		{1234567, "1,234,567 bytes"},
	}
	for _, tt := range tests {
		if got := Size(tt.n); got != tt.want {
			t.Errorf("Size(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
