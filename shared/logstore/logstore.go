// Package logstore adapts Amazon S3 for the task-log lookups: it lists the
// log objects under a prefix, whole or a page at a time, reads their start and
// end times from user metadata and presigns links to them. It translates SDK
// errors into fault kinds.
package logstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// API is the part of the S3 client the store uses.
type API interface {
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
}

// Presigner is the part of s3.PresignClient the store uses (Links, or the
// SDK's own).
type Presigner interface {
	PresignGetObject(context.Context, *s3.GetObjectInput, ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

// maxKeys is the most objects S3 returns in one ListObjectsV2 page.
const maxKeys = 1000

// Store reads task logs from S3 buckets.
type Store struct {
	api     API
	presign Presigner
}

// New returns a store that lists and reads with api and presigns with presign.
func New(api API, presign Presigner) *Store {
	return &Store{api: api, presign: presign}
}

// Open builds a store on an S3 client configured by sdkconfig (region,
// credentials and AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 from the
// environment). pathStyle puts the bucket in the URL path instead of the host
// name, as emulators on a bare host:port need.
func Open(ctx context.Context, pathStyle bool) (*Store, error) {
	client, err := Client(ctx, pathStyle)
	if err != nil {
		return nil, err
	}
	return New(client, NewLinks(client)), nil
}

// Client is the S3 client Open builds the store on.
func Client(ctx context.Context, pathStyle bool) (*s3.Client, error) {
	cfg, err := sdkconfig.Load(ctx, sdkconfig.S3, sdkconfig.S3AttemptTimeout)
	if err != nil {
		return nil, err
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }), nil
}

// Page lists at most limit (≥ 1) objects under prefix in key order, starting
// strictly after the key after ("" starts at the beginning), and reports
// whether it reached the end of the prefix (done). It follows S3's pages until
// it has limit objects or the prefix ends.
//
// It resumes from a key rather than from S3's continuation token so that a
// caller that keeps only part of a page can resume right after the last object
// it kept, and so that what it hands its own clients never expires.
//
// Errors: fault.NotFound when the bucket does not exist, fault.Unavailable when
// S3 throttles or cannot be reached, fault.Timeout when ctx expires.
func (s *Store) Page(ctx context.Context, bucket, prefix, after string, limit int) (objs []logkey.Object, done bool, err error) {
	if limit < 1 {
		return nil, false, fmt.Errorf("list s3://%s/%s: limit %d, want at least 1", bucket, prefix, limit)
	}
	return s.list(ctx, bucket, prefix, after, limit)
}

// All lists every object under prefix in key order, following every page.
// It returns the errors of Page.
func (s *Store) All(ctx context.Context, bucket, prefix string) ([]logkey.Object, error) {
	objs, _, err := s.list(ctx, bucket, prefix, "", math.MaxInt)
	return objs, err
}

func (s *Store) list(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error) {
	// Keys may hold any character, control characters included, and XML 1.0
	// cannot carry most of those: without url encoding, one key holding ESC
	// makes every page that holds it unreadable, and with it every other
	// object of the prefix.
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, EncodingType: types.EncodingTypeUrl}
	if after != "" {
		in.StartAfter = &after
	}
	var objs []logkey.Object
	for {
		// Asking for no more than is still wanted keeps S3 from sending keys
		// that would only be dropped.
		in.MaxKeys = aws.Int32(int32(min(limit-len(objs), maxKeys)))
		out, err := s.api.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, false, translate(fmt.Sprintf("list s3://%s/%s", bucket, prefix), bucket, err)
		}
		for _, o := range out.Contents {
			if len(objs) == limit {
				return objs, false, nil
			}
			key, err := url.QueryUnescape(aws.ToString(o.Key))
			if err != nil {
				return nil, false, fmt.Errorf("list s3://%s/%s: key %q is not url-encoded: %w", bucket, prefix, aws.ToString(o.Key), err)
			}
			objs = append(objs, logkey.Object{
				Bucket:       bucket,
				Key:          key,
				LastModified: millis(o.LastModified),
				Size:         aws.ToInt64(o.Size),
			})
		}
		// Like the SDK's paginator, a page without a next token is the last.
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			return objs, true, nil
		}
		if len(objs) == limit {
			return objs, false, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

func millis(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMilli()
}

// Times returns the object's start and end times (epoch ms) from its user
// metadata starttime and endtime, with one HEAD request. A value that is
// absent or not a decimal integer is nil, and so are both when the object was
// deleted since it was listed (log retention does that): one vanished object
// should not fail a whole lookup.
//
// Errors: fault.Unavailable when S3 throttles or cannot be reached,
// fault.Timeout when ctx expires.
func (s *Store) Times(ctx context.Context, bucket, key string) (start, end *int64, err error) {
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	var missing *types.NotFound
	if errors.As(err, &missing) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, translate(fmt.Sprintf("head s3://%s/%s", bucket, key), bucket, err)
	}
	return parseMillis(out.Metadata["starttime"]), parseMillis(out.Metadata["endtime"]), nil
}

// Stat returns what one HEAD tells of the object: its size, last-modified
// time (epoch ms, whole seconds as HTTP dates carry it), start and end
// times as Times reads them, and its ETag (as S3 writes it, quoted), which
// the reconciliation compares with the listing's. found is false when the
// object does not exist (deleted since it was announced or listed).
//
// Errors: those of Times.
func (s *Store) Stat(ctx context.Context, bucket, key string) (e logkey.Entry, etag string, found bool, err error) {
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	var missing *types.NotFound
	if errors.As(err, &missing) {
		return logkey.Entry{}, "", false, nil
	}
	if err != nil {
		return logkey.Entry{}, "", false, translate(fmt.Sprintf("head s3://%s/%s", bucket, key), bucket, err)
	}
	e = logkey.Entry{
		Object: logkey.Object{Bucket: bucket, Key: key, LastModified: millis(out.LastModified), Size: aws.ToInt64(out.ContentLength)},
		Start:  parseMillis(out.Metadata["starttime"]),
		End:    parseMillis(out.Metadata["endtime"]),
	}
	return e, aws.ToString(out.ETag), true, nil
}

// parseMillis reads one metadata value; the SDK has lower-cased the names and
// trimmed the values.
func parseMillis(v string) *int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// Links presigns two GET URLs for the object, both expiring ttl from now at
// the same instant: get serves the object as stored; download makes a browser
// save it, overriding the response's Content-Disposition (attachment, named
// after the key's last path segment) and Content-Encoding (identity, so that a
// gzipped log is saved as it is stored instead of being unpacked on the way).
// It makes no request to S3; errors are internal (no credentials, for one).
func (s *Store) Links(ctx context.Context, bucket, key string, ttl time.Duration) (get, download string, err error) {
	at := signedAt(time.Now(), ttl)
	g, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key}, at)
	if err != nil {
		return "", "", fmt.Errorf("presign s3://%s/%s: %w", bucket, key, err)
	}
	d, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{
		Bucket:                     &bucket,
		Key:                        &key,
		ResponseContentDisposition: aws.String(mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(key)})),
		ResponseContentEncoding:    aws.String("identity"),
	}, at)
	if err != nil {
		return "", "", fmt.Errorf("presign s3://%s/%s for download: %w", bucket, key, err)
	}
	return g.URL, d.URL, nil
}

// signedAt makes a presign request sign as of t, valid for ttl. The SDK would
// read the clock for each URL, and two readings can fall on either side of a
// second boundary: the links of one object would then expire a second apart.
func signedAt(t time.Time, ttl time.Duration) func(*s3.PresignOptions) {
	return func(o *s3.PresignOptions) {
		o.Expires = ttl
		o.Presigner = fixedClock{o.Presigner, t}
	}
}

type fixedClock struct {
	s3.HTTPPresignerV4
	t time.Time
}

func (c fixedClock) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string, _ time.Time, opts ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return c.HTTPPresignerV4.PresignHTTP(ctx, creds, r, payloadHash, service, region, c.t, opts...)
}

// translate maps SDK errors onto fault kinds; what says what failed, bucket
// names the bucket for the not-found message. A missing bucket is S3's own
// answer; every other failure goes through the one translation of the
// adapters (shared/awsfault).
func translate(what, bucket string, err error) error {
	var apiErr smithy.APIError
	if fault.KindOf(err) == fault.KindInternal && errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket" {
		return fmt.Errorf("%s: %w: %w", what, fault.NotFound("S3 bucket %s does not exist", bucket), err)
	}
	return awsfault.Translate(awsfault.S3, what, err)
}

// NotificationAPI is the S3 call Notifications makes.
type NotificationAPI interface {
	GetBucketNotificationConfiguration(context.Context, *s3.GetBucketNotificationConfigurationInput, ...func(*s3.Options)) (*s3.GetBucketNotificationConfigurationOutput, error)
}

// Notifications reads the log buckets' notification configuration.
type Notifications struct{ API NotificationAPI }

// EventsOn tells whether bucket sends its events to EventBridge, which is
// how the task-log index hears of its objects (docs/behaviour.md
// "Task-log index").
//
// Errors: fault.NotFound when the bucket does not exist, those of Page.
func (n Notifications) EventsOn(ctx context.Context, bucket string) (bool, error) {
	out, err := n.API.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: &bucket})
	if err != nil {
		return false, translate(fmt.Sprintf("notification configuration of %s", bucket), bucket, err)
	}
	return out.EventBridgeConfiguration != nil, nil
}

// Buckets is what the task-log indexer reads of the log buckets: their
// objects, and their notification configuration.
type Buckets struct {
	*Store
	Notifications
}

// NewBuckets returns the log buckets as client reads them.
func NewBuckets(client *s3.Client) Buckets {
	return Buckets{New(client, NewLinks(client)), Notifications{API: client}}
}
