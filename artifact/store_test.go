package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// newStore returns a store in a fresh temporary folder taking blobs of up
// to max bytes.
func newStore(t testing.TB, max int64) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "artifacts"), max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hashOf returns the hash of b as the store names it.
func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// put stores data in s, failing the test on an error.
func put(t testing.TB, s *Store, data []byte) PutResult {
	t.Helper()
	res, err := s.Put(context.Background(), hashOf(data), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// files lists the paths, relative to dir and slash-separated, of everything
// under dir that is not a folder.
func files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// noTemp fails the test if anything is left in the store's tmp/.
func noTemp(t testing.TB, s *Store) {
	t.Helper()
	if left := files(t, filepath.Join(s.Dir(), TempDir)); len(left) != 0 {
		t.Errorf("tmp/ holds %q, want nothing", left)
	}
}

// walk returns what Walk reports, as "hash size" lines.
func walk(t testing.TB, s *Store) []string {
	t.Helper()
	var out []string
	err := s.Walk(func(hash string, size int64) error {
		out = append(out, fmt.Sprintf("%s %d", hash, size))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpen(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		dir  string
		max  int64
		err  string // "" when Open succeeds
	}{
		{"fresh", filepath.Join(root, "a", "artifacts"), 1, ""},
		{"again", filepath.Join(root, "a", "artifacts"), 1 << 20, ""},
		{"no folder", "", 1, "no folder"},
		{"zero cap", filepath.Join(root, "b"), 0, "at least 1 byte, not 0"},
		{"negative cap", filepath.Join(root, "b"), -5, "not -5"},
		{"a file in the way", filepath.Join(file, "artifacts"), 1, "not a directory"},
	}
	for _, c := range cases {
		s, err := Open(c.dir, c.max)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: Open = %v; want an error containing %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.Dir() != c.dir || s.MaxSize() != c.max {
			t.Errorf("%s: Dir, MaxSize = %q, %d", c.name, s.Dir(), s.MaxSize())
		}
		for _, d := range []string{BlobDir, TempDir} {
			if fi, err := os.Stat(filepath.Join(c.dir, d)); err != nil || !fi.IsDir() {
				t.Errorf("%s: %s/: %v", c.name, d, err)
			}
		}
	}
}

func TestPath(t *testing.T) {
	t.Parallel()
	s := newStore(t, 10)
	h := hashOf([]byte("x"))
	if got, want := s.Path(h), filepath.Join(s.Dir(), "sha256", h[:2], h); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "../../etc/passwd", strings.ToUpper(h), h[:63], "sha256:" + h} {
		if got := s.Path(bad); got != "" {
			t.Errorf("Path(%q) = %q, want \"\"", bad, got)
		}
	}
}

func TestStatAndOpenBlob(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	data := []byte("a log line\n")
	held := put(t, s, data).Hash
	absent := hashOf([]byte("other"))
	// A folder where a blob would be is not a blob.
	folder := hashOf([]byte("folder"))
	if err := os.MkdirAll(s.Path(folder), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		hash     string
		ok       bool
		size     int64
		sentinel error // nil, ErrNotFound or ErrInvalidHash
	}{
		{"held", held, true, int64(len(data)), nil},
		{"absent", absent, false, 0, ErrNotFound},
		{"a folder", folder, false, 0, ErrNotFound},
		{"invalid", "abc", false, 0, ErrInvalidHash},
	}
	for _, c := range cases {
		size, ok, err := s.Stat(c.hash)
		wantStatErr := c.sentinel == ErrInvalidHash
		if ok != c.ok || size != c.size || (err != nil) != wantStatErr || (wantStatErr && !errors.Is(err, ErrInvalidHash)) {
			t.Errorf("%s: Stat = %d, %v, %v; want %d, %v", c.name, size, ok, err, c.size, c.ok)
		}
		f, size, err := s.Open(c.hash)
		if c.sentinel != nil {
			if !errors.Is(err, c.sentinel) {
				t.Errorf("%s: Open: %v; want %v", c.name, err, c.sentinel)
			}
			if c.sentinel == ErrNotFound && !strings.Contains(err.Error(), c.hash) {
				t.Errorf("%s: Open: %v does not name the hash", c.name, err)
			}
			if f != nil {
				t.Errorf("%s: Open returned a file with an error", c.name)
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Open: %v", c.name, err)
			continue
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(got, data) || size != int64(len(data)) {
			t.Errorf("%s: Open read %q (size %d), %v; want %q", c.name, got, size, err, data)
		}
	}
}

func TestMissing(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	a, b := put(t, s, []byte("a")).Hash, put(t, s, []byte("b")).Hash
	x, y, z := hashOf([]byte("x")), hashOf([]byte("y")), hashOf([]byte("z"))
	cases := []struct {
		name   string
		hashes []string
		want   []string
		err    string
	}{
		{"none asked", nil, nil, ""},
		{"all held", []string{a, b}, nil, ""},
		{"order kept", []string{z, a, x, b, y}, []string{z, x, y}, ""},
		{"each once", []string{y, x, y, a, x, y}, []string{y, x}, ""},
		{"invalid", []string{x, "XYZ"}, nil, "hash 2 of 2"},
	}
	for _, c := range cases {
		got, err := s.Missing(c.hashes)
		if c.err != "" {
			if !errors.Is(err, ErrInvalidHash) || !strings.Contains(err.Error(), c.err) || got != nil {
				t.Errorf("%s: Missing = %q, %v; want ErrInvalidHash naming %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: Missing = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestWalk(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	var want []string
	for _, d := range []string{"one", "two", "three", "four", ""} {
		res := put(t, s, []byte(d))
		want = append(want, fmt.Sprintf("%s %d", res.Hash, res.Size))
	}
	slices.Sort(want)

	// Strays, none of which is a blob.
	blobs := filepath.Join(s.Dir(), BlobDir)
	good := hashOf([]byte("stray"))
	wrongFolder := "00"
	if good[:2] == wrongFolder {
		wrongFolder = "01"
	}
	strays := map[string]string{ // path under sha256/ → contents ("/" at the end: a folder)
		"zz/notahash":                          "x",
		"zz/" + good:                           "x",
		"xyz/":                                 "",
		"AB/":                                  "",
		"readme":                               "x",
		wrongFolder + "/" + good:               "x", // right name, wrong folder
		good[:2] + "/" + strings.ToUpper(good): "x",
		good[:2] + "/" + good[:63]:             "x",
		good[:2] + "/" + good + ".partial":     "x",
		good[:2] + "/" + good + "/":            "", // a folder named like a blob
	}
	for p, data := range strays {
		full := filepath.Join(blobs, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A symbolic link named like a blob is not one either.
	linked := hashOf([]byte("linked"))
	if err := os.MkdirAll(filepath.Join(blobs, linked[:2]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.Path(hashOf([]byte("one"))), s.Path(linked)); err != nil {
		t.Fatal(err)
	}

	if got := walk(t, s); !slices.Equal(got, want) {
		t.Errorf("Walk reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// An error from fn stops the walk and comes back as it is.
	stop := errors.New("stop")
	calls := 0
	err := s.Walk(func(string, int64) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("Walk with a failing fn: %v after %d calls; want stop after 1", err, calls)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	data := []byte("to be removed")
	held := put(t, s, data).Hash
	kept := put(t, s, []byte("kept")).Hash
	cases := []struct {
		name string
		hash string
		size int64
		err  error
	}{
		{"held", held, int64(len(data)), nil},
		{"again", held, 0, nil},
		{"never held", hashOf([]byte("never")), 0, nil},
		{"invalid", "nope", 0, ErrInvalidHash},
	}
	for _, c := range cases {
		size, err := s.Remove(c.hash)
		if size != c.size || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: Remove = %d, %v; want %d, %v", c.name, size, err, c.size, c.err)
		}
	}
	if _, ok, _ := s.Stat(held); ok {
		t.Error("the removed blob is still held")
	}
	if _, ok, _ := s.Stat(kept); !ok {
		t.Error("the other blob went too")
	}
	// A removed blob can be put again.
	if res := put(t, s, data); !res.Created {
		t.Errorf("put after remove: %+v, want Created", res)
	}
}

func TestCleanTemp(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	tmp := filepath.Join(s.Dir(), TempDir)
	now := time.Now()
	leave := func(name string, age time.Duration) {
		t.Helper()
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	leave("put-old", 2*time.Hour)
	leave("put-older", 48*time.Hour)
	leave("put-new", time.Minute)
	if err := os.Mkdir(filepath.Join(tmp, "folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	blob := put(t, s, []byte("a blob")).Hash

	n, err := s.CleanTemp(time.Hour)
	if err != nil || n != 2 {
		t.Errorf("CleanTemp(1h) = %d, %v; want 2", n, err)
	}
	if got := files(t, tmp); !slices.Equal(got, []string{"put-new"}) {
		t.Errorf("after CleanTemp(1h) tmp/ holds %q, want put-new", got)
	}
	n, err = s.CleanTemp(0)
	if err != nil || n != 1 {
		t.Errorf("CleanTemp(0) = %d, %v; want 1", n, err)
	}
	if got := files(t, tmp); len(got) != 0 {
		t.Errorf("after CleanTemp(0) tmp/ holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(tmp, "folder")); err != nil {
		t.Errorf("CleanTemp removed a folder: %v", err)
	}
	if _, ok, _ := s.Stat(blob); !ok {
		t.Error("CleanTemp removed a blob")
	}
}

func TestOpenForReadingCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "artifacts")
	if _, err := OpenForReading(dir); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenForReading of a missing folder: %v; want ErrNotFound", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenForReading created %s", dir)
	}
	w, err := Open(dir, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	res, err := w.Put(context.Background(), hashOf([]byte("x")), strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenForReading(dir)
	if err != nil {
		t.Fatal(err)
	}
	if size, ok, err := r.Stat(res.Hash); !ok || size != 1 || err != nil {
		t.Errorf("Stat = %d, %v, %v", size, ok, err)
	}
	if _, err := r.Put(context.Background(), hashOf([]byte("y")), strings.NewReader("y")); err == nil {
		t.Errorf("Put on a store opened for reading succeeded")
	}
}
