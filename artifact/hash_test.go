package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// Known SHA-256 values (FIPS 180-2 examples).
const (
	emptyHash = EmptyHash
	abcHash   = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
)

func TestParseHash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in  string
		err string // "" when valid
	}{
		{abcHash, ""},
		{emptyHash, ""},
		{strings.Repeat("0", 64), ""},
		{strings.Repeat("f", 64), ""},
		{"", "empty"},
		{strings.ToUpper(abcHash), "lowercase"},
		{abcHash[:63] + "D", "lowercase"},
		{"sha256:" + abcHash, `"sha256:" prefix`},
		{"SHA256:" + abcHash, `"sha256:" prefix`},
		{abcHash[:63], "63 bytes long"},
		{abcHash + "0", "65 bytes long"},
		{" " + abcHash[1:], `byte 1 is ' '`},
		{abcHash[:63] + "\n", `byte 64 is '\n'`},
		{abcHash[:10] + "g" + abcHash[11:], `byte 11 is 'g'`},
		{abcHash[:62] + "é", "byte 63 is 'é'"},
		{abcHash[:62] + "\xff\xfe", "byte 63 is '\uFFFD'"},
		{strings.Repeat("x", 1000), "1000 bytes long"},
	}
	for _, c := range cases {
		got, err := ParseHash(c.in)
		if c.err == "" {
			if err != nil || got != c.in {
				t.Errorf("ParseHash(%q) = %q, %v; want it unchanged", c.in, got, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidHash) || !strings.Contains(err.Error(), c.err) || got != "" {
			t.Errorf("ParseHash(%.70q) = %q, %v; want ErrInvalidHash saying %q", c.in, got, err, c.err)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("ParseHash(%.70q): the error is %d bytes long", c.in, len(err.Error()))
		}
	}
}

func TestHashReaderAndFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		data string
		hash string
	}{
		{"", emptyHash},
		{"abc", abcHash},
	}
	for _, c := range cases {
		h, n, err := HashReader(strings.NewReader(c.data))
		if err != nil || h != c.hash || n != int64(len(c.data)) {
			t.Errorf("HashReader(%q) = %s, %d, %v; want %s", c.data, h, n, err, c.hash)
		}
		p := filepath.Join(dir, "f"+c.data)
		if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		h, n, err = HashFile(p)
		if err != nil || h != c.hash || n != int64(len(c.data)) {
			t.Errorf("HashFile(%q) = %s, %d, %v; want %s", c.data, h, n, err, c.hash)
		}
	}
	// Larger than the read buffer, and not a multiple of it.
	big := []byte(strings.Repeat("0123456789abcdef", 10000)[:150001])
	want := sha256.Sum256(big)
	p := filepath.Join(dir, "big")
	if err := os.WriteFile(p, big, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time with a buffer from the first
		if h, n, err := HashFile(p); err != nil || h != hex.EncodeToString(want[:]) || n != int64(len(big)) {
			t.Errorf("HashFile of %d bytes = %s, %d, %v; want %x", len(big), h, n, err, want)
		}
	}
	boom := errors.New("boom")
	if h, n, err := HashReader(iotest.ErrReader(boom)); !errors.Is(err, boom) || h != "" || n != 0 {
		t.Errorf("HashReader of a failing reader = %q, %d, %v", h, n, err)
	}
	missing := filepath.Join(dir, "missing")
	if _, _, err := HashFile(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("HashFile of a missing file: %v", err)
	}
}

// TestHashFileRefusesWhatIsNotAFile: an input or an output that is a FIFO
// is refused at once (an open of a FIFO for reading waits for a writer),
// and /dev/zero behind a link is not read forever.
func TestHashFileRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, what string }{
		{fifo, "is a FIFO (named pipe), not a regular file"},
		{zero, "is a character device (a symbolic link to /dev/zero), not a regular file"},
		{dir, "is a directory, not a regular file"},
	} {
		errc := make(chan error, 1)
		go func() { _, _, err := HashFile(c.path); errc <- err }()
		select {
		case err := <-errc:
			if !errors.Is(err, regularfile.ErrNotRegular) || !strings.Contains(err.Error(), c.path+" "+c.what) {
				t.Errorf("HashFile(%s) = %v; want %q", c.path, err, c.what)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("HashFile(%s) did not return within 5 s", c.path)
		}
	}
}

// BenchmarkHashFile hashes a 100 kB file, the size of a chatty attempt's
// log; -benchmem shows what each call allocates.
func BenchmarkHashFile(b *testing.B) {
	p := filepath.Join(b.TempDir(), "log")
	if err := os.WriteFile(p, []byte(strings.Repeat("a line of output\n", 6000)), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := HashFile(p); err != nil {
			b.Fatal(err)
		}
	}
}
