package state

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCopy(t *testing.T) {
	ctx := context.Background()
	s := setup(t)
	// A lock row: a write that is not the state's content, and so does
	// not move the serial; the copy has it all the same.
	if _, _, err := s.AcquireLock(ctx, LockRequest{Holder: "a", Host: "h", PID: 1, TTL: time.Minute}, t0); err != nil {
		t.Fatal(err)
	}
	lineage, serial, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		src, dst string
		want     error
	}{
		{"copy", s.Path(), filepath.Join(dir, "copy.db"), nil},
		{"over a file", s.Path(), filepath.Join(dir, "copy.db"), fs.ErrExist},
		{"no source", filepath.Join(dir, "none.db"), filepath.Join(dir, "other.db"), fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Copy(ctx, tc.src, tc.dst)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Copy = %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				return
			}
			fi, err := os.Stat(tc.dst)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("copy: %v, mode %v", err, fi.Mode())
			}
			c, err := OpenReadOnly(ctx, tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.QuickCheck(ctx); err != nil {
				t.Fatal(err)
			}
			l, n, err := c.Info(ctx)
			if err != nil || l != lineage || n != serial {
				t.Fatalf("copy Info = %s %d %v, want %s %d", l, n, err, lineage, serial)
			}
			snap, err := c.Snapshot(ctx)
			if err != nil || snap.Lock == nil || snap.Lock.Holder != "a" {
				t.Fatalf("copy lock = %+v, %v", snap.Lock, err)
			}
		})
	}
}
