package backend

import (
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/minio/minio-go/v7"
)

// BlobsSuffix names the folder of blobs beside the state object: the
// blob with SHA-256 HASH is the object KEY.blobs/HASH.
const BlobsSuffix = ".blobs/"

var blobHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (b *S3) blobKey(hash string) (string, error) {
	if !blobHash.MatchString(hash) {
		return "", &Error{Backend: b.Name(), Op: "blob", Err: errors.New("not a SHA-256 hash: " + hash)}
	}
	return b.cfg.Key + BlobsSuffix + hash, nil
}

// PutBlob uploads the file path as the blob hash (its SHA-256, which the
// caller vouches for: the blob comes from its own content-addressed
// store). A blob is written once: if it is there already nothing is
// written (a conditional create, If-None-Match: *).
func (b *S3) PutBlob(ctx context.Context, hash, path string) error {
	key, err := b.blobKey(hash)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = b.put(ctx, "write a blob", key, f, fi.Size(), "application/octet-stream", "")
	if errors.Is(err, ErrConflict) {
		return nil // there already: a blob never changes
	}
	return err
}

// GetBlob streams the blob hash to w; found is false when the bucket does
// not hold it. The caller checks the bytes against hash (an
// artifact.Store's Put does).
func (b *S3) GetBlob(ctx context.Context, hash string, w io.Writer) (found bool, err error) {
	key, err := b.blobKey(hash)
	if err != nil {
		return false, err
	}
	r, err := b.client.GetObject(ctx, b.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return false, b.fail(ctx, "read a blob", key, err)
	}
	defer r.Close()
	if _, err := io.Copy(w, r); err != nil {
		if isNotFound(err) {
			return false, b.noBucket(ctx, "read a blob", key)
		}
		return false, b.fail(ctx, "read a blob", key, err)
	}
	return true, nil
}

// ListBlobs calls fn with the hash and size of each blob in the bucket
// (the objects KEY.blobs/HASH), in the order the store lists them. An
// object there whose name is not a SHA-256 hash is not a blob and is left
// out. fn's error stops the listing and is returned as it is.
func (b *S3) ListBlobs(ctx context.Context, fn func(hash string, size int64) error) error {
	prefix := b.cfg.Key + BlobsSuffix
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing when fn stops it
	for obj := range b.client.ListObjects(ctx, b.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			if isNotFound(obj.Err) {
				if err := b.noBucket(ctx, "list the blobs", prefix); err != nil {
					return err
				}
				return nil
			}
			return b.fail(ctx, "list the blobs", prefix, obj.Err)
		}
		hash, ok := strings.CutPrefix(obj.Key, prefix)
		if !ok || !blobHash.MatchString(hash) {
			continue
		}
		if err := fn(hash, obj.Size); err != nil {
			return err
		}
	}
	return nil
}

// RemoveBlob removes the blob hash from the bucket. Removing one the
// bucket does not hold is not an error. Which blobs to remove is the
// caller's to decide (wdc gc, under the lock, with the state put back
// first: docs/configuration.md, "Backend").
func (b *S3) RemoveBlob(ctx context.Context, hash string) error {
	key, err := b.blobKey(hash)
	if err != nil {
		return err
	}
	if err := b.client.RemoveObject(ctx, b.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return b.fail(ctx, "remove a blob", key, err)
	}
	return nil
}
