// Package s3test starts a real S3-compatible server for tests: moto's
// (PyPI moto[server]), on 127.0.0.1, after checking that it refuses a
// conditional PUT whose condition fails. scripts/moto.sh installs it
// (make test does, in CI); outside CI a test without it is skipped,
// saying how to get it.
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// AccessKey and SecretKey are the credentials the server takes (moto
// takes any).
const (
	AccessKey = "wdc-test-access-key"
	SecretKey = "wdc-test-secret-key"
)

// Server is a running test server.
type Server struct {
	// Endpoint is its URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
	client   *minio.Client
}

// Lazy starts the server on its first Get and stops it when the test
// that made it ends (t.Cleanup), for suites where only some tests need it.
type Lazy struct {
	t    testing.TB
	once sync.Once
	srv  *Server
	err  error
}

// NewLazy returns a Lazy bound to t.
func NewLazy(t testing.TB) *Lazy { return &Lazy{t: t} }

// Get returns the server, starting it the first time; the error says why
// there is none.
func (l *Lazy) Get() (*Server, error) {
	l.once.Do(func() {
		l.srv, l.err = start()
		if l.srv != nil {
			l.t.Cleanup(l.srv.stop)
		}
	})
	return l.srv, l.err
}

// Start returns a server for t, stopped when t ends. Without one it
// skips t, saying why and how to get one; in CI (CI=true) it fails t.
func Start(t testing.TB) *Server {
	t.Helper()
	srv, err := start()
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(srv.stop)
	return srv
}

// Unavailable skips t (fails it in CI) for a server that could not be
// had.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("no S3 test server: %v", err)
	}
	t.Skipf("no S3 test server (%v): run scripts/moto.sh install, or set WDC_TEST_MOTO_SERVER to a moto_server of moto[server] >= 5.2.5", err)
}

// motoServer finds the moto_server program: WDC_TEST_MOTO_SERVER, else
// the one scripts/moto.sh installs ($HOME/.cache/wdc-moto/bin), else
// PATH.
func motoServer() (string, error) {
	if p := os.Getenv("WDC_TEST_MOTO_SERVER"); p != "" {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "wdc-moto", "bin", "moto_server")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("moto_server")
	if err != nil {
		return "", errors.New("moto_server is not installed")
	}
	return p, nil
}

func start() (*Server, error) {
	prog, err := motoServer()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	log, err := os.CreateTemp("", "wdc-moto-*.log")
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(prog, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = log, log
	// No parent-death signal: it would follow the thread that started the
	// server, and a test binary may end threads (agent/confine's probe
	// does); the test's cleanup kills the server's group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", prog, err)
	}
	s := &Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	s.client, err = minio.New(fmt.Sprintf("127.0.0.1:%d", port), &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		s.stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err = s.client.ListBuckets(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			s.stop()
			out, _ := os.ReadFile(log.Name())
			return nil, fmt.Errorf("%s did not answer on %s within 30 s: %v\n%s", prog, s.Endpoint, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := s.checkConditional(ctx); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s: %w", prog, err)
	}
	os.Remove(log.Name())
	return s, nil
}

// checkConditional makes sure the server refuses, with 412, a create
// over an object that exists and a write on a stale ETag.
func (s *Server) checkConditional(ctx context.Context) error {
	const bucket = "wdc-probe"
	if err := s.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return err
	}
	n := 0
	put := func(cond func(*minio.PutObjectOptions)) (string, error) {
		o := minio.PutObjectOptions{DisableMultipart: true}
		cond(&o)
		n++ // content of its own each time, so each write has an ETag of its own
		data := []byte(fmt.Sprint("write ", n))
		info, err := s.client.PutObject(ctx, bucket, "k", bytes.NewReader(data), int64(len(data)), o)
		return info.ETag, err
	}
	etag, err := put(func(o *minio.PutObjectOptions) { o.SetMatchETagExcept("*") })
	if err != nil {
		return err
	}
	if _, err := put(func(o *minio.PutObjectOptions) { o.SetMatchETagExcept("*") }); minio.ToErrorResponse(err).StatusCode != 412 {
		return fmt.Errorf("a second PUT with If-None-Match: * was not refused with 412 (%v): moto[server] >= 5.2.5 is needed", err)
	}
	if _, err := put(func(o *minio.PutObjectOptions) { o.SetMatchETag(etag) }); err != nil {
		return err
	}
	if _, err := put(func(o *minio.PutObjectOptions) { o.SetMatchETag(etag) }); minio.ToErrorResponse(err).StatusCode != 412 {
		return fmt.Errorf("a PUT with If-Match on a stale ETag was not refused with 412 (%v): moto[server] >= 5.2.5 is needed", err)
	}
	return nil
}

func (s *Server) stop() {
	if s.cmd.Process != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		s.cmd.Wait()
	}
}

var nonBucket = regexp.MustCompile(`[^a-z0-9-]+`)

// Bucket makes a new bucket named after name (made a valid bucket name,
// unique on this server) and returns its name.
func (s *Server) Bucket(name string) (string, error) {
	b := strings.Trim(nonBucket.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(b) > 40 {
		b = b[:40]
	}
	b = fmt.Sprintf("wdc-%s-%d", b, time.Now().UnixNano()%1e9)
	return b, s.client.MakeBucket(context.Background(), b, minio.MakeBucketOptions{})
}

// Client is a client of the server with the test credentials.
func (s *Server) Client() *minio.Client { return s.client }
