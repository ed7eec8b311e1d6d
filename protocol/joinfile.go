package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// JoinFileFormatVersion is the format_version of the join file this wdc
// writes; a reader refuses another major version (docs/json.md, "Join file").
const JoinFileFormatVersion = "1.0"

// JoinFile is what `wdc join-token create` writes and `wdc agent
// --join-file` and `wdc workers register --join-file` read: a join
// credential of one pool, and the fingerprint that pins the coordinator's
// TLS chain. It holds a secret: it is written with mode 0600.
type JoinFile struct {
	FormatVersion string `json:"format_version"`
	// ID names the join token for `wdc join-token list` and `revoke`.
	ID   string `json:"id"`
	Pool string `json:"pool"`
	// Credential is the join credential (prefix JoinCredentialPrefix).
	Credential string `json:"credential"`
	// CASHA256 is the lowercase hex SHA-256 fingerprint of the CA the
	// coordinator's certificate chains to, when it serves HTTPS with the
	// state's own CA or a given chain; "" otherwise.
	CASHA256 string `json:"ca_sha256,omitempty"`
	// Labels, when set, are the labels the workers that join with it are
	// restricted to.
	Labels    map[string]string `json:"labels,omitempty"`
	ExpiresAt time.Time         `json:"expires_at"`
}

// MaxJoinFileBytes caps how much of a join file is read (64 KiB).
const MaxJoinFileBytes = 64 << 10

// ParseJoinFile decodes and checks a join file: one JSON object of format
// version 1.x, with an id, a pool and a join credential. Errors say what is
// wrong; they never quote the credential.
func ParseJoinFile(data []byte) (JoinFile, error) {
	var jf JoinFile
	if len(data) > MaxJoinFileBytes {
		return jf, fmt.Errorf("join file is larger than %d bytes", MaxJoinFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&jf); err != nil {
		return JoinFile{}, fmt.Errorf("join file is not a JSON object: %v", err)
	}
	if dec.More() {
		return JoinFile{}, errors.New("join file has data after its JSON object")
	}
	major, _, _ := strings.Cut(jf.FormatVersion, ".")
	switch {
	case jf.FormatVersion == "":
		return JoinFile{}, errors.New("join file has no format_version: make one with wdc join-token create")
	case major != "1":
		return JoinFile{}, fmt.Errorf("join file has format version %s; this wdc reads %s", jf.FormatVersion, JoinFileFormatVersion)
	case jf.Pool == "" || jf.ID == "":
		return JoinFile{}, errors.New("join file names no pool or token id")
	case !strings.HasPrefix(jf.Credential, JoinCredentialPrefix) || len(jf.Credential) <= len(JoinCredentialPrefix):
		return JoinFile{}, fmt.Errorf("join file holds no join credential (it starts with %q)", JoinCredentialPrefix)
	}
	return jf, nil
}

// ReadJoinFile reads and parses the join file at path: a regular file of
// at most MaxJoinFileBytes, opened without blocking (a FIFO in its place
// is refused, not waited on). Errors name the file and what it is.
func ReadJoinFile(path string) (JoinFile, error) {
	data, err := regularfile.Read(path, MaxJoinFileBytes)
	var notRegular *regularfile.NotRegularError
	var tooLarge *regularfile.TooLargeError
	switch {
	case errors.As(err, &notRegular), errors.As(err, &tooLarge):
		return JoinFile{}, fmt.Errorf("join file %w", err)
	case err != nil:
		return JoinFile{}, fmt.Errorf("join file: %w", err)
	}
	jf, err := ParseJoinFile(data)
	if err != nil {
		return JoinFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return jf, nil
}

// Encode returns the join file's JSON text, indented, with a final newline.
func (jf JoinFile) Encode() []byte {
	b, _ := json.MarshalIndent(jf, "", "  ") // strings, a map of strings and a time: cannot fail
	return append(b, '\n')
}

// WriteJoinFile writes jf to path atomically with mode 0600 (it holds a
// secret), creating its folder when missing.
func WriteJoinFile(path string, jf JoinFile) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(path, jf.Encode(), 0o600, renameio.WithStaticPermissions(0o600))
}
