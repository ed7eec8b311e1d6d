package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// countingReader yields an endless run of 'x' bytes and counts how many it
// handed out.
type countingReader struct{ n int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	r.n += int64(len(p))
	return len(p), nil
}

func TestPut(t *testing.T) {
	t.Parallel()
	const max = 64
	exact := bytes.Repeat([]byte("e"), max)
	over := bytes.Repeat([]byte("o"), max+1)
	hello := []byte("hello, world\n")
	cases := []struct {
		name  string
		data  []byte
		claim string
		check func(error) bool // nil: Put must succeed
	}{
		{"good", hello, hashOf(hello), nil},
		{"empty", nil, hashOf(nil), nil},
		{"exactly the cap", exact, hashOf(exact), nil},
		{"one byte past the cap", over, hashOf(over), func(err error) bool {
			return errors.Is(err, ErrTooLarge) && strings.Contains(err.Error(), "more than 64 bytes")
		}},
		{"hash mismatch", hello, hashOf([]byte("hello")), func(err error) bool {
			var m *MismatchError
			return errors.As(err, &m) && m.Want == hashOf([]byte("hello")) && m.Got == hashOf(hello) && m.Size == int64(len(hello))
		}},
		{"invalid hash", hello, "not-a-hash", func(err error) bool { return errors.Is(err, ErrInvalidHash) }},
		{"uppercase hash", hello, strings.ToUpper(hashOf(hello)), func(err error) bool { return errors.Is(err, ErrInvalidHash) }},
		{"prefixed hash", hello, "sha256:" + hashOf(hello), func(err error) bool { return errors.Is(err, ErrInvalidHash) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, max)
			res, err := s.Put(context.Background(), c.claim, bytes.NewReader(c.data))
			defer noTemp(t, s)
			if c.check != nil {
				if err == nil || !c.check(err) {
					t.Fatalf("Put = %+v, %v; want the case's error", res, err)
				}
				if res != (PutResult{}) {
					t.Errorf("Put failed with a result: %+v", res)
				}
				if left := files(t, filepath.Join(s.Dir(), BlobDir)); len(left) != 0 {
					t.Errorf("a failed Put left %q in sha256/", left)
				}
				return
			}
			want := PutResult{Hash: c.claim, Size: int64(len(c.data)), Created: true}
			if err != nil || res != want {
				t.Fatalf("Put = %+v, %v; want %+v", res, err, want)
			}
			got, err := os.ReadFile(s.Path(c.claim))
			if err != nil || !bytes.Equal(got, c.data) {
				t.Errorf("the blob holds %q, %v; want %q", got, err, c.data)
			}
			if fi, err := os.Stat(s.Path(c.claim)); err != nil || fi.Mode().Perm() != 0o400 {
				t.Errorf("blob mode %v, %v; want 0400", fi.Mode(), err)
			}
		})
	}
}

func TestPutReadsLittlePastTheCap(t *testing.T) {
	t.Parallel()
	for _, max := range []int64{1, 1000, copyBuf, copyBuf + 1, 3*copyBuf + 17} {
		s := newStore(t, max)
		r := &countingReader{}
		_, err := s.Put(context.Background(), hashOf(nil), r)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), FormatSize(max)) {
			t.Errorf("cap %d: Put: %v; want ErrTooLarge naming %s", max, err, FormatSize(max))
		}
		if r.n > max+1 {
			t.Errorf("cap %d: Put read %d bytes; want at most %d", max, r.n, max+1)
		}
		noTemp(t, s)
	}
}

func TestPutDedupe(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	data := []byte("same bytes")
	first := put(t, s, data)
	fi1, err := os.Stat(s.Path(first.Hash))
	if err != nil {
		t.Fatal(err)
	}
	second := put(t, s, data)
	if !first.Created || second.Created || second.Hash != first.Hash || second.Size != first.Size {
		t.Errorf("first %+v, second %+v; want Created only the first time", first, second)
	}
	fi2, err := os.Stat(s.Path(first.Hash))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi1, fi2) {
		t.Error("the second Put replaced the blob")
	}
	if got, _ := os.ReadFile(s.Path(first.Hash)); !bytes.Equal(got, data) {
		t.Errorf("blob holds %q, want %q", got, data)
	}
	noTemp(t, s)
}

func TestPutReplacesDamagedBlob(t *testing.T) {
	t.Parallel()
	s := newStore(t, 100)
	data := []byte("the whole blob")
	h := hashOf(data)
	if err := os.MkdirAll(filepath.Dir(s.Path(h)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(h), data[:4], 0o644); err != nil { // cut short
		t.Fatal(err)
	}
	if res := put(t, s, data); !res.Created {
		t.Errorf("Put over a damaged blob: %+v; want Created", res)
	}
	if got, _ := os.ReadFile(s.Path(h)); !bytes.Equal(got, data) {
		t.Errorf("blob holds %q, want %q", got, data)
	}
}

// cancellingReader hands out data one byte per Read and cancels its
// context during the first Read.
type cancellingReader struct {
	data   []byte
	cancel context.CancelFunc
	reads  int
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	r.reads++
	r.cancel()
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	p[0] = r.data[0]
	r.data = r.data[1:]
	return 1, nil
}

func TestPutCancelled(t *testing.T) {
	t.Parallel()
	data := []byte("never stored")
	cases := []struct {
		name      string
		before    bool // cancel before Put, else during the first read
		wantReads int
	}{
		{"before", true, 0},
		{"during", false, 1},
	}
	for _, c := range cases {
		s := newStore(t, 100)
		ctx, cancel := context.WithCancel(context.Background())
		r := &cancellingReader{data: data, cancel: cancel}
		if c.before {
			cancel()
		}
		_, err := s.Put(ctx, hashOf(data), r)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Put: %v; want context.Canceled", c.name, err)
		}
		if r.reads != c.wantReads {
			t.Errorf("%s: %d reads, want %d", c.name, r.reads, c.wantReads)
		}
		if _, ok, _ := s.Stat(hashOf(data)); ok {
			t.Errorf("%s: the blob is held", c.name)
		}
		noTemp(t, s)
	}
}

func TestPutReaderFails(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1<<20)
	boom := errors.New("connection reset")
	data := bytes.Repeat([]byte("y"), 3*copyBuf)
	r := io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom))
	_, err := s.Put(context.Background(), hashOf(data), r)
	if !errors.Is(err, boom) {
		t.Errorf("Put: %v; want the reader's error", err)
	}
	if left := files(t, s.Dir()); len(left) != 0 {
		t.Errorf("a failed Put left %q", left)
	}
}

func TestPutConcurrentSameBlob(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1<<20)
	data := bytes.Repeat([]byte("concurrent "), 10000) // > copyBuf: several reads each
	h := hashOf(data)
	results := make([]PutResult, 16)
	errs := make([]error, 16)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Go(func() {
			<-start
			results[i], errs[i] = s.Put(context.Background(), h, bytes.NewReader(data))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, res := range results {
		if errs[i] != nil || res.Hash != h || res.Size != int64(len(data)) {
			t.Errorf("Put %d = %+v, %v", i, res, errs[i])
		}
		if res.Created {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d Puts report Created, want exactly 1", created)
	}
	if got, size, err := HashFile(s.Path(h)); err != nil || got != h || size != int64(len(data)) {
		t.Errorf("the blob hashes to %s (%d bytes), %v; want %s", got, size, err, h)
	}
	if got := files(t, filepath.Join(s.Dir(), BlobDir)); !slices.Equal(got, []string{h[:2] + "/" + h}) {
		t.Errorf("sha256/ holds %q", got)
	}
	noTemp(t, s)
}

func TestPutConcurrentDifferentBlobs(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1<<20)
	blobs := make([][]byte, 16)
	for i := range blobs {
		blobs[i] = bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1))
	}
	errs := make([]error, len(blobs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, b := range blobs {
		wg.Go(func() {
			<-start
			var res PutResult
			res, errs[i] = s.Put(context.Background(), hashOf(b), bytes.NewReader(b))
			if errs[i] == nil && !res.Created {
				errs[i] = errors.New("not Created")
			}
		})
	}
	close(start)
	wg.Wait()
	var want []string
	for i, b := range blobs {
		if errs[i] != nil {
			t.Errorf("Put %d: %v", i, errs[i])
		}
		h := hashOf(b)
		want = append(want, h)
		if got, size, err := HashFile(s.Path(h)); err != nil || got != h || size != int64(len(b)) {
			t.Errorf("blob %d hashes to %s (%d bytes), %v; want %s", i, got, size, err, h)
		}
	}
	slices.Sort(want)
	var got []string
	if err := s.Walk(func(h string, _ int64) error { got = append(got, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Walk saw %d blobs %q; want the 16 in hash order", len(got), got)
	}
	noTemp(t, s)
}

// gateReader hands out first, then blocks in its second Read (closing
// waiting as it starts to) until release is closed, then hands out rest.
type gateReader struct {
	first, rest []byte
	waiting     chan struct{}
	release     chan struct{}
	reads       int
}

func (r *gateReader) Read(p []byte) (int, error) {
	r.reads++
	switch r.reads {
	case 1:
		return copy(p, r.first), nil
	case 2:
		close(r.waiting)
		<-r.release
		return copy(p, r.rest), nil
	}
	return 0, io.EOF
}

func TestPutIsAtomic(t *testing.T) {
	t.Parallel()
	s := newStore(t, 1<<20)
	first, rest := []byte("the first half, "), []byte("and the rest")
	data := append(slices.Clip(first), rest...)
	h := hashOf(data)
	r := &gateReader{first: first, rest: rest, waiting: make(chan struct{}), release: make(chan struct{})}
	type outcome struct {
		res PutResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := s.Put(context.Background(), h, r)
		done <- outcome{res, err}
	}()
	<-r.waiting // the first half is in the temporary file; the Put is blocked

	if _, ok, err := s.Stat(h); ok || err != nil {
		t.Errorf("Stat during the Put: held=%v, %v; want not held", ok, err)
	}
	if f, _, err := s.Open(h); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open during the Put: %v; want ErrNotFound", err)
		if f != nil {
			f.Close()
		}
	}
	if got := walk(t, s); len(got) != 0 {
		t.Errorf("Walk during the Put saw %q", got)
	}
	if missing, err := s.Missing([]string{h}); err != nil || !slices.Equal(missing, []string{h}) {
		t.Errorf("Missing during the Put = %q, %v", missing, err)
	}
	tmp := files(t, filepath.Join(s.Dir(), TempDir))
	if len(tmp) != 1 {
		t.Fatalf("tmp/ holds %q during the Put; want one file", tmp)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(), TempDir, tmp[0])); err != nil || fi.Size() != int64(len(first)) {
		t.Errorf("the temporary file: %v, %v; want %d bytes", fi, err, len(first))
	}
	// CleanTemp leaves a Put in progress alone, however old it claims to be.
	if n, err := s.CleanTemp(0); n != 0 || err != nil {
		t.Errorf("CleanTemp during the Put = %d, %v; want 0", n, err)
	}

	close(r.release)
	o := <-done
	if o.err != nil || o.res != (PutResult{Hash: h, Size: int64(len(data)), Created: true}) {
		t.Fatalf("Put = %+v, %v", o.res, o.err)
	}
	if size, ok, err := s.Stat(h); !ok || size != int64(len(data)) || err != nil {
		t.Errorf("Stat after the Put = %d, %v, %v", size, ok, err)
	}
	noTemp(t, s)
}
