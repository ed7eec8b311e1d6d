package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
)

// TestArtifactNamesStayInTheAttemptDirectory: the outputs an agent
// collects and the inputs it places have names that cannot leave the
// attempt's directory (protocol.CheckArtifactName): a pattern reaching
// out of it, or a file whose name holds a backslash, fails the collection
// naming it; an input path that leaves the directory is refused.
func TestArtifactNamesStayInTheAttemptDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "attempt")
	for name, content := range map[string]string{
		filepath.Join(root, "secret"):           "outside",
		filepath.Join(dir, "out", "r.txt"):      "ok",
		filepath.Join(dir, "odd", `a\b`):        "odd",
		filepath.Join(dir, "odd", "plain.txt"):  "plain",
		filepath.Join(dir, "deep", "x", "y.md"): "deep",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"loot": root, "proc": "/proc", "link.txt": "out/r.txt",
		"out.db": filepath.Join(root, "secret"), "gone.txt": "nowhere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		patterns []string
		want     string // a part of the error; "" = collected
		names    []string
	}{
		{[]string{"out/*", "deep/*/*.md"}, "", []string{"deep/x/y.md", "out/r.txt"}},
		{[]string{"../secret"}, `output pattern "../secret" has a "." or ".." part`, nil},
		{[]string{"out/../../secret"}, `has a "." or ".." part`, nil},
		{[]string{"odd/*"}, `output "odd/a\\b", which "odd/*" matches, holds a backslash`, nil},
		{[]string{"/etc/passwd"}, "is absolute", nil},
		// a link inside the directory to a folder outside it (the work
		// folder's spool, /proc) reads nothing there
		{[]string{"loot/secret"}, `declared output "loot/secret" matched no file`, nil},
		{[]string{"loot/*"}, `declared output "loot/*" matched no file`, nil},
		{[]string{"proc/self/environ"}, `matched no file`, nil},
		{[]string{"link.txt"}, "link.txt is a symbolic link", nil},
		// a link out of the directory, or to nothing: Glob matches
		// nothing through it, and the error says it is a link
		{[]string{"out.db"}, `declared output "out.db" matched no regular file in the attempt's directory: out.db is a symbolic link`, nil},
		{[]string{"gone.txt"}, "gone.txt is a symbolic link", nil},
	} {
		outs, err := collectOutputs(dir, c.patterns, filepath.Join(root, "stage"), 0)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.patterns, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v (outputs %+v); want an error saying %q", c.patterns, err, outs, c.want)
		case c.want == "":
			var names []string
			for _, o := range outs {
				names = append(names, o.ref.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.names, ",") {
				t.Errorf("%q: collected %q; want %q", c.patterns, names, c.names)
			}
			for _, o := range outs {
				if !strings.HasPrefix(o.path, filepath.Join(root, "stage")+"/") {
					t.Errorf("%s: not copied into the stage: %s", o.ref.Name, o.path)
				}
			}
		}
	}
	for path, ok := range map[string]bool{"in/a.txt": true, "../x": false, "in/../../x": false, "/etc/passwd": false, `in\..\x`: false, "in//x": false, "in/\x00": false} {
		_, err := InputPath(dir, protocol.InputFile{Path: path})
		if (err == nil) != ok {
			t.Errorf("InputPath(%q) = %v; want ok %t", path, err, ok)
		}
	}
}

// TestOutputsAreCopies: what the agent spools and uploads is a copy taken
// when the attempt ended: writing the output file after (a process the
// attempt left behind, a hard link the attempt made to a file of its own)
// changes neither the copy nor its hash, and an output over the limit is
// not copied at all.
func TestOutputsAreCopies(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, stage := filepath.Join(root, "attempt"), filepath.Join(root, "stage")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	outs, err := collectOutputs(dir, []string{"out.txt", "big.bin"}, stage, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[0].ref.Name != "big.bin" || outs[0].path != "" || outs[0].ref.Size != 100 {
		t.Fatalf("outputs %+v: want big.bin not copied, with its size", outs)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("changed later"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(outs[1].path)
	if err != nil || string(got) != "first" {
		t.Fatalf("the copy holds %q (%v); want what the attempt left, %q", got, err, "first")
	}
	if outs[1].ref.Size != 5 {
		t.Errorf("size %d, want 5", outs[1].ref.Size)
	}
}

// entriesBelow lists what is below dir, as sorted "/"-separated relative
// paths (folders with a trailing "/").
func entriesBelow(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestTidyAttempt: what an ended attempt leaves in the work folder, by
// how it ended. Once its result is accepted its empty logs go, then its
// log folder and its task's (with the address file) when nothing else is
// there; its scratch folder goes with what it holds when it succeeded, and
// otherwise only when empty; the copies of its outputs always go. Until a
// result is accepted its logs stay, empty or not.
func TestTidyAttempt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                string
		stdout, stderr      string // "" an empty log; "-" no log (the command never started)
		scratch             bool   // the command left a file in its scratch folder
		outputs             bool   // the task declares outputs (a staged copy exists)
		other               bool   // attempt 1 of the task kept a log
		accepted, succeeded bool
		want                []string
	}{
		{name: "quiet success", accepted: true, succeeded: true,
			want: nil},
		{name: "quiet failure", accepted: true,
			want: nil},
		{name: "success with output", stdout: "hello\n", scratch: true, accepted: true, succeeded: true,
			want: []string{"logs/", "logs/t.x.2/", "logs/t.x.2/2/", "logs/t.x.2/2/stdout", "logs/t.x.2/address"}},
		{name: "failure that left a file", stderr: "boom\n", scratch: true, accepted: true,
			want: []string{"logs/", "logs/t.x.2/", "logs/t.x.2/2/", "logs/t.x.2/2/stderr", "logs/t.x.2/address",
				"scratch/", "scratch/t.x.2/", "scratch/t.x.2/2/", "scratch/t.x.2/2/left.txt"}},
		{name: "quiet success beside an earlier attempt's log", other: true, accepted: true, succeeded: true,
			want: []string{"logs/", "logs/t.x.2/", "logs/t.x.2/1/", "logs/t.x.2/1/stderr", "logs/t.x.2/address"}},
		{name: "quiet success with outputs", outputs: true, scratch: true, accepted: true, succeeded: true,
			want: nil},
		{name: "refused before its command started", stdout: "-", stderr: "-", accepted: true,
			want: nil},
		{name: "not delivered: the empty logs stay", scratch: true, succeeded: true,
			want: []string{"logs/", "logs/t.x.2/", "logs/t.x.2/2/", "logs/t.x.2/2/stderr", "logs/t.x.2/2/stdout", "logs/t.x.2/address",
				"scratch/", "scratch/t.x.2/", "scratch/t.x.2/2/", "scratch/t.x.2/2/left.txt"}},
		{name: "not delivered, nothing in its scratch folder", succeeded: true,
			want: []string{"logs/", "logs/t.x.2/", "logs/t.x.2/2/", "logs/t.x.2/2/stderr", "logs/t.x.2/2/stdout", "logs/t.x.2/address"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			asg := protocol.Assignment{Task: "t.x[2]", Attempt: 2}
			paths := pathsFor(work, asg)
			for _, d := range []string{"logs", "scratch", "staging"} {
				if err := os.Mkdir(filepath.Join(work, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if c.other {
				earlier := pathsFor(work, protocol.Assignment{Task: asg.Task, Attempt: 1})
				o, e, err := openLogs(earlier, asg.Task)
				if err != nil {
					t.Fatal(err)
				}
				e.WriteString("attempt 1 failed\n")
				o.Close()
				e.Close()
				if err := tidyAttempt(earlier, asg.Task, true, false, false); err != nil {
					t.Fatal(err)
				}
			}
			if err := makeFolder(paths.scratch); err != nil {
				t.Fatal(err)
			}
			if c.stdout != "-" {
				o, e, err := openLogs(paths, asg.Task)
				if err != nil {
					t.Fatal(err)
				}
				o.WriteString(c.stdout)
				e.WriteString(c.stderr)
				o.Close()
				e.Close()
			}
			if c.scratch {
				os.WriteFile(filepath.Join(paths.scratch, "left.txt"), []byte("x"), 0o600)
			}
			if c.outputs {
				if _, _, _, err := copyToStage(strings.NewReader("out"), paths.stage, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := tidyAttempt(paths, asg.Task, c.accepted, c.succeeded, c.outputs); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entriesBelow(t, work) {
				if e != "logs/" && e != "scratch/" && e != "staging/" {
					got = append(got, e)
				}
			}
			var want []string
			for _, e := range c.want {
				if e != "logs/" && e != "scratch/" {
					want = append(want, e)
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("left\n  %q\nwant\n  %q", got, want)
			}
			if slices.Contains(got, "logs/t.x.2/address") {
				if b, _ := os.ReadFile(paths.address); string(b) != "t.x[2]\n" {
					t.Errorf("address file %q", b)
				}
			}
		})
	}
}

// TestLogArtifacts: an empty log is named as the empty blob without being
// read, and has no file to upload; a log with content is hashed and can be
// uploaded from its file; a log that is not a regular file is left out,
// with why.
func TestLogArtifacts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		make   func(path string) error
		want   string // hash; "" left out
		size   int64
		upload bool
	}{
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o600) }, artifact.EmptyHash, 0, false},
		{"with content", func(p string) error { return os.WriteFile(p, []byte("abc"), 0o600) },
			"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 3, true},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "", 0, false},
		// no file: the command printed nothing (attemptLogs makes the file at the first byte)
		{"missing", func(string) error { return nil }, artifact.EmptyHash, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			paths := pathsFor(t.TempDir(), protocol.Assignment{Task: "task.l", Attempt: 1})
			if err := makeFolder(paths.logDir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(paths.stderr, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := c.make(paths.stdout); err != nil {
				t.Fatal(err)
			}
			refs, files, problems := logArtifacts(paths)
			byName := map[string]protocol.ArtifactRef{}
			for _, r := range refs {
				byName[r.Name] = r
			}
			if r := byName["stderr"]; r.SHA256 != artifact.EmptyHash || r.Size != 0 || r.Kind != protocol.ArtifactLog {
				t.Errorf("stderr %+v; want the empty blob", r)
			}
			r, ok := byName["stdout"]
			switch {
			case c.want == "" && (ok || problems["stdout"] == nil):
				t.Errorf("stdout %+v, problems %v; want it left out, with why", r, problems)
			case c.want != "" && (r.SHA256 != c.want || r.Size != c.size || problems != nil):
				t.Errorf("stdout %+v, problems %v; want %s of %d bytes", r, problems, c.want, c.size)
			}
			if _, has := files[artifact.EmptyHash]; has {
				t.Errorf("files %v name the empty blob", files)
			}
			if got := files[c.want] == paths.stdout; got != c.upload {
				t.Errorf("files %v; want stdout uploadable: %v", files, c.upload)
			}
		})
	}
}

// TestOpenLogsWritesTheAddressOnce: the address file is written by the
// first attempt of a task and left as it is by the next; a task's log
// folder that lost its address file (another attempt's tidying) gets it
// again.
func TestOpenLogsWritesTheAddressOnce(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	p1 := pathsFor(work, protocol.Assignment{Task: "task.a[0]", Attempt: 1})
	p2 := pathsFor(work, protocol.Assignment{Task: "task.a[0]", Attempt: 2})
	for _, p := range []attemptPaths{p1, p2} {
		o, e, err := openLogs(p, "task.a[0]")
		if err != nil {
			t.Fatal(err)
		}
		o.Close()
		e.Close()
		if fi, err := os.Stat(p.address); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("address file: %v %v", fi, err)
		}
		if fi, err := os.Stat(p.logDir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("log folder: %v %v", fi, err)
		}
	}
	if b, _ := os.ReadFile(p1.address); string(b) != "task.a[0]\n" {
		t.Errorf("address %q", b)
	}
	// Attempt 1's tidying removes the address file while attempt 2's logs
	// are there: it writes it again.
	if err := tidyAttempt(p1, "task.a[0]", true, true, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p1.address); string(b) != "task.a[0]\n" {
		t.Errorf("address after the other attempt's tidying %q", b)
	}
	got := entriesBelow(t, work)
	want := []string{"logs/", "logs/task.a.0/", "logs/task.a.0/2/", "logs/task.a.0/2/stderr", "logs/task.a.0/2/stdout", "logs/task.a.0/address"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("left %q; want %q", got, want)
	}
}

// TestMakeAndFreshFolder: makeFolder makes a folder and the missing ones
// above it (0700) and leaves one that exists as it is; freshFolder leaves
// an empty folder, whatever was there (a folder with content, a file, a
// link, which it removes, not what the link leads to). A file above the
// folder fails both.
func TestMakeAndFreshFolder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, root, dir string) // dir is root/a/b/c
		// after makeFolder and freshFolder: the entries below root ("" an
		// error, which errIs matches)
		makeLeaves, freshLeaves []string
		errIs                   error
	}{
		{name: "missing parents", setup: func(*testing.T, string, string) {},
			makeLeaves:  []string{"a/", "a/b/", "a/b/c/"},
			freshLeaves: []string{"a/", "a/b/", "a/b/c/"}},
		{name: "parent exists", setup: func(t *testing.T, root, dir string) { mkdirT(t, filepath.Dir(dir)) },
			makeLeaves:  []string{"a/", "a/b/", "a/b/c/"},
			freshLeaves: []string{"a/", "a/b/", "a/b/c/"}},
		{name: "exists with content", setup: func(t *testing.T, root, dir string) {
			mkdirT(t, filepath.Join(dir, "sub"))
			writeT(t, filepath.Join(dir, "f"))
			writeT(t, filepath.Join(dir, "sub", "g"))
		},
			makeLeaves:  []string{"a/", "a/b/", "a/b/c/", "a/b/c/f", "a/b/c/sub/", "a/b/c/sub/g"},
			freshLeaves: []string{"a/", "a/b/", "a/b/c/"}},
		{name: "a file in its place", setup: func(t *testing.T, root, dir string) {
			mkdirT(t, filepath.Dir(dir))
			writeT(t, dir)
		},
			freshLeaves: []string{"a/", "a/b/", "a/b/c/"}, errIs: syscall.ENOTDIR},
		{name: "a link to a folder in its place", setup: func(t *testing.T, root, dir string) {
			mkdirT(t, filepath.Dir(dir))
			mkdirT(t, filepath.Join(root, "elsewhere"))
			writeT(t, filepath.Join(root, "elsewhere", "kept"))
			if err := os.Symlink(filepath.Join(root, "elsewhere"), dir); err != nil {
				t.Fatal(err)
			}
		},
			makeLeaves:  []string{"a/", "a/b/", "a/b/c", "elsewhere/", "elsewhere/kept"},
			freshLeaves: []string{"a/", "a/b/", "a/b/c/", "elsewhere/", "elsewhere/kept"}},
		{name: "a file above it", setup: func(t *testing.T, root, dir string) { writeT(t, filepath.Join(root, "a")) },
			errIs: syscall.ENOTDIR},
	} {
		for _, fresh := range []bool{false, true} {
			name := c.name + "/makeFolder"
			if fresh {
				name = c.name + "/freshFolder"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				root := t.TempDir()
				dir := filepath.Join(root, "a", "b", "c")
				c.setup(t, root, dir)
				var err error
				want := c.makeLeaves
				if fresh {
					var clearing bool
					clearing, err = freshFolder(dir)
					if clearing {
						t.Errorf("clearing failed: %v", err)
					}
					want = c.freshLeaves
				} else {
					err = makeFolder(dir)
				}
				if want == nil {
					if err == nil || !errors.Is(err, c.errIs) {
						t.Fatalf("error %v; want %v", err, c.errIs)
					}
					var pe *fs.PathError
					if !errors.As(err, &pe) || !strings.HasPrefix(pe.Path, root) {
						t.Errorf("error %#v names no path", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := entriesBelow(t, root); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("left %q; want %q", got, want)
				}
				for _, d := range []string{"a", "a/b", "a/b/c"} {
					if fi, err := os.Lstat(filepath.Join(root, d)); err == nil && fi.IsDir() && fi.Mode().Perm() != 0o700 {
						t.Errorf("%s has mode %v; want 0700", d, fi.Mode().Perm())
					}
				}
			})
		}
	}
}

// TestMkdirsParentRemovedMeanwhile: a folder above the one being made
// that goes away between its mkdir and the next (another attempt's
// tidyAttempt removes its task's empty folder) is made again, up to three
// times; a fourth removal is the error.
func TestMkdirsParentRemovedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		removals int
		wantErr  bool
	}{{0, false}, {1, false}, {2, false}, {3, true}} {
		t.Run(strconv.Itoa(c.removals), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			parent := filepath.Join(root, "task")
			dir := filepath.Join(parent, "1")
			removed := 0
			var calls []string
			mkdir := func(p string, mode fs.FileMode) error {
				calls = append(calls, strings.TrimPrefix(p, root))
				err := os.Mkdir(p, mode)
				if err == nil && p == parent && removed < c.removals {
					removed++
					if err := syscall.Rmdir(parent); err != nil {
						t.Fatal(err)
					}
				}
				return err
			}
			err := mkdirs(dir, mkdir)
			if c.wantErr {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("error %v; want ENOENT (calls %q)", err, calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v (calls %q)", err, calls)
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				t.Fatalf("not made: %v", err)
			}
			// Each round: the folder (missing parent), the parent.
			if want := 2*(c.removals+1) + 1; len(calls) != want {
				t.Errorf("%d mkdir calls %q; want %d", len(calls), calls, want)
			}
		})
	}
}

func mkdirT(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func writeT(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
