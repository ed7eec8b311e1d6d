package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/wdc-dev/wdc/internal/s3test"
)

func testEnv(name string) string {
	switch name {
	case "AWS_ACCESS_KEY_ID":
		return s3test.AccessKey
	case "AWS_SECRET_ACCESS_KEY":
		return s3test.SecretKey
	}
	return ""
}

func newTestBackend(t *testing.T, srv *s3test.Server, ttl time.Duration) *S3 {
	t.Helper()
	bucket, err := srv.Bucket(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewS3(S3Config{Bucket: bucket, Key: "ci/state.db", Endpoint: srv.Endpoint, PathStyle: true, LockTTL: ttl}, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewS3Config(t *testing.T) {
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name   string
		cfg    S3Config
		getenv func(string) string
		want   string // in the error; "" for none
	}{
		{"ok", S3Config{Bucket: "b", Key: "k", Endpoint: "http://127.0.0.1:9"}, testEnv, ""},
		{"aws default endpoint", S3Config{Bucket: "b", Key: "k"}, testEnv, ""},
		{"no bucket", S3Config{Key: "k"}, testEnv, "needs a bucket and a key"},
		{"bad endpoint", S3Config{Bucket: "b", Key: "k", Endpoint: "127.0.0.1:9"}, testEnv, "is not a URL"},
		{"endpoint with a path", S3Config{Bucket: "b", Key: "k", Endpoint: "http://h/x"}, testEnv, "is not a URL"},
		{"no credentials", S3Config{Bucket: "b", Key: "k"}, noEnv, "no credentials: set AWS_ACCESS_KEY_ID"},
		{"half credentials", S3Config{Bucket: "b", Key: "k"}, func(n string) string {
			if n == "AWS_ACCESS_KEY_ID" {
				return "x"
			}
			return ""
		}, "must be set together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewS3(tc.cfg, tc.getenv)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("NewS3 = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestProfileCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "credentials")
	os.WriteFile(file, []byte("[ci]\naws_access_key_id = A\naws_secret_access_key = S\n"), 0o600)
	env := map[string]string{"AWS_SHARED_CREDENTIALS_FILE": file}
	if _, err := NewS3(S3Config{Bucket: "b", Key: "k", Profile: "ci"}, func(n string) string { return env[n] }); err != nil {
		t.Fatalf("profile ci: %v", err)
	}
	if _, err := NewS3(S3Config{Bucket: "b", Key: "k", Profile: "other"}, func(n string) string { return env[n] }); err == nil {
		t.Fatal("a missing profile was accepted")
	}
}

func TestStateObject(t *testing.T) {
	srv := s3test.Start(t)
	b := newTestBackend(t, srv, 0)
	ctx := context.Background()
	dir := t.TempDir()
	if _, found, err := b.Get(ctx, filepath.Join(dir, "got")); err != nil || found {
		t.Fatalf("Get of an empty key = found %v, %v", found, err)
	}
	src := filepath.Join(dir, "src")
	os.WriteFile(src, []byte("one"), 0o600)
	first, err := b.Put(ctx, src, "")
	if err != nil {
		t.Fatal(err)
	}
	// A second create, and a write on a stale ETag, are refused.
	if _, err := b.Put(ctx, src, ""); !errors.Is(err, ErrConflict) {
		t.Fatalf("second create = %v, want ErrConflict", err)
	}
	os.WriteFile(src, []byte("two"), 0o600)
	second, err := b.Put(ctx, src, first.ETag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, src, first.ETag); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "ci/state.db") {
		t.Fatalf("write on a stale ETag = %v, want ErrConflict naming the key", err)
	}
	got, found, err := b.Get(ctx, filepath.Join(dir, "got"))
	if err != nil || !found || got.ETag != second.ETag {
		t.Fatalf("Get = %+v, %v, %v; want ETag %s", got, found, err, second.ETag)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "got")); string(data) != "two" {
		t.Fatalf("content %q", data)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "got")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestFaults(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  S3Config
		want error
	}{
		{"missing bucket", S3Config{Bucket: "wdc-no-such-bucket", Key: "k", Endpoint: srv.Endpoint, PathStyle: true}, ErrNoBucket},
		{"nothing listening", S3Config{Bucket: "wdc-b", Key: "k", Endpoint: "http://127.0.0.1:1", PathStyle: true}, ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewS3(tc.cfg, testEnv)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = b.Get(ctx, filepath.Join(t.TempDir(), "x"))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "s3://"+tc.cfg.Bucket+"/k") {
				t.Fatalf("Get = %v, want %v naming the backend", err, tc.want)
			}
		})
	}
}

func TestLock(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	req := LockRequest{Operation: "apply", Holder: "alice@a", Host: "a", PID: 1}

	t.Run("one holder at a time", func(t *testing.T) {
		b := newTestBackend(t, srv, time.Minute)
		h, err := b.AcquireLock(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		other := req
		other.Holder = "bob@b"
		_, err = b.AcquireLock(ctx, other)
		var locked *LockedError
		if !errors.As(err, &locked) || locked.Lock.Holder != "alice@a" || !strings.Contains(err.Error(), "force-unlock "+h.ID()) {
			t.Fatalf("second AcquireLock = %v, want LockedError naming alice and the lock ID", err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		h2, err := b.AcquireLock(ctx, other)
		if err != nil || h2.Previous != nil {
			t.Fatalf("AcquireLock after release = %v (previous %v)", err, h2.Previous)
		}
	})

	t.Run("waits for a release", func(t *testing.T) {
		b := newTestBackend(t, srv, time.Minute)
		h, err := b.AcquireLock(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		waiting := make(chan struct{})
		go func() { <-waiting; h.Release(ctx) }()
		other := req
		other.Wait, other.Poll = 20*time.Second, 50*time.Millisecond
		other.OnWait = func(Lock) { close(waiting) }
		if _, err := b.AcquireLock(ctx, other); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("expired lock is taken over", func(t *testing.T) {
		b := newTestBackend(t, srv, 300*time.Millisecond)
		h, err := b.AcquireLock(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		other := req
		other.Wait, other.Poll = 10*time.Second, 50*time.Millisecond
		h2, err := b.AcquireLock(ctx, other)
		if err != nil || h2.Previous == nil || h2.Previous.ID != h.ID() {
			t.Fatalf("takeover = %v, previous %v", err, h2.Previous)
		}
		// The old holder finds out at its next renewal.
		if err := h.Renew(ctx); !errors.Is(err, ErrLockLost) {
			t.Fatalf("renewal of a taken-over lock = %v, want ErrLockLost", err)
		}
		select {
		case <-h.Lost():
		default:
			t.Fatal("Lost not closed")
		}
	})

	t.Run("renewals keep it", func(t *testing.T) {
		b := newTestBackend(t, srv, 600*time.Millisecond)
		h, err := b.AcquireLock(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		h.KeepAlive()
		time.Sleep(1500 * time.Millisecond) // 2.5 TTLs: renewals must have moved the expiry
		if _, err := b.AcquireLock(ctx, req); !errors.Is(err, ErrLocked) {
			t.Fatalf("AcquireLock of a renewed lock = %v, want ErrLocked", err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("force-unlock", func(t *testing.T) {
		b := newTestBackend(t, srv, time.Minute)
		h, err := b.AcquireLock(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.ForceUnlock(ctx, "0123456789abcdef0123456789abcdef", "op", nil); !errors.Is(err, ErrNoLock) {
			t.Fatalf("force-unlock of another ID = %v", err)
		}
		refuse := errors.New("alive")
		if _, err := b.ForceUnlock(ctx, h.ID(), "op", func(Lock) error { return refuse }); !errors.Is(err, refuse) {
			t.Fatalf("check not asked: %v", err)
		}
		if l, err := b.ForceUnlock(ctx, h.ID(), "op", nil); err != nil || l.ID != h.ID() {
			t.Fatalf("force-unlock = %v", err)
		}
		if err := h.Renew(ctx); !errors.Is(err, ErrLockLost) {
			t.Fatalf("renewal after force-unlock = %v", err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatalf("release of a lost lock = %v", err)
		}
		if _, err := b.AcquireLock(ctx, req); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("corrupt lock object", func(t *testing.T) {
		b := newTestBackend(t, srv, time.Minute)
		src := filepath.Join(t.TempDir(), "lock")
		os.WriteFile(src, []byte("{not json"), 0o600)
		if _, err := b.put(ctx, "plant", "ci/state.db.lock", mustOpen(t, src), 9, "application/json", ""); err != nil {
			t.Fatal(err)
		}
		_, err := b.AcquireLock(ctx, req)
		if err == nil || !strings.Contains(err.Error(), "ci/state.db.lock") || !strings.Contains(err.Error(), "remove the object") {
			t.Fatalf("AcquireLock over a corrupt lock = %v", err)
		}
	})
}

func mustOpen(t *testing.T, p string) *os.File {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestBlobs(t *testing.T) {
	srv := s3test.Start(t)
	b := newTestBackend(t, srv, 0)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "blob")
	os.WriteFile(src, []byte("hello\n"), 0o600)
	const hash = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" // sha256("hello\n")
	const other = "0000000000000000000000000000000000000000000000000000000000000000"
	// Objects under the blobs' prefix that are not named by a hash are
	// not blobs: never listed, so never removed.
	if _, err := b.put(ctx, "test", "ci/state.db.blobs/notes.txt", strings.NewReader("x"), 1, "text/plain", ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		do        func(*strings.Builder) (bool, error)
		wantFound bool
		wantErr   string
		wantBody  string
	}{
		{"put", func(*strings.Builder) (bool, error) { return true, b.PutBlob(ctx, hash, src) }, true, "", ""},
		{"put again is a no-op", func(*strings.Builder) (bool, error) { return true, b.PutBlob(ctx, hash, src) }, true, "", ""},
		{"get", func(w *strings.Builder) (bool, error) { return b.GetBlob(ctx, hash, w) }, true, "", "hello\n"},
		{"get a missing blob", func(w *strings.Builder) (bool, error) { return b.GetBlob(ctx, other, w) }, false, "", ""},
		{"not a hash", func(w *strings.Builder) (bool, error) { return b.GetBlob(ctx, "../state.db", w) }, false, "not a SHA-256 hash", ""},
		{"listed", func(w *strings.Builder) (bool, error) {
			return true, b.ListBlobs(ctx, func(h string, size int64) error { fmt.Fprintf(w, "%s %d;", h, size); return nil })
		}, true, "", hash + " 6;"},
		{"removed", func(w *strings.Builder) (bool, error) { return true, b.RemoveBlob(ctx, hash) }, true, "", ""},
		{"removed again is a no-op", func(w *strings.Builder) (bool, error) { return true, b.RemoveBlob(ctx, hash) }, true, "", ""},
		{"gone", func(w *strings.Builder) (bool, error) { return b.GetBlob(ctx, hash, w) }, false, "", ""},
		{"remove what is not a hash", func(w *strings.Builder) (bool, error) { return true, b.RemoveBlob(ctx, "../state.db") }, false, "not a SHA-256 hash", ""},
		{"listed: none", func(w *strings.Builder) (bool, error) {
			return true, b.ListBlobs(ctx, func(h string, size int64) error { fmt.Fprintf(w, "%s %d;", h, size); return nil })
		}, true, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w strings.Builder
			found, err := tc.do(&w)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || found != tc.wantFound || w.String() != tc.wantBody {
				t.Fatalf("= %v, %v, %q; want %v, %q", found, err, w.String(), tc.wantFound, tc.wantBody)
			}
		})
	}
}

// TestFail: the store's refusals become errors that say what they are
// and what to do, naming the backend and the key.
func TestFail(t *testing.T) {
	b, err := NewS3(S3Config{Bucket: "wdc-b", Key: "ci/state.db", Endpoint: "http://127.0.0.1:9", PathStyle: true}, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		err      error
		want     error
		wantText string
	}{
		{"precondition", minio.ErrorResponse{StatusCode: 412, Code: "PreconditionFailed"}, ErrConflict, ""},
		{"conditional conflict", minio.ErrorResponse{StatusCode: 409, Code: "ConditionalRequestConflict"}, ErrConflict, ""},
		{"no conditional writes", minio.ErrorResponse{StatusCode: 501, Code: "NotImplemented", Message: "If-None-Match"}, ErrNoConditionalWrites, "use a store that does"},
		{"no bucket", minio.ErrorResponse{StatusCode: 404, Code: "NoSuchBucket"}, ErrNoBucket, "wdc never creates buckets"},
		{"wrong key id", minio.ErrorResponse{StatusCode: 403, Code: "InvalidAccessKeyId", Message: "no such key"}, ErrCredentials, "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN"},
		{"wrong secret", minio.ErrorResponse{StatusCode: 403, Code: "SignatureDoesNotMatch"}, ErrCredentials, "may read and write s3://wdc-b/ci/state.db*"},
		{"expired token", minio.ErrorResponse{StatusCode: 400, Code: "ExpiredToken"}, ErrCredentials, ""},
		{"access denied", minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied"}, ErrCredentials, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.fail(context.Background(), "write the state", "ci/state.db", tc.err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("fail = %v, want %v", err, tc.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "backend s3://wdc-b/ci/state.db: write the state (key ci/state.db): ") || !strings.Contains(msg, tc.wantText) {
				t.Fatalf("message %q, want the backend, the key and %q", msg, tc.wantText)
			}
		})
	}
}

// TestCA: the CA object is created once; a second create is a conflict
// and the first one's content stays; one larger than a CA is refused,
// naming the key.
func TestCA(t *testing.T) {
	srv := s3test.Start(t)
	b := newTestBackend(t, srv, 0)
	ctx := context.Background()
	if _, found, err := b.ReadCA(ctx); err != nil || found {
		t.Fatalf("ReadCA of none = %v, %v", found, err)
	}
	if err := b.CreateCA(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateCA(ctx, []byte("second")); !errors.Is(err, ErrConflict) {
		t.Fatalf("second CreateCA = %v, want ErrConflict", err)
	}
	if data, found, err := b.ReadCA(ctx); err != nil || !found || string(data) != "first" {
		t.Fatalf("ReadCA = %q, %v, %v; want the first", data, found, err)
	}
	big := strings.Repeat("x", maxCASize+1)
	if _, err := b.put(ctx, "test", "ci/state.db.ca", strings.NewReader(big), int64(len(big)), "text/plain", ""); err == nil {
		t.Fatal("overwrote the CA object with a conditional create")
	}
	other := newTestBackend(t, srv, 0)
	other.cfg.Key = "other/state.db"
	if _, err := other.put(ctx, "test", "other/state.db.ca", strings.NewReader(big), int64(len(big)), "text/plain", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.ReadCA(ctx); err == nil || !strings.Contains(err.Error(), "(key other/state.db.ca): the object is larger than a CA") {
		t.Fatalf("ReadCA of a big object = %v", err)
	}
}
