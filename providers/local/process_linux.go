package local

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// alive reports whether pid exists and is not a zombie (from /proc).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// "pid (comm) S …": the state follows the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// processStart returns the start time of pid as the kernel records it:
// field 22 of /proc/PID/stat (clock ticks since boot, proc(5)). Two
// processes that share a pid at different times never share it.
func processStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'; state is field 3.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", errors.New("local: unexpected /proc stat format")
	}
	fields := strings.Fields(s[i+1:])
	const startField = 22 - 3 // index of field 22 among fields 3, 4, …
	if len(fields) <= startField {
		return "", errors.New("local: unexpected /proc stat format")
	}
	return fields[startField], nil
}

// processArgv returns the command line of pid (/proc/PID/cmdline).
func processArgv(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
}
