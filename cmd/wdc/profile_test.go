package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestStartProfiles(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, cpu, mem string
		files          []string // that must exist and be non-empty afterwards
		keep           bool     // the variables stay in the environment
		warn           string
	}{
		{name: "none"},
		{name: "both", cpu: filepath.Join(dir, "cpu.prof"), mem: filepath.Join(dir, "mem.prof"),
			files: []string{"cpu.prof", "mem.prof"}},
		{name: "per process", cpu: filepath.Join(dir, "cpu-%p.prof"), keep: true,
			files: []string{"cpu-" + strconv.Itoa(os.Getpid()) + ".prof"}},
		{name: "unwritable", cpu: filepath.Join(dir, "no", "such", "dir", "cpu.prof"), warn: "wdc: warning: WDC_CPUPROFILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(CPUProfileEnv, tt.cpu)
			t.Setenv(MemProfileEnv, tt.mem)
			var stderr bytes.Buffer
			stop := startProfiles(&stderr)
			for i := 0; i < 1000; i++ {
				_ = strings.Repeat("x", i)
			}
			stop()
			for _, f := range tt.files {
				if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
					t.Errorf("profile %s: %v", f, err)
				}
			}
			if _, kept := os.LookupEnv(CPUProfileEnv); tt.cpu != "" && kept != tt.keep {
				t.Errorf("%s kept in the environment: %v, want %v", CPUProfileEnv, kept, tt.keep)
			}
			if tt.warn != "" && !strings.Contains(stderr.String(), tt.warn) || tt.warn == "" && stderr.Len() > 0 {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.warn)
			}
		})
	}
}
