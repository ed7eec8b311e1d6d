package local

import (
	"encoding/binary"
	"strings"
)

// procArgs decodes the argv of a macOS kern.procargs2 buffer (argc as a
// little-endian 32-bit integer, the executable path, NUL padding, then argc
// NUL-terminated arguments); nil when it is malformed. It lives outside
// process_darwin.go so that its test runs everywhere.
func procArgs(b []byte) []string {
	if len(b) < 4 {
		return nil
	}
	argc := int(binary.LittleEndian.Uint32(b))
	rest := b[4:]
	i := strings.IndexByte(string(rest), 0) // end of the executable path
	if i < 0 {
		return nil
	}
	rest = rest[i:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	parts := strings.SplitN(string(rest), "\x00", argc+1)
	if len(parts) < argc {
		return nil
	}
	return parts[:argc]
}
