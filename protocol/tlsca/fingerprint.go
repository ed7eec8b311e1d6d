package tlsca

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Fingerprint returns the lowercase hex SHA-256 of der, a certificate's DER
// bytes (tls.Certificate.Certificate[i] or x509.Certificate.Raw): 64
// characters without separators.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// ParseFingerprint reads a SHA-256 certificate fingerprint as a user types
// it (the value of --ca-sha256) and returns it as Fingerprint writes it: 64
// lowercase hex digits.
//
// It accepts 64 hex digits in either case, either without separators or as
// 32 pairs separated by single colons ("AB:CD:…", as openssl prints them),
// optionally prefixed by "sha256:" in any case; surrounding space is
// ignored. Anything else is an error saying what was wrong.
func ParseFingerprint(s string) (string, error) {
	in := strings.TrimSpace(s)
	hexDigits := in
	if len(hexDigits) >= len("sha256:") && strings.ToLower(hexDigits[:len("sha256:")]) == "sha256:" {
		hexDigits = hexDigits[len("sha256:"):]
	}
	if strings.Contains(hexDigits, ":") {
		pairs := strings.Split(hexDigits, ":")
		if len(pairs) != sha256.Size {
			return "", fingerprintError(s, fmt.Sprintf("want 32 colon-separated pairs of hex digits, got %d groups", len(pairs)))
		}
		for i, p := range pairs {
			if len(p) != 2 {
				return "", fingerprintError(s, fmt.Sprintf("group %d is %q, not two hex digits", i+1, p))
			}
		}
		hexDigits = strings.Join(pairs, "")
	}
	if len(hexDigits) != 2*sha256.Size {
		return "", fingerprintError(s, fmt.Sprintf("want 64 hex digits, got %d characters", len(hexDigits)))
	}
	out := make([]byte, len(hexDigits))
	for i := 0; i < len(hexDigits); i++ {
		c := hexDigits[i]
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
			out[i] = c
		case 'A' <= c && c <= 'F':
			out[i] = c + ('a' - 'A')
		default:
			r, _ := utf8.DecodeRuneInString(hexDigits[i:])
			return "", fingerprintError(s, fmt.Sprintf("%q is not a hex digit", r))
		}
	}
	return string(out), nil
}

// fingerprintError describes a rejected fingerprint, quoting at most the
// first 100 bytes of it.
func fingerprintError(s, why string) error {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return fmt.Errorf("tlsca: %q is not a SHA-256 fingerprint: %s", s, why)
}
