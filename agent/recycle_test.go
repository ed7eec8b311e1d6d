package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wdc-dev/wdc/protocol"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestInodePoolFiles: a file put back is handed out again (the same
// inode) holding only what its new writer wrote; an exclusive write over
// an existing file changes nothing and keeps the pool's file; beyond its
// limit the pool removes; a nil pool makes and removes.
func TestInodePoolFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := newInodePool(filepath.Join(dir, ".free"))
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a")
	if err := p.writeFile(a, []byte("a longer content\n"), true); err != nil {
		t.Fatal(err)
	}
	ino := inode(t, a)
	p.put(poolFile, a)
	if _, err := os.Lstat(a); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file put back is still at its path: %v", err)
	}
	b := filepath.Join(dir, "b")
	if err := p.writeFile(b, []byte("b\n"), true); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, b); got != ino {
		t.Errorf("b is inode %d, want the recycled %d", got, ino)
	}
	if data, _ := os.ReadFile(b); string(data) != "b\n" {
		t.Errorf("b holds %q, want only what was written", data)
	}
	if fi, _ := os.Lstat(b); fi.Mode().Perm() != 0o600 {
		t.Errorf("b has mode %v, want 0600", fi.Mode().Perm())
	}

	// Exclusive over an existing file: refused, nothing changed, the
	// pool's file kept for the next one.
	p.put(poolFile, b)
	c := filepath.Join(dir, "c")
	if err := os.WriteFile(c, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.writeFile(c, []byte("x"), true); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("exclusive write over c: %v, want fs.ErrExist", err)
	}
	if data, _ := os.ReadFile(c); string(data) != "keep" {
		t.Errorf("c holds %q after a refused write", data)
	}
	if len(p.free[poolFile]) != 1 {
		t.Errorf("%d free files after a refused write, want 1", len(p.free[poolFile]))
	}
	// An empty file (a group's record) from the pool is empty.
	g := filepath.Join(dir, "g")
	if err := p.emptyFile(g); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(g); fi.Size() != 0 {
		t.Errorf("a recycled empty file has %d bytes", fi.Size())
	}

	// Not over a folder: the folder stays, and so does the pool's file.
	p.put(poolFile, g)
	folder := filepath.Join(dir, "folder")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.emptyFile(folder); err == nil {
		t.Error("an empty file was put over a folder")
	}
	if fi, err := os.Lstat(folder); err != nil || !fi.IsDir() {
		t.Errorf("the folder is %v, %v", fi, err)
	}
	if len(p.free[poolFile]) != 1 {
		t.Errorf("%d free files after a write over a folder, want 1", len(p.free[poolFile]))
	}
	if err := p.emptyFile(g); err != nil {
		t.Fatal(err)
	}

	// Past its limit the pool removes what is put back.
	p.limit = 0
	p.put(poolFile, g)
	if _, err := os.Lstat(g); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file put into a full pool is still there: %v", err)
	}
	if entries, _ := os.ReadDir(p.dir); len(entries) != 0 {
		t.Errorf("a full pool took a file: %v", entries)
	}

	// A nil pool makes and removes.
	var none *inodePool
	n := filepath.Join(dir, "n")
	if err := none.writeFile(n, []byte("n"), true); err != nil {
		t.Fatal(err)
	}
	if err := none.writeFile(n, []byte("m"), true); !errors.Is(err, fs.ErrExist) {
		t.Errorf("exclusive write over n without a pool: %v", err)
	}
	none.putFile(n)
	if _, err := os.Lstat(n); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("without a pool a file put back stays: %v", err)
	}
}

// TestSpoolRecyclesEntries: a decided entry's folder and its result.json
// are the next entry's, which holds the next result alone; an entry with
// blobs gives them up before it goes back to the pool; the pool's folder
// is no entry to a later agent.
func TestSpoolRecyclesEntries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	sp, err := openSpool(root, spoolSession{ServerURL: "http://127.0.0.1:1", WorkerID: "w-1", SessionToken: "s"})
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "stdout")
	if err := os.WriteFile(log, []byte("printed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	three := 3
	first, _, err := sp.put(7, protocol.ResultRequest{Task: "task.a", Attempt: 1, ExitCode: &three}, map[string]string{"h1": log})
	if err != nil {
		t.Fatal(err)
	}
	dirIno, fileIno := inode(t, first), inode(t, filepath.Join(first, "result.json"))
	sp.recycle(first, true)
	if _, err := os.Lstat(first); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a recycled entry is still at its path: %v", err)
	}
	if data, _ := os.ReadFile(log); string(data) != "printed\n" {
		t.Errorf("the attempt's log reads %q after its entry was recycled", data)
	}
	second, _, err := sp.put(8, protocol.ResultRequest{Task: "task.b", Attempt: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inode(t, second) != dirIno || inode(t, filepath.Join(second, "result.json")) != fileIno {
		t.Errorf("the second entry did not reuse the first's folder and result.json")
	}
	if _, err := os.Lstat(filepath.Join(second, "blobs")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the recycled entry kept its blobs: %v", err)
	}
	e, err := readEntry(second)
	if err != nil {
		t.Fatal(err)
	}
	if e.Token != 8 || e.Result.Task != "task.b" || e.Result.ExitCode != nil || len(e.Result.Artifacts) != 0 {
		t.Errorf("the second entry reads %+v", e)
	}
	sp.lock.Close() // the agent is gone: its folder is an orphan's
	sp.recycle(second, false)
	os2 := orphans(root)
	if len(os2) != 1 {
		t.Fatalf("%d orphan folders, want 1", len(os2))
	}
	defer os2[0].lock.Close()
	if len(os2[0].entries) != 0 {
		t.Errorf("a stopped agent's pool is taken for entries: %v", os2[0].entries)
	}
}

// TestSpoolPutReplacesAnEarlierTry: an entry an earlier try of the same
// attempt left at the token's path (with or without its blobs, empty, or
// something else than a folder) is replaced by the new one, which alone
// is there; nothing is left beside it.
func TestSpoolPutReplacesAnEarlierTry(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		left  func(t *testing.T, entry string)
		files bool
	}{
		{"nothing", func(*testing.T, string) {}, false},
		{"nothing, with files", func(*testing.T, string) {}, true},
		{"an entry with blobs", func(t *testing.T, entry string) {
			mkdirT(t, filepath.Join(entry, "blobs"))
			writeT(t, filepath.Join(entry, "blobs", "old"))
			writeT(t, filepath.Join(entry, "result.json"))
		}, false},
		{"an empty folder", func(t *testing.T, entry string) { mkdirT(t, entry) }, true},
		{"a file", func(t *testing.T, entry string) { writeT(t, entry) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			sp, err := openSpool(root, spoolSession{ServerURL: "http://127.0.0.1:1", WorkerID: "w-1", SessionToken: "s"})
			if err != nil {
				t.Fatal(err)
			}
			defer sp.close()
			c.left(t, filepath.Join(sp.dir, "9"))
			var files map[string]string
			if c.files {
				log := filepath.Join(t.TempDir(), "stdout")
				writeT(t, log)
				files = map[string]string{"h1": log}
			}
			entry, blobs, err := sp.put(9, protocol.ResultRequest{Task: "task.c", Attempt: 4}, files)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"9/", "9/result.json"}
			if c.files {
				want = []string{"9/", "9/blobs/", "9/blobs/h1", "9/result.json"}
				if b, err := os.ReadFile(blobs["h1"]); err != nil || string(b) != "x" {
					t.Errorf("blob %q, %v", b, err)
				}
			}
			var got []string
			for _, e := range entriesBelow(t, sp.dir) {
				if e != "lock" && e != "session.json" && e != ".free/" {
					got = append(got, e)
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("spool holds %q; want %q", got, want)
			}
			if e, err := readEntry(entry); err != nil || e.Token != 9 || e.Result.Task != "task.c" {
				t.Errorf("entry %+v, %v", e, err)
			}
		})
	}
}
