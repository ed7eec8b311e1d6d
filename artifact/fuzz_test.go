package artifact

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func FuzzParseHash(f *testing.F) {
	for _, s := range []string{abcHash, emptyHash, strings.ToUpper(abcHash), "sha256:" + abcHash, "", "0", abcHash[:63] + "g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseHash(s)
		// The rule, said another way: 64 bytes, each in 0-9 or a-f.
		valid := len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
		switch {
		case valid && (err != nil || got != s):
			t.Fatalf("ParseHash(%q) = %q, %v; want it accepted unchanged", s, got, err)
		case !valid && (err == nil || !errors.Is(err, ErrInvalidHash) || got != ""):
			t.Fatalf("ParseHash(%q) = %q, %v; want ErrInvalidHash", s, got, err)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "-1", "1", "1GiB", "10MiB", "1.5KiB", "100MB", "9999999EiB", "lots", "1,024", " 7 eib ", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if n != 0 || !strings.Contains(err.Error(), `"10MiB"`) {
				t.Fatalf("ParseSize(%q) = %d, %v; want 0 and an error suggesting \"10MiB\"", s, n, err)
			}
			return
		}
		if n <= 0 {
			t.Fatalf("ParseSize(%q) = %d, want a positive size", s, n)
		}
		// Every accepted size reads back exactly as a plain number of bytes.
		if back, err := ParseSize(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d, but its decimal reads back as %d, %v", s, n, back, err)
		}
		_ = FormatSize(n)
	})
}

// fuzzMax is the size cap of FuzzPut's stores, small so that the cap is
// often passed.
const fuzzMax = 256

func FuzzPut(f *testing.F) {
	f.Add([]byte("hello"), "", true)
	f.Add([]byte("hello"), abcHash, false)
	f.Add([]byte(nil), emptyHash, false)
	f.Add([]byte("abc"), strings.ToUpper(abcHash), false)
	f.Add(bytes.Repeat([]byte{7}, fuzzMax), "", true)
	f.Add(bytes.Repeat([]byte{7}, fuzzMax+1), "", true)
	f.Fuzz(func(t *testing.T, data []byte, claim string, honest bool) {
		s := newStore(t, fuzzMax)
		real := hashOf(data)
		if honest {
			claim = real
		}
		res, err := s.Put(context.Background(), claim, bytes.NewReader(data))

		if left := files(t, filepath.Join(s.Dir(), TempDir)); len(left) != 0 {
			t.Fatalf("Put left %q in tmp/", left)
		}
		_, invalid := ParseHash(claim)
		var mismatch *MismatchError
		switch {
		case invalid != nil:
			if !errors.Is(err, ErrInvalidHash) {
				t.Fatalf("Put with claim %q: %v; want ErrInvalidHash", claim, err)
			}
		case len(data) > fuzzMax:
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Put of %d bytes: %v; want ErrTooLarge", len(data), err)
			}
		case claim != real:
			if !errors.As(err, &mismatch) || mismatch.Got != real || mismatch.Want != claim || mismatch.Size != int64(len(data)) {
				t.Fatalf("Put with a wrong claim: %v; want a MismatchError", err)
			}
		default:
			if err != nil || res != (PutResult{Hash: real, Size: int64(len(data)), Created: true}) {
				t.Fatalf("Put = %+v, %v; want it stored", res, err)
			}
			got, err := os.ReadFile(s.Path(real))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the blob holds %q, %v; want %q", got, err, data)
			}
			return
		}
		if res != (PutResult{}) {
			t.Fatalf("a failed Put returned %+v", res)
		}
		if left := files(t, filepath.Join(s.Dir(), BlobDir)); len(left) != 0 {
			t.Fatalf("a failed Put left %q in sha256/", left)
		}
	})
}
