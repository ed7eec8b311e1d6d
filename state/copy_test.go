package state

import (
	"context"
	"crypto/sha256"
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

// TestNewPutID: two copies of one content differ in their bytes once a
// new put id came between them (an object store's ETag, the hash of the
// bytes, then differs too), and the serial stays.
func TestNewPutID(t *testing.T) {
	ctx := context.Background()
	s := setup(t)
	_, serial, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	digest := func(name string) [sha256.Size]byte {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := Copy(ctx, s.Path(), p); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(data)
	}
	a, b := digest("a.db"), digest("b.db")
	if a != b {
		t.Fatal("two copies of one state differ: the put id would not be needed")
	}
	first, err := s.NewPutID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := digest("c.db")
	second, err := s.NewPutID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := digest("d.db")
	if c == a || d == c || first == second || len(first) != 32 {
		t.Fatalf("put ids %q, %q: the copies do not all differ", first, second)
	}
	if _, n, err := s.Info(ctx); err != nil || n != serial {
		t.Fatalf("serial %d after new put ids, want %d (%v)", n, serial, err)
	}
}
