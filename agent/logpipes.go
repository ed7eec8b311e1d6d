package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// logDrainGrace is how long, once an attempt's command has exited and its
// process group was swept, the agent goes on waiting on its stdout and
// stderr for a process that left the group (setsid) and still holds them.
// Then each copier takes what the pipe still holds (the group wrote it
// before it ended, and a copier may be late: making the log folders waits
// for the work folder's lock) and closes it: a detached process's later
// writes fail (EPIPE, or SIGPIPE).
const logDrainGrace = 200 * time.Millisecond

// attemptLogs carries an attempt's stdout and stderr from its command to
// its log files. The command writes into two pipes; the agent copies what
// comes through each into its log file (paths.stdout, paths.stderr), and
// makes that file, with the attempt's log folders and its task's address
// file, at the first byte. An attempt that prints nothing makes no file
// and no folder: its logs are the empty blob every coordinator holds.
// Making inodes is the largest part of a trivial attempt's cost on a file
// system without a journal (docs/PERFORMANCE.md, "Logs through pipes").
//
// Use: pipeLogs, then the command gets Stdout and Stderr; started once it
// was started (or failed to); drain once it has exited.
type attemptLogs struct {
	paths attemptPaths
	task  string
	// Stdout and Stderr are the pipes' write ends, for the command. The
	// agent closes its copies in started.
	Stdout, Stderr *os.File
	readers        [2]*os.File
	copied         sync.WaitGroup
	folders        sync.Once
	foldersErr     error

	mu  sync.Mutex
	err error // the first error writing a log
}

// pipeLogs makes the pipes of an attempt's stdout and stderr and starts
// copying from them. A log an earlier try of the same attempt left is
// removed first, so a try that prints nothing does not show the earlier
// one's output.
func pipeLogs(paths attemptPaths, task string) (*attemptLogs, error) {
	for _, p := range []string{paths.stdout, paths.stderr} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing an earlier log: %v", err)
		}
	}
	l := &attemptLogs{paths: paths, task: task}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the stdout pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("creating the stderr pipe: %v", err)
	}
	l.Stdout, l.Stderr = outW, errW
	l.readers = [2]*os.File{outR, errR}
	l.copied.Add(2)
	go l.copy(outR, paths.stdout, "stdout")
	go l.copy(errR, paths.stderr, "stderr")
	return l, nil
}

// started closes the agent's copies of the pipes' write ends: from then on
// only the command (and what it starts) holds them, and a copier ends when
// the last of those closes them. Call it once the command was started, or
// failed to start.
func (l *attemptLogs) started() {
	l.Stdout.Close()
	l.Stderr.Close()
}

// drain waits for both copiers to reach the end of their pipes. Past
// grace it stops waiting for writers that are still out there: each copier
// then takes what its pipe holds at that moment, however long writing it
// takes, and ends. drain then closes the pipes and returns the first error
// writing a log (the attempt's output is then incomplete: a problem of the
// worker's, not of the task's).
func (l *attemptLogs) drain(grace time.Duration) error {
	done := make(chan struct{})
	go func() {
		l.copied.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		for _, r := range l.readers {
			// A copier waiting in Read wakes with ErrDeadlineExceeded; a
			// busy one sees it at its next Read. Either then takes what
			// is buffered (takeBuffered) and ends.
			r.SetReadDeadline(time.Now())
		}
		<-done
	}
	for _, r := range l.readers {
		r.Close()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// fail records the first error writing a log.
func (l *attemptLogs) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

// logBuffers are the copiers' buffers, reused across attempts.
var logBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copy writes what comes through r into the log file at path, which it
// makes at the first byte. When the file cannot be made or written it
// records why and goes on reading, so the command never blocks on a full
// pipe. It ends at the end of the pipe, or when drain's grace has passed
// (a read deadline) once it has taken what the pipe held then.
func (l *attemptLogs) copy(r *os.File, path, name string) {
	defer l.copied.Done()
	bp := logBuffers.Get().(*[]byte)
	defer logBuffers.Put(bp)
	buf := *bp
	var f *os.File
	broken := false
	write := func(b []byte) {
		if broken {
			return
		}
		if f == nil {
			var err error
			if f, err = l.create(path); err != nil {
				l.fail(fmt.Errorf("creating the %s log: %v", name, err))
				broken = true
				return
			}
		}
		if _, err := f.Write(b); err != nil {
			l.fail(fmt.Errorf("writing the %s log: %v", name, err))
			broken = true
		}
	}
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			write(buf[:n])
		}
		if rerr != nil {
			switch {
			case errors.Is(rerr, os.ErrDeadlineExceeded):
				if err := takeBuffered(r, buf, write); err != nil {
					l.fail(fmt.Errorf("reading the command's %s: %v", name, err))
				}
			case !errors.Is(rerr, io.EOF) && !errors.Is(rerr, os.ErrClosed):
				l.fail(fmt.Errorf("reading the command's %s: %v", name, rerr))
			}
			break
		}
	}
	if f != nil {
		if err := f.Close(); err != nil {
			l.fail(fmt.Errorf("writing the %s log: %v", name, err))
		}
	}
}

// takeBuffered passes to write what the pipe r holds now (pipeBuffered), and
// no more: what a detached writer adds meanwhile is not waited for. It
// reads without waiting, so a pipe that another reader emptied meanwhile
// does not block it.
func takeBuffered(r *os.File, buf []byte, write func([]byte)) error {
	r.SetReadDeadline(time.Time{}) // RawConn.Read refuses a passed deadline
	rc, err := r.SyscallConn()
	if err != nil {
		return err
	}
	var left int
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) { left, ioctlErr = pipeBuffered(int(fd)) }); err != nil {
		return err
	}
	if ioctlErr != nil {
		return fmt.Errorf("how much the pipe holds: %v", ioctlErr)
	}
	for left > 0 {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf[:min(left, len(buf))])
			for errors.Is(rerr, unix.EINTR) {
				n, rerr = unix.Read(int(fd), buf[:min(left, len(buf))])
			}
			return true // never wait for the poller
		})
		if err != nil {
			return err
		}
		if errors.Is(rerr, unix.EAGAIN) || (rerr == nil && n == 0) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
		write(buf[:n])
		left -= n
	}
	return nil
}

// create makes the log file at path, and first (once for both logs) the
// attempt's log folders and its task's address file.
func (l *attemptLogs) create(path string) (*os.File, error) {
	l.folders.Do(func() { l.foldersErr = makeLogFolders(l.paths, l.task) })
	if l.foldersErr != nil {
		return nil, l.foldersErr
	}
	// O_EXCL: pipeLogs removed what was there, so this makes a regular
	// file of the agent's; what took its place meanwhile (a FIFO, which
	// would block the open, or a link) is refused.
	return openFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
}
