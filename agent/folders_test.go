package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wdc-dev/wdc/protocol"
)

// recyclingPaths returns pathsFor(work, asg) recycling through pool, with
// lock as the work folder's lock.
func recyclingPaths(work string, asg protocol.Assignment, pool *inodePool, lock *folderLock) attemptPaths {
	p := pathsFor(work, asg)
	p.pool, p.folders = pool, lock
	return p
}

// runQuiet makes an attempt's folders as the agent does (prepare's
// scratch folder, then the logs), writes stderr to its stderr log and
// leaves, when stray is set, a file in its scratch folder; then tidies it
// as accepted.
func runQuiet(t *testing.T, p attemptPaths, task, stderr string, succeeded, stray bool) {
	t.Helper()
	if clearing, err := makeScratchFolder(p); err != nil || clearing {
		t.Fatalf("scratch folder of %s: %v (clearing %v)", task, err, clearing)
	}
	o, e, err := openLogs(p, task)
	if err != nil {
		t.Fatal(err)
	}
	e.WriteString(stderr)
	o.Close()
	e.Close()
	if stray {
		writeT(t, filepath.Join(p.scratch, "left.txt"))
	}
	if err := tidyAttempt(p, task, true, succeeded, false); err != nil {
		t.Fatal(err)
	}
}

// TestTaskFoldersRecycled: with a pool and the work folder's lock, the
// folders a quiet attempt leaves (its log folder, its task's log folder
// with the address file, its task's scratch folder) are the next task's,
// same inodes, the address file holding the next task's address; its
// scratch folder and its logs are never recycled; a task folder that
// holds anything else (another attempt's kept log, a file left in the
// scratch folder) stays where it is, with what it holds.
func TestTaskFoldersRecycled(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	mkdirT(t, filepath.Join(work, "spool"))
	pool, err := newInodePool(filepath.Join(work, "spool", ".free"))
	if err != nil {
		t.Fatal(err)
	}
	lock := openFolderLock(work)
	defer lock.close()

	a := recyclingPaths(work, protocol.Assignment{Task: "task.a", Attempt: 1}, pool, lock)
	if clearing, err := makeScratchFolder(a); err != nil || clearing {
		t.Fatal(err, clearing)
	}
	o, e, err := openLogs(a, "task.a")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]uint64{
		"log folder": inode(t, a.logDir), "task log folder": inode(t, filepath.Dir(a.logDir)),
		"address": inode(t, a.address), "task scratch folder": inode(t, filepath.Dir(a.scratch)),
	}
	o.Close()
	e.Close()
	if err := tidyAttempt(a, "task.a", true, true, false); err != nil {
		t.Fatal(err)
	}
	// In the pool: the two folders and the task's log folder, not the
	// scratch folder nor the logs (removed: inode numbers may come again,
	// so what is there is what tells).
	if n, l := len(pool.free[poolFolder]), len(pool.free[poolTaskLogs]); n != 2 || l != 1 || len(pool.free[poolFile]) != 0 {
		t.Errorf("the pool holds %d folders, %d task log folders, %d files; want 2, 1, 0", n, l, len(pool.free[poolFile]))
	}
	if got := entriesBelow(t, pool.dir); strings.Join(got, " ") != "d1/ d3/ l2/ l2/address" {
		t.Errorf("the pool's folder holds %q", got)
	}
	if got := entriesBelow(t, filepath.Join(work, "logs")); len(got) != 0 {
		t.Errorf("a quiet attempt left %q in logs/", got)
	}
	if got := entriesBelow(t, filepath.Join(work, "scratch")); len(got) != 0 {
		t.Errorf("a quiet attempt left %q in scratch/", got)
	}

	b := recyclingPaths(work, protocol.Assignment{Task: "task.b[3]", Attempt: 2}, pool, lock)
	if clearing, err := makeScratchFolder(b); err != nil || clearing {
		t.Fatal(err, clearing)
	}
	o, e, err = openLogs(b, "task.b[3]")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	defer e.Close()
	for what, got := range map[string]uint64{
		"log folder": inode(t, b.logDir), "task log folder": inode(t, filepath.Dir(b.logDir)),
		"address": inode(t, b.address), "task scratch folder": inode(t, filepath.Dir(b.scratch)),
	} {
		if got != inodes[what] {
			t.Errorf("the next task's %s is inode %d, want the recycled %d", what, got, inodes[what])
		}
	}
	if data, _ := os.ReadFile(b.address); string(data) != "task.b[3]\n" {
		t.Errorf("the recycled address file holds %q", data)
	}
	for _, d := range []string{b.logDir, filepath.Dir(b.logDir), filepath.Dir(b.scratch), b.scratch} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a folder of mode 0700", d, fi, err)
		}
	}

	// Task c: attempt 1 keeps its stderr and leaves a file in its scratch
	// folder; attempt 2 ends quietly and gives back only its own log
	// folder.
	c1 := recyclingPaths(work, protocol.Assignment{Task: "task.c", Attempt: 1}, pool, lock)
	runQuiet(t, c1, "task.c", "boom\n", false, true)
	c2 := recyclingPaths(work, protocol.Assignment{Task: "task.c", Attempt: 2}, pool, lock)
	runQuiet(t, c2, "task.c", "", true, false)
	want := []string{"logs/task.c/", "logs/task.c/1/", "logs/task.c/1/stderr", "logs/task.c/address",
		"scratch/task.c/", "scratch/task.c/1/", "scratch/task.c/1/left.txt"}
	var got []string
	for _, e := range entriesBelow(t, work) {
		if strings.Contains(e, "task.c") {
			got = append(got, e)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("task c left\n  %q\nwant\n  %q", got, want)
	}
	if data, _ := os.ReadFile(c1.stderr); string(data) != "boom\n" {
		t.Errorf("attempt 1's kept stderr holds %q", data)
	}
	if data, _ := os.ReadFile(c1.address); string(data) != "task.c\n" {
		t.Errorf("task c's address file holds %q", data)
	}

	// A stray file in a task's scratch folder (an unconfined command's):
	// the folder stays with it.
	d := recyclingPaths(work, protocol.Assignment{Task: "task.d", Attempt: 1}, pool, lock)
	if _, err := makeScratchFolder(d); err != nil {
		t.Fatal(err)
	}
	writeT(t, filepath.Join(filepath.Dir(d.scratch), "stray"))
	if err := tidyAttempt(d, "task.d", true, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(d.scratch), "stray")); err != nil {
		t.Errorf("the stray file went with its folder: %v", err)
	}
}

// TestTaskFoldersRecycledConcurrently: two agents of one work folder (two
// pools, two descriptors of its lock) run attempts of the same tasks at
// once, each attempt on either, half of them keeping a stderr log: every
// attempt finds its folders, no kept log goes into a pool, and every task
// folder left holds its own address.
func TestTaskFoldersRecycledConcurrently(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	const tasks, attempts = 8, 24
	var wg sync.WaitGroup
	for agentN := range 2 {
		mkdirT(t, filepath.Join(work, "spool", fmt.Sprint(agentN)))
		pool, err := newInodePool(filepath.Join(work, "spool", fmt.Sprint(agentN), ".free"))
		if err != nil {
			t.Fatal(err)
		}
		lock := openFolderLock(work)
		defer lock.close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; n <= attempts; n++ {
				if n%2 != agentN {
					continue
				}
				for i := range tasks {
					task := fmt.Sprintf("task.t[%d]", i)
					p := recyclingPaths(work, protocol.Assignment{Task: task, Attempt: n}, pool, lock)
					if _, err := makeScratchFolder(p); err != nil {
						t.Error(err)
						return
					}
					o, e, err := openLogs(p, task)
					if err != nil {
						t.Error(err)
						return
					}
					if n%4 < 2 {
						e.WriteString(task + " kept\n")
					}
					o.Close()
					e.Close()
					if err := tidyAttempt(p, task, true, true, false); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range tasks {
		task := fmt.Sprintf("task.t[%d]", i)
		for n := 1; n <= attempts; n++ {
			p := pathsFor(work, protocol.Assignment{Task: task, Attempt: n})
			data, err := os.ReadFile(p.stderr)
			if n%4 < 2 && string(data) != task+" kept\n" {
				t.Errorf("%s attempt %d: kept stderr %q, %v", task, n, data, err)
			}
			if n%4 >= 2 && err == nil {
				t.Errorf("%s attempt %d: its empty stderr stayed", task, n)
			}
			if n == 1 {
				if a, err := os.ReadFile(p.address); string(a) != task+"\n" {
					t.Errorf("%s: address file %q, %v", task, a, err)
				}
			}
		}
	}
}
