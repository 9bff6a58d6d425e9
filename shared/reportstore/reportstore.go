// Package reportstore adapts Amazon S3 for the large form of machine
// reports: it reads a report object of the reports bucket as a stream, and
// writes and reads the parts of a report applied in parts (docs/behaviour.md
// "Machine reports"). It translates SDK errors into fault kinds, with the
// other adapters' translation (shared/awsfault) beyond a missing object.
package reportstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// API is the part of the S3 client the store uses.
type API interface {
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// ReadTimeout bounds one attempt at reading a report object, its body
// included: the SDK's client timeout covers the body too, and a report of
// 100,000 machines is tens of megabytes, read while it is parsed.
const ReadTimeout = 30 * time.Second

// Store reads report objects.
type Store struct {
	api API
}

// New returns a store that reads with api.
func New(api API) *Store { return &Store{api: api} }

// Open builds a store on an S3 client configured by sdkconfig, as
// logstore.Open does.
func Open(ctx context.Context, pathStyle bool) (*Store, error) {
	cfg, err := sdkconfig.Load(ctx, sdkconfig.S3, ReadTimeout)
	if err != nil {
		return nil, err
	}
	return New(s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })), nil
}

// Open returns the body of the object bucket/key, to be closed. It returns
// fault.NotFound when there is no such object (a report expired before it
// was read, or a retry of one deleted by hand), and those of
// awsfault.Translate.
func (s *Store) Open(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	var missing *types.NoSuchKey
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("%w: %w", fault.NotFound("no report object s3://%s/%s", bucket, key), err)
	case err != nil:
		return nil, awsfault.Translate(awsfault.S3, fmt.Sprintf("read s3://%s/%s", bucket, key), err)
	}
	return out.Body, nil
}

// Put writes body as the object bucket/key. Errors: those of
// awsfault.Translate.
func (s *Store) Put(ctx context.Context, bucket, key string, body []byte) error {
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)})
	return awsfault.Translate(awsfault.S3, fmt.Sprintf("write s3://%s/%s", bucket, key), err)
}
