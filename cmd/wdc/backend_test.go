package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/wdc-dev/wdc/backend"
	"github.com/wdc-dev/wdc/internal/s3test"
)

// TestBackendCA: the first command that needs the backend's CA makes it
// (commands racing end with one), every later one reads that one; an
// object in its place that is not a CA is refused, naming the backend,
// the key and what to do.
func TestBackendCA(t *testing.T) {
	srv := s3test.Start(t)
	bucket, err := srv.Bucket("backend-ca")
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{"AWS_ACCESS_KEY_ID": s3test.AccessKey, "AWS_SECRET_ACCESS_KEY": s3test.SecretKey}[k]
	}
	newBackend := func(key string) *backend.S3 {
		b, err := backend.NewS3(backend.S3Config{Bucket: bucket, Key: key, Endpoint: srv.Endpoint, PathStyle: true}, getenv)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()

	b := newBackend("ci/state.db")
	fps := make([]string, 4)
	var wg sync.WaitGroup
	for i := range fps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ca, err := loadBackendCA(ctx, b)
			if err != nil {
				t.Error(err)
				return
			}
			fps[i] = ca.Fingerprint()
		}()
	}
	wg.Wait()
	for _, fp := range fps[1:] {
		if fp != fps[0] {
			t.Fatalf("racing commands made more than one CA: %q", fps)
		}
	}
	again, err := backendCA(ctx, b)()
	if err != nil || again.Fingerprint() != fps[0] {
		t.Fatalf("a later command's CA = %v, %v; want %s", again, err, fps[0])
	}

	for _, tc := range []struct {
		name, content, want string
	}{
		{"not PEM", "hello\n", `tlsca: the CA object: no PEM "CERTIFICATE" block`},
		{"a certificate alone", string(again.CertPEM), `no PEM "PRIVATE KEY" block after the certificate`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "bad-" + strings.ReplaceAll(tc.name, " ", "-") + "/state.db"
			if _, err := srv.Client().PutObject(ctx, bucket, key+".ca", strings.NewReader(tc.content), int64(len(tc.content)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := loadBackendCA(ctx, newBackend(key))
			var be *backend.Error
			if !errors.As(err, &be) || !strings.Contains(err.Error(), "backend s3://"+bucket+"/"+key+": read the CA (key "+key+".ca): ") ||
				!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "remove it, and the next command that needs the CA makes a new one") {
				t.Fatalf("loadBackendCA = %v\nwant the backend, the key, %q and what to do", err, tc.want)
			}
		})
	}
}
