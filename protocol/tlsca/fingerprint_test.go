package tlsca

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	der := []byte("not really DER, but any bytes hash")
	sum := sha256.Sum256(der)
	if got, want := Fingerprint(der), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func TestParseFingerprint(t *testing.T) {
	t.Parallel()
	const lower = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	upper := strings.ToUpper(lower)
	colons := func(s string) string {
		var pairs []string
		for i := 0; i < len(s); i += 2 {
			pairs = append(pairs, s[i:i+2])
		}
		return strings.Join(pairs, ":")
	}
	tests := []struct {
		name, in, want, wantErr string
	}{
		{"lower case", lower, lower, ""},
		{"upper case", upper, lower, ""},
		{"mixed case", "0123456789ABCDEF" + lower[16:], lower, ""},
		{"colons", colons(lower), lower, ""},
		{"upper case with colons", colons(upper), lower, ""},
		{"prefix", "sha256:" + lower, lower, ""},
		{"upper-case prefix and colons", "SHA256:" + colons(upper), lower, ""},
		{"surrounding space", "  " + lower + "\n", lower, ""},

		{"empty", "", "", "want 64 hex digits, got 0 characters"},
		{"only the prefix", "sha256:", "", "want 64 hex digits, got 0 characters"},
		{"too short", lower[:62], "", "want 64 hex digits, got 62 characters"},
		{"too long", lower + "0", "", "want 64 hex digits, got 65 characters"},
		{"SHA-1 length", lower[:40], "", "want 64 hex digits, got 40 characters"},
		{"not hex", "g" + lower[1:], "", `'g' is not a hex digit`},
		{"non-ASCII", "é" + lower[2:], "", `'é' is not a hex digit`},
		{"inner space", lower[:32] + " " + lower[33:], "", `' ' is not a hex digit`},
		{"other prefix", "sha1:" + lower, "", "want 32 colon-separated pairs"},
		{"prefix twice", "sha256:sha256:" + lower, "", "want 32 colon-separated pairs"},
		{"too few pairs", colons(lower[:62]), "", "want 32 colon-separated pairs of hex digits, got 31 groups"},
		{"double colon", strings.Replace(colons(lower), ":", "::", 1), "", "want 32 colon-separated pairs"},
		{"uneven groups", "012:" + colons(lower)[4:], "", `group 1 is "012", not two hex digits`},
		{"trailing colon", colons(lower[:62]) + ":", "", `group 32 is "", not two hex digits`},
		{"hex with 0x", "0x" + lower[2:], "", `'x' is not a hex digit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseFingerprint(tt.in)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseFingerprint(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseFingerprint(%q) = %q, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), "is not a SHA-256 fingerprint") {
				t.Errorf("error %q does not say what it is about", err)
			}
		})
	}
}

func TestParseFingerprintQuotesLongInputShortly(t *testing.T) {
	t.Parallel()
	_, err := ParseFingerprint(strings.Repeat("z", 10000))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("error = %v (%d bytes), want a short one", err, len(err.Error()))
	}
}

var canonicalFingerprint = regexp.MustCompile(`^[0-9a-f]{64}$`)

func FuzzParseFingerprint(f *testing.F) {
	for _, s := range []string{
		"",
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"SHA256:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF",
		"sha256:",
		":::",
		"é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseFingerprint(s)
		if err != nil {
			if got != "" {
				t.Errorf("ParseFingerprint(%q) = %q with error %v", s, got, err)
			}
			return
		}
		if !canonicalFingerprint.MatchString(got) {
			t.Fatalf("ParseFingerprint(%q) = %q, not 64 lowercase hex digits", s, got)
		}
		if again, err := ParseFingerprint(got); err != nil || again != got {
			t.Fatalf("ParseFingerprint(%q) = %q, %v; want it unchanged", got, again, err)
		}
		// The output is the input's hex digits, whatever the prefix and
		// separators were.
		if digits := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", "")); !strings.HasSuffix(digits, got) {
			t.Fatalf("ParseFingerprint(%q) = %q, which are not the input's hex digits", s, got)
		}
	})
}
