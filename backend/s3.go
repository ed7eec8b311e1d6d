package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Defaults of the backend block (docs/configuration.md, "Backend").
const (
	// DefaultRegion is the region signed for when the block gives none.
	DefaultRegion = "us-east-1"
	// DefaultLockTTL is how long the lock lives after its last renewal:
	// a runner that died leaves a lock that expires within it.
	DefaultLockTTL = 60 * time.Second
	// LockSuffix names the lock object: KEY + LockSuffix.
	LockSuffix = ".lock"
)

// CredentialEnvs are the environment variables the backend's credentials
// come from. With a backend, apply removes them from the environment its
// workers (and so their tasks) inherit; a task that needs the store sets
// its own in its env.
var CredentialEnvs = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// S3Config is the backend "s3" block, as package hcl decoded it.
type S3Config struct {
	Bucket string
	Key    string
	// Endpoint is the store's URL (http:// or https://); "" is AWS S3 in
	// Region.
	Endpoint string
	// Region is the region requests are signed for (default
	// DefaultRegion).
	Region string
	// PathStyle addresses the bucket in the path (http://host/bucket/key)
	// rather than in the host name, as most S3-compatible stores want.
	PathStyle bool
	// Profile names a profile of the shared credentials file, used when
	// the environment has no AWS_ACCESS_KEY_ID (default AWS_PROFILE, then
	// "default").
	Profile string
	// LockTTL is the lock's life after its last renewal (default
	// DefaultLockTTL).
	LockTTL time.Duration
}

// S3 is a state kept in one object of an S3-compatible store.
type S3 struct {
	cfg      S3Config
	client   *minio.Client
	endpoint string // as shown in messages
}

// Object is what a read or a write of an object returned.
type Object struct {
	ETag string // without quotes
	Size int64
}

// NewS3 makes the backend of cfg. Credentials come from getenv
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), else
// from the profile (cfg.Profile, AWS_PROFILE or "default") of the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials); with neither it fails saying what to set. Nothing
// is sent to the store.
func NewS3(cfg S3Config, getenv func(string) string) (*S3, error) {
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = DefaultLockTTL
	}
	b := &S3{cfg: cfg}
	if cfg.Bucket == "" || cfg.Key == "" {
		return nil, b.errorf("", "the backend needs a bucket and a key")
	}
	host, secure := "s3."+cfg.Region+".amazonaws.com", true
	b.endpoint = "https://" + host
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, b.errorf("", "endpoint %q is not a URL of the form https://HOST[:PORT]", cfg.Endpoint)
		}
		host, secure, b.endpoint = u.Host, u.Scheme == "https", u.Scheme+"://"+u.Host
	}
	creds, err := b.credentials(getenv)
	if err != nil {
		return nil, err
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	b.client, err = minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: cfg.Region, BucketLookup: lookup, MaxRetries: 3})
	if err != nil {
		return nil, b.errorf("", "%v", err)
	}
	return b, nil
}

// credentials picks the credentials NewS3 describes.
func (b *S3) credentials(getenv func(string) string) (*credentials.Credentials, error) {
	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, b.errorf("", "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together (one of them is empty)")
		}
		return credentials.NewStaticV4(id, secret, getenv("AWS_SESSION_TOKEN")), nil
	}
	file := getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		if home := getenv("HOME"); home != "" {
			file = filepath.Join(home, ".aws", "credentials")
		}
	}
	profile := b.cfg.Profile
	if profile == "" {
		profile = getenv("AWS_PROFILE")
	}
	if profile == "" {
		profile = "default"
	}
	if file != "" {
		if _, err := os.Stat(file); err == nil {
			c := credentials.NewFileAWSCredentials(file, profile)
			if _, err := c.GetWithContext(nil); err != nil {
				return nil, b.errorf("", "profile %q of %s: %v", profile, file, err)
			}
			return c, nil
		}
	}
	return nil, b.errorf("", "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones) in the environment, "+
		"or name a profile of the shared credentials file (profile in the backend block, or AWS_PROFILE); credentials are never read from the configuration")
}

// Name is the backend as messages name it: s3://BUCKET/KEY.
func (b *S3) Name() string { return "s3://" + b.cfg.Bucket + "/" + b.cfg.Key }

// Key is the state object's key.
func (b *S3) Key() string { return b.cfg.Key }

// LockName is the lock object: s3://BUCKET/KEY.lock.
func (b *S3) LockName() string { return b.Name() + LockSuffix }

// LockTTL is the lock's life after its last renewal.
func (b *S3) LockTTL() time.Duration { return b.cfg.LockTTL }

// Get downloads the state object to the file dest (made 0600, replaced
// when it exists) and returns its ETag; found is false, and dest is not
// made, when the key holds nothing.
func (b *S3) Get(ctx context.Context, dest string) (obj Object, found bool, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return Object{}, false, fmt.Errorf("backend %s: read the state: %w", b.Name(), err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	obj, found, err = b.fetch(ctx, "read the state", b.cfg.Key, tmp, 0, func() error {
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return tmp.Truncate(0)
	})
	if err != nil || !found {
		return Object{}, found, err
	}
	if err := tmp.Sync(); err != nil {
		return Object{}, false, fmt.Errorf("backend %s: read the state: %w", b.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return Object{}, false, fmt.Errorf("backend %s: read the state: %w", b.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return Object{}, false, err
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return Object{}, false, fmt.Errorf("backend %s: read the state: %w", b.Name(), err)
	}
	return obj, true, nil
}

// fetch reads the object key into w (at most limit bytes, when limit >
// 0) with its ETag; found is false when the key holds nothing. The client
// reads an object in more than one request, each on the first one's ETag:
// an object replaced meanwhile (a checkpoint, a renewal) fails the read,
// which is then tried again from the start (reset empties w), a few
// times.
func (b *S3) fetch(ctx context.Context, op, key string, w io.Writer, limit int64, reset func() error) (Object, bool, error) {
	for try := 0; ; try++ {
		r, err := b.client.GetObject(ctx, b.cfg.Bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return Object{}, false, b.fail(ctx, op, key, err)
		}
		var src io.Reader = r
		if limit > 0 {
			src = io.LimitReader(r, limit)
		}
		// Read first: the first read's request gives the object's
		// information, which Stat then returns without another request.
		n, err := io.Copy(w, src)
		var info minio.ObjectInfo
		if err == nil {
			info, err = r.Stat()
		}
		r.Close()
		// (after the read, Stat's Size is what is left unread)
		if err == nil && info.Size != 0 && (limit <= 0 || n < limit) {
			err = fmt.Errorf("read %d bytes of %d", n, n+info.Size)
		}
		switch {
		case err == nil:
			return Object{ETag: strings.Trim(info.ETag, `"`), Size: n}, true, nil
		case isNotFound(err):
			return Object{}, false, b.noBucket(ctx, op, key)
		case minio.ToErrorResponse(err).StatusCode == 412 && try < 4 && ctx.Err() == nil:
			if err := reset(); err != nil {
				return Object{}, false, err
			}
			continue
		default:
			return Object{}, false, b.fail(ctx, op, key, err)
		}
	}
}

// Stat returns the state object's ETag and size without its content;
// found is false when the key holds nothing.
func (b *S3) Stat(ctx context.Context) (obj Object, found bool, err error) {
	info, err := b.client.StatObject(ctx, b.cfg.Bucket, b.cfg.Key, minio.StatObjectOptions{})
	if err != nil {
		if isNotFound(err) {
			return Object{}, false, b.noBucket(ctx, "read the state", b.cfg.Key)
		}
		return Object{}, false, b.fail(ctx, "read the state", b.cfg.Key, err)
	}
	return Object{ETag: strings.Trim(info.ETag, `"`), Size: info.Size}, true, nil
}

// Put uploads the file src as the state object with a conditional PUT:
// on the ETag ifMatch, or, when ifMatch is "", only if the key holds
// nothing (If-None-Match: *). The object is replaced whole or not at all.
// A condition that does not hold is an error wrapping ErrConflict.
func (b *S3) Put(ctx context.Context, src string, ifMatch string) (Object, error) {
	f, err := os.Open(src)
	if err != nil {
		return Object{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Object{}, err
	}
	return b.put(ctx, "write the state", b.cfg.Key, f, fi.Size(), "application/vnd.sqlite3", ifMatch)
}

// put is a conditional PUT of one object in one request (no multipart
// upload: the condition holds for the whole object).
func (b *S3) put(ctx context.Context, op, key string, r io.Reader, size int64, contentType, ifMatch string) (Object, error) {
	opts := minio.PutObjectOptions{DisableMultipart: true, ContentType: contentType, SendContentMd5: true}
	if ifMatch == "" {
		opts.SetMatchETagExcept("*")
	} else {
		opts.SetMatchETag(ifMatch)
	}
	info, err := b.client.PutObject(ctx, b.cfg.Bucket, key, r, size, opts)
	if err != nil {
		return Object{}, b.fail(ctx, op, key, err)
	}
	return Object{ETag: strings.Trim(info.ETag, `"`), Size: info.Size}, nil
}

// noBucket is the error of a read that found no object at key: nil when
// the bucket is there (the key holds nothing), else the missing bucket's
// (a missing bucket makes every read of a key "not found").
func (b *S3) noBucket(ctx context.Context, op, key string) error {
	ok, err := b.client.BucketExists(ctx, b.cfg.Bucket)
	if err != nil {
		return b.fail(ctx, op, key, err)
	}
	if !ok {
		return b.fail(ctx, op, key, minio.ErrorResponse{StatusCode: 404, Code: "NoSuchBucket", BucketName: b.cfg.Bucket})
	}
	return nil
}

func isNotFound(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == 404 || r.Code == "NoSuchKey" || r.Code == "NotFound"
}

// Errors of the backend, wrapped by an *Error.
var (
	// ErrConflict: a conditional write found the object changed (or
	// present, for a create): someone else wrote it.
	ErrConflict = errors.New("the object changed since it was read")
	// ErrNoConditionalWrites: the store does not refuse a conditional
	// write whose condition fails, so it cannot hold a lock.
	ErrNoConditionalWrites = errors.New("the store does not support conditional writes (If-None-Match, If-Match)")
	// ErrCredentials: the store refused the credentials.
	ErrCredentials = errors.New("the store refused the credentials")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("the bucket does not exist")
	// ErrUnreachable: the store could not be reached.
	ErrUnreachable = errors.New("the store cannot be reached")
)

// Error is a failure of the backend: which one, which object, what it was
// doing, why, and what to do.
type Error struct {
	Backend string // s3://BUCKET/KEY
	Object  string // the object's key, or "" for the backend as a whole
	Op      string // what it was doing ("read the state")
	Err     error
	Hint    string // what to do
}

func (e *Error) Error() string {
	var s strings.Builder
	fmt.Fprintf(&s, "backend %s", e.Backend)
	if e.Op != "" {
		fmt.Fprintf(&s, ": %s", e.Op)
	}
	if e.Object != "" {
		fmt.Fprintf(&s, " (key %s)", e.Object)
	}
	fmt.Fprintf(&s, ": %v", e.Err)
	if e.Hint != "" {
		fmt.Fprintf(&s, ": %s", e.Hint)
	}
	return s.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errorf is a configuration error of the backend.
func (b *S3) errorf(op, format string, args ...any) error {
	return &Error{Backend: b.Name(), Op: op, Err: fmt.Errorf(format, args...)}
}

// fail turns a client error into an *Error that says what to do.
func (b *S3) fail(ctx context.Context, op, key string, err error) error {
	e := &Error{Backend: b.Name(), Object: key, Op: op, Err: err}
	r := minio.ToErrorResponse(err)
	var uerr *url.Error
	switch {
	case ctx.Err() != nil:
		e.Err = ctx.Err()
	case r.StatusCode == 412 || r.Code == "PreconditionFailed" || r.Code == "ConditionalRequestConflict" || r.StatusCode == 409 && r.Code == "ConditionalRequestConflict":
		e.Err = ErrConflict
	case r.StatusCode == 501 || r.Code == "NotImplemented":
		e.Err = fmt.Errorf("%w: %s", ErrNoConditionalWrites, r.Message)
		e.Hint = "use a store that does (AWS S3, MinIO, Ceph RGW, SeaweedFS, …)"
	case r.Code == "NoSuchBucket":
		e.Err = fmt.Errorf("%w: %s", ErrNoBucket, b.cfg.Bucket)
		e.Hint = "create it (wdc never creates buckets), or check bucket and endpoint (" + b.endpoint + ")"
	case r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch" || r.Code == "InvalidToken" || r.Code == "ExpiredToken" ||
		r.Code == "AccessDenied" || r.StatusCode == 403 || r.StatusCode == 401:
		e.Err = fmt.Errorf("%w (%s: %s)", ErrCredentials, r.Code, r.Message)
		e.Hint = "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (or the profile), and that they may read and write " + b.Name() + "*"
	case errors.As(err, &uerr) || r.StatusCode == 0 && !errors.Is(err, fs.ErrNotExist) && r.Code == "":
		e.Err = fmt.Errorf("%w at %s: %v", ErrUnreachable, b.endpoint, err)
		e.Hint = "check endpoint and the network, then run the command again"
	}
	return e
}
