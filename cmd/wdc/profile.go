package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
)

// Environment variables that make any wdc command write Go profiles
// (runtime/pprof, read with `go tool pprof`).
const (
	// CPUProfileEnv names a file for a CPU profile of the whole command.
	CPUProfileEnv = "WDC_CPUPROFILE"
	// MemProfileEnv names a file for a heap profile taken when the
	// command ends (after a garbage collection, so it shows what is live;
	// `-sample_index=alloc_space` shows everything allocated).
	MemProfileEnv = "WDC_MEMPROFILE"
)

// startProfiles starts the profiles the environment asks for and returns
// the function that writes and closes them. A "%p" in a file name is
// replaced by the process id, and only then is the variable kept for the
// processes wdc starts (apply's agents write their own profiles); without
// "%p" it is removed from the environment, so no agent overwrites the
// command's file. A profile that cannot be written is reported on w and
// the command runs without it.
func startProfiles(w io.Writer) (stop func()) {
	path := func(env string) string {
		v := os.Getenv(env)
		if v == "" {
			return ""
		}
		if !strings.Contains(v, "%p") {
			os.Unsetenv(env)
		}
		return strings.ReplaceAll(v, "%p", strconv.Itoa(os.Getpid()))
	}
	cpuPath, memPath := path(CPUProfileEnv), path(MemProfileEnv)
	var cpu *os.File
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err == nil {
			err = pprof.StartCPUProfile(f)
			if err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(w, "wdc: warning: %s: %v\n", CPUProfileEnv, err)
		} else {
			cpu = f
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				fmt.Fprintf(w, "wdc: warning: %s: %v\n", CPUProfileEnv, err)
			}
		}
		if memPath == "" {
			return
		}
		f, err := os.Create(memPath)
		if err == nil {
			runtime.GC()
			err = pprof.Lookup("heap").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(w, "wdc: warning: %s: %v\n", MemProfileEnv, err)
		}
	}
}
