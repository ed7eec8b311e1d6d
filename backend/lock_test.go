package backend

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseLock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	good := Lock{ID: "0123456789abcdef0123456789abcdef", Operation: "apply", Holder: "a@h", Host: "h", PID: 7,
		StartedAt: t0, RenewedAt: t0.Add(time.Second), ExpiresAt: t0.Add(time.Minute)}
	if l, err := ParseLock(good.Encode()); err != nil || l.ID != good.ID || !l.ExpiresAt.Equal(good.ExpiresAt) {
		t.Fatalf("round trip = %+v, %v", l, err)
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"not json", `{`, "not JSON"},
		{"trailing data", `{"format_version":"1.0"} x`, "after its JSON"},
		{"major version", `{"format_version":"2.0"}`, "format_version \"2.0\""},
		{"bad id", `{"format_version":"1.0","id":"XYZ"}`, "32 lowercase hex"},
		{"no holder", `{"format_version":"1.0","id":"0123456789abcdef0123456789abcdef"}`, "holder is missing"},
		{"negative pid", `{"format_version":"1.0","id":"0123456789abcdef0123456789abcdef","holder":"a","pid":-1}`, "negative"},
		{"no times", `{"format_version":"1.0","id":"0123456789abcdef0123456789abcdef","holder":"a"}`, "lacks started_at"},
		{"out of order", `{"format_version":"1.1","id":"0123456789abcdef0123456789abcdef","holder":"a",
			"started_at":"2026-12-01T10:00:00Z","renewed_at":"2026-12-01T10:00:00Z","expires_at":"2026-12-01T09:00:00Z"}`, "out of order"},
		{"too large", `{"x":"` + strings.Repeat("a", maxLockSize) + `"}`, "more than a lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseLock([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseLock = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLockFree(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		l    Lock
		now  time.Time
		want bool
	}{
		{"held", Lock{ExpiresAt: t0.Add(time.Second)}, t0, false},
		{"expired", Lock{ExpiresAt: t0}, t0, true},
		{"released", Lock{ExpiresAt: t0.Add(time.Hour), Released: true}, t0, true},
	} {
		if got := tc.l.Free(tc.now); got != tc.want {
			t.Errorf("%s: Free = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// FuzzParseLock: no input makes ParseLock panic, and what it accepts
// encodes to a lock it accepts again, unchanged.
func FuzzParseLock(f *testing.F) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f.Add(Lock{ID: "0123456789abcdef0123456789abcdef", Holder: "a@h", StartedAt: t0, RenewedAt: t0, ExpiresAt: t0.Add(time.Minute)}.Encode())
	f.Add([]byte(`{"format_version":"1.9","id":"0123456789abcdef0123456789abcdef","holder":"x","started_at":"2026-12-01T10:00:00Z","renewed_at":"2026-12-01T10:00:00Z","expires_at":"2026-12-01T10:00:00Z","released":true}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock(data)
		if err != nil {
			return
		}
		again, err := ParseLock(l.Encode())
		if err != nil {
			t.Fatalf("re-encoded lock refused: %v", err)
		}
		if again.ID != l.ID || !again.ExpiresAt.Equal(l.ExpiresAt) || again.Released != l.Released {
			t.Fatalf("round trip changed the lock: %+v → %+v", l, again)
		}
	})
}

// TestLockedError: the refusal names the holder and its lock, and says
// what to do: wait or force-unlock, what the caller's Hint says instead,
// or that it waited.
func TestLockedError(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := Lock{ID: "0123456789abcdef0123456789abcdef", Operation: "apply", Holder: "ci@runner-7", Host: "runner-7", PID: 42,
		StartedAt: t0, RenewedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	const head = "backend s3://b/k is locked by ci@runner-7 (apply, host runner-7, pid 42) since 2026-12-01T10:00:00Z, until 2026-12-01T10:01:00Z unless renewed; lock ID 0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name string
		err  *LockedError
		want string
	}{
		{"default", &LockedError{Backend: "s3://b/k", Lock: l},
			head + " (another apply is running; wait with --lock-timeout, or if it is gone for good, run wdc force-unlock 0123456789abcdef0123456789abcdef)"},
		{"a hint of the caller's", &LockedError{Backend: "s3://b/k", Lock: l, Hint: "run wdc gc again later"}, head + ": run wdc gc again later"},
		{"waited", &LockedError{Backend: "s3://b/k", Lock: l, Waited: time.Minute, Hint: "unused"}, "gave up after waiting 1m0s: " + head},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want || !errors.Is(tc.err, ErrLocked) {
				t.Fatalf("Error() = %q\nwant      %q", got, tc.want)
			}
		})
	}
}
