package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestCommandPaths: commandPaths finds a bare name as lookPath does and
// checks only the file it found the next time, searching again when that
// file went away or is no longer executable; a program installed in an
// earlier PATH folder meanwhile is not seen (a shell's command hash does
// the same). Another PATH or directory is another entry; a name with a
// "/" and a name not found are not remembered.
func TestCommandPaths(t *testing.T) {
	t.Parallel()
	type step struct {
		do    func(t *testing.T, bins []string) // before the look-up
		argv0 string
		path  []int  // the PATH: indexes of bins
		dir   int    // the directory: an index of bins
		want  string // "<bin index>/<name>", or "" for an error
	}
	install := func(bin int, name string, mode os.FileMode) func(*testing.T, []string) {
		return func(t *testing.T, bins []string) {
			p := filepath.Join(bins[bin], name)
			if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(bin int, name string) func(*testing.T, []string) {
		return func(t *testing.T, bins []string) {
			if err := os.Remove(filepath.Join(bins[bin], name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	both := func(t *testing.T, bins []string) {
		install(0, "tool", 0o755)(t, bins)
		install(1, "tool", 0o755)(t, bins)
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"found, then remembered: an earlier install is not seen", []step{
			{do: install(1, "tool", 0o755), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
			{do: install(0, "tool", 0o755), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
		}},
		{"the remembered file removed: found elsewhere", []step{
			{do: both, argv0: "tool", path: []int{0, 1}, want: "0/tool"},
			{do: remove(0, "tool"), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
			{do: install(0, "tool", 0o755), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
		}},
		{"the remembered file no longer executable: found elsewhere", []step{
			{do: both, argv0: "tool", path: []int{0, 1}, want: "0/tool"},
			{do: install(0, "tool", 0o644), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
		}},
		{"the remembered file removed, none elsewhere: not found", []step{
			{do: install(1, "tool", 0o755), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
			{do: remove(1, "tool"), argv0: "tool", path: []int{0, 1}, want: ""},
			{do: install(0, "tool", 0o755), argv0: "tool", path: []int{0, 1}, want: "0/tool"},
		}},
		{"another PATH, another answer", []step{
			{do: both, argv0: "tool", path: []int{0}, want: "0/tool"},
			{argv0: "tool", path: []int{1}, want: "1/tool"},
			{argv0: "tool", path: []int{1, 0}, want: "1/tool"},
			{argv0: "tool", path: []int{0}, want: "0/tool"},
		}},
		{"another directory, another entry", []step{
			{do: install(1, "tool", 0o755), argv0: "tool", path: []int{0, 1}, dir: 0, want: "1/tool"},
			{do: install(0, "tool", 0o755), argv0: "tool", path: []int{0, 1}, dir: 1, want: "0/tool"},
			{argv0: "tool", path: []int{0, 1}, dir: 0, want: "1/tool"},
		}},
		{"not found is not remembered", []step{
			{argv0: "tool", path: []int{0, 1}, want: ""},
			{do: install(1, "tool", 0o755), argv0: "tool", path: []int{0, 1}, want: "1/tool"},
		}},
		{"a name with a slash is looked at each time", []step{
			{do: install(1, "tool", 0o755), argv0: "./tool", path: []int{0}, dir: 1, want: "1/tool"},
			{do: remove(1, "tool"), argv0: "./tool", path: []int{0}, dir: 1, want: ""},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			bins := []string{filepath.Join(root, "0"), filepath.Join(root, "1")}
			for _, b := range bins {
				mkdirT(t, b)
			}
			var cp commandPaths
			for i, s := range c.steps {
				if s.do != nil {
					s.do(t, bins)
				}
				var path []string
				for _, b := range s.path {
					path = append(path, bins[b])
				}
				got, err := cp.lookPath(s.argv0, bins[s.dir], strings.Join(path, string(os.PathListSeparator)))
				want := ""
				if s.want != "" {
					want = filepath.Join(root, s.want)
				}
				switch {
				case want == "" && err == nil:
					t.Fatalf("step %d: found %s; want an error", i, got)
				case want != "" && (err != nil || got != want):
					t.Fatalf("step %d: %q, %v; want %s", i, got, err, want)
				}
			}
		})
	}
}

// TestCommandPathsNil: a nil commandPaths is lookPath.
func TestCommandPathsNil(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	writeT(t, filepath.Join(bin, "tool"))
	os.Chmod(filepath.Join(bin, "tool"), 0o755)
	var cp *commandPaths
	if p, err := cp.lookPath("tool", "/", bin); err != nil || p != filepath.Join(bin, "tool") {
		t.Errorf("%q, %v", p, err)
	}
}

// TestCommandPathsBounded: a commandPaths holds at most maxCommandPaths
// entries, however many PATHs it saw.
func TestCommandPathsBounded(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	writeT(t, filepath.Join(bin, "tool"))
	os.Chmod(filepath.Join(bin, "tool"), 0o755)
	var cp commandPaths
	for i := range 3 * maxCommandPaths {
		path := filepath.Join(bin, "none-"+strconv.Itoa(i)) + string(os.PathListSeparator) + bin
		if _, err := cp.lookPath("tool", "/", path); err != nil {
			t.Fatal(err)
		}
		if n := len(cp.found); n > maxCommandPaths {
			t.Fatalf("%d entries", n)
		}
	}
}

// TestCommandPathsConcurrent: attempts look commands up at once (run it
// with -race) while the remembered file comes and goes; each answer is a
// file that was there, or "not found".
func TestCommandPathsConcurrent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bins := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	for _, b := range bins {
		mkdirT(t, b)
	}
	for _, name := range []string{"one", "two"} {
		p := filepath.Join(bins[1], name)
		writeT(t, p)
		os.Chmod(p, 0o755)
	}
	paths := []string{bins[0] + string(os.PathListSeparator) + bins[1], bins[1]}
	var cp commandPaths
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() { // the earlier folder's "one" comes and goes
		p := filepath.Join(bins[0], "one")
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
			os.Remove(p)
		}
	})
	var workers sync.WaitGroup
	for g := range 8 {
		workers.Go(func() {
			for i := range 300 {
				name := []string{"one", "two"}[(g+i)%2]
				got, err := cp.lookPath(name, "/", paths[i%2])
				if err != nil {
					// b's are always there.
					t.Errorf("%s: %v", name, err)
					return
				}
				if got != filepath.Join(bins[1], name) && got != filepath.Join(bins[0], name) {
					t.Errorf("%s: %s", name, got)
					return
				}
			}
		})
	}
	workers.Wait()
	close(stop)
	wg.Wait()
}
