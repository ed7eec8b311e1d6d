package state

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The state file, its side files and a folder made for it are readable by
// the user only; a state file an earlier wdc made 0644 is made 0600 when it
// is opened for writing.
func TestModes(t *testing.T) {
	ctx := context.Background()
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "work")
	path := filepath.Join(dir, "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertPool(ctx, Pool{Name: "p", Provider: "local", Max: 1, Capacity: 1}, t0); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{dir: 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600, path + "-writers": 0o600}
	for p, mode := range want {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", filepath.Base(p), fi.Mode().Perm(), err, mode)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{path, path + "-writers"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-writers"} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s of an earlier wdc, opened again: mode %v (%v), want 0600", filepath.Base(p), fi.Mode().Perm(), err)
		}
	}
}
