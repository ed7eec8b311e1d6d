package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// HashLen is the length of a hash in characters: 64 lowercase hex digits,
// the SHA-256 of a blob's bytes.
const HashLen = 2 * sha256.Size

// ParseHash checks that s is a hash as it travels on the wire and names a
// blob on disk: exactly 64 lowercase hex digits, with no prefix, no
// separators and no surrounding space. It returns s unchanged.
//
// Anything else fails with an error wrapping ErrInvalidHash that says what
// is wrong (a "sha256:" prefix, uppercase digits, the length, the first
// character that is not a hex digit); it quotes at most the first 80 bytes
// of s.
func ParseHash(s string) (string, error) {
	switch {
	case s == "":
		return "", fmt.Errorf("%w: the hash is empty; want %d lowercase hex digits", ErrInvalidHash, HashLen)
	case len(s) >= len("sha256:") && strings.EqualFold(s[:len("sha256:")], "sha256:"):
		return "", hashError(s, `drop the "sha256:" prefix`)
	case len(s) != HashLen:
		return "", hashError(s, fmt.Sprintf("it is %d bytes long", len(s)))
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			return "", hashError(s, "hashes are written in lowercase")
		default:
			r, _ := utf8.DecodeRuneInString(s[i:])
			return "", hashError(s, fmt.Sprintf("byte %d is %q, not a hex digit", i+1, r))
		}
	}
	return s, nil
}

// hashError is the ErrInvalidHash error for s, with why.
func hashError(s, why string) error {
	const maxQuoted = 80
	q := s
	if len(q) > maxQuoted {
		q = q[:maxQuoted] + "…"
	}
	return fmt.Errorf("%w %q: %s; want %d lowercase hex digits", ErrInvalidHash, q, why, HashLen)
}

// hashBufs holds the read buffers of HashReader, so hashing many files
// (every log of every attempt) does not allocate a buffer per file.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readerOnly hides any WriterTo of the reader it holds, so io.CopyBuffer
// uses the buffer it is given (*os.File's WriteTo would allocate its own).
type readerOnly struct{ io.Reader }

// HashReader reads r to its end and returns the SHA-256 of what it read, as
// 64 lowercase hex digits, and how many bytes that was. It streams through
// a reused buffer: memory use does not grow with the size of r, nor with
// the number of calls. A read error is returned wrapped, with the hash and
// size of nothing ("", 0).
func HashReader(r io.Reader) (hash string, size int64, err error) {
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(h, readerOnly{r}, *buf)
	hashBufs.Put(buf)
	if err != nil {
		return "", 0, fmt.Errorf("artifact: hashing: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// HashFile returns the SHA-256 of the regular file at path, as 64
// lowercase hex digits, and its size in bytes. It opens the file without
// blocking: a FIFO (or a device, a directory) in its place is refused
// with a *regularfile.NotRegularError, not waited on or read forever.
// Errors name the file.
func HashFile(path string) (hash string, size int64, err error) {
	f, _, err := regularfile.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("artifact: %w", err)
	}
	defer f.Close()
	hash, size, err = HashReader(f)
	if err != nil {
		return "", 0, fmt.Errorf("artifact: %s: %w", path, err)
	}
	return hash, size, nil
}
