//go:build !linux

package local

import "errors"

// errNoProc: without /proc this build cannot tell a process's start time or
// command line, so Reclaim stops no dead apply's worker by pid (a weaker
// guarantee than on Linux, documented in docs/design.md): only their
// attempts' process groups, recorded by the agents, are killed.
var errNoProc = errors.New("local: process start times are read from /proc, which this system lacks")

func processStart(int) (string, error) { return "", errNoProc }

func processArgv(int) ([]string, error) { return nil, errNoProc }
