package backend

import (
	"bytes"
	"context"
	"errors"
)

// CASuffix names the object that holds the state's own CA beside the
// state: KEY.ca, the CA's certificate and private key as one PEM bundle
// (package tlsca makes and reads it). With a backend every apply, on any
// machine, serves HTTPS with this one CA, so a join file made anywhere
// pins it. It is not in the state: the state is copied to every machine
// that plans, and holds no secret.
const CASuffix = ".ca"

// maxCASize bounds the CA object wdc reads (a bundle is under 1 KiB).
const maxCASize = 64 << 10

// CAName is the CA object: s3://BUCKET/KEY.ca.
func (b *S3) CAName() string { return b.Name() + CASuffix }

// ReadCA returns the content of the CA object; found is false when there
// is none. An object larger than any CA is an *Error.
func (b *S3) ReadCA(ctx context.Context) (data []byte, found bool, err error) {
	key := b.cfg.Key + CASuffix
	var buf bytes.Buffer
	_, found, err = b.fetch(ctx, "read the CA", key, &buf, maxCASize+1, func() error { buf.Reset(); return nil })
	if err != nil || !found {
		return nil, found, err
	}
	if buf.Len() > maxCASize {
		return nil, false, &Error{Backend: b.Name(), Object: key, Op: "read the CA", Err: errors.New("the object is larger than a CA's certificate and key"),
			Hint: "it is not what wdc wrote; remove it to make a new CA (workers then need its fingerprint: join files made before stop working)"}
	}
	return buf.Bytes(), true, nil
}

// CreateCA writes data as the CA object, only when there is none (a
// conditional create, If-None-Match: *), so that two machines that make a
// CA at once end with one: the loser's error wraps ErrConflict, and it
// reads the winner's.
func (b *S3) CreateCA(ctx context.Context, data []byte) error {
	_, err := b.put(ctx, "write the CA", b.cfg.Key+CASuffix, bytes.NewReader(data), int64(len(data)), "application/x-pem-file", "")
	return err
}
