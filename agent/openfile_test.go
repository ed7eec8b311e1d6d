package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenFile: openFile makes, truncates and refuses files as
// os.OpenFile does, and its errors name the path.
func TestOpenFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		before  string // the file's content before; "-" no file, "/" a folder
		flag    int
		write   string
		want    string // the content after
		wantErr error  // errors.Is
	}{
		{name: "creates", before: "-", flag: os.O_CREATE | os.O_WRONLY | os.O_TRUNC, write: "new", want: "new"},
		{name: "truncates", before: "old content", flag: os.O_CREATE | os.O_WRONLY | os.O_TRUNC, write: "new", want: "new"},
		{name: "writes over without truncating", before: "old content", flag: os.O_WRONLY, write: "new", want: "new content"},
		{name: "exclusive creates", before: "-", flag: os.O_CREATE | os.O_EXCL | os.O_WRONLY, write: "x", want: "x"},
		{name: "exclusive on a file", before: "old", flag: os.O_CREATE | os.O_EXCL | os.O_WRONLY, want: "old", wantErr: fs.ErrExist},
		{name: "missing without O_CREATE", before: "-", flag: os.O_WRONLY, wantErr: fs.ErrNotExist},
		{name: "a folder for writing", before: "/", flag: os.O_WRONLY | os.O_TRUNC},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			switch c.before {
			case "-":
			case "/":
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.WriteFile(path, []byte(c.before), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f, err := openFile(path, c.flag, 0o600)
			if c.wantErr != nil || c.before == "/" {
				var pe *fs.PathError
				switch {
				case err == nil:
					f.Close()
					t.Fatal("opened; want an error")
				case c.wantErr != nil && !errors.Is(err, c.wantErr):
					t.Errorf("error %v; want %v", err, c.wantErr)
				case !errors.As(err, &pe) || pe.Path != path || pe.Op != "open":
					t.Errorf("error %#v; want an *fs.PathError of open naming %s", err, path)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if f.Name() != path {
					t.Errorf("Name() = %q", f.Name())
				}
				if _, err := f.WriteString(c.write); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if c.want == "" {
				return
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != c.want {
				t.Errorf("content %q, %v; want %q", b, err, c.want)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o600 {
				t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
			}
		})
	}
}
