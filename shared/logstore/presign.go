package logstore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/encoding/httpbinding"
)

// Links presigns GET URLs as s3.PresignClient does, to the byte, without
// running the client's middleware stack for each one: a bucket's endpoint
// is resolved once, by the client's own resolver, and each URL is built on
// it and signed by the SDK's SigV4 signer. A lookup answers two links per
// log, up to 100 a page, and the stack (endpoint rules, serializer,
// presign middleware) was two thirds of a lookup's allocations
// (docs/decisions.md "Handler time"). TestLinksAreThePresignClientsToTheByte
// holds it to the SDK's output.
type Links struct {
	options   s3.Options
	signer    *v4.Signer
	endpoints sync.Map // bucket → *url.URL
}

// NewLinks presigns with client's region, credentials and endpoint
// settings.
func NewLinks(client *s3.Client) *Links {
	return &Links{options: client.Options(), signer: v4.NewSigner(func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = true // S3 signs the path as it is sent
	})}
}

// PresignGetObject presigns a GET of in's object with the response
// overrides Links uses (content disposition and encoding); opts set the
// expiry and may wrap the signer (signedAt does).
func (l *Links) PresignGetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error) {
	o := s3.PresignOptions{Presigner: l.signer, Expires: 15 * time.Minute}
	for _, f := range opts {
		f(&o)
	}
	bucket, key := aws.ToString(in.Bucket), aws.ToString(in.Key)
	if bucket == "" || key == "" {
		return nil, fmt.Errorf("presign: a bucket and a key are needed")
	}
	endpoint, err := l.endpoint(ctx, bucket)
	if err != nil {
		return nil, err
	}
	u := *endpoint
	u.RawPath = strings.TrimSuffix(endpoint.EscapedPath(), "/") + "/" + httpbinding.EscapePath(key, false)
	u.Path = strings.TrimSuffix(endpoint.Path, "/") + "/" + key
	q := url.Values{"x-id": {"GetObject"}, "X-Amz-Expires": {strconv.FormatInt(int64(o.Expires/time.Second), 10)}}
	if in.ResponseContentDisposition != nil {
		q.Set("response-content-disposition", *in.ResponseContentDisposition)
	}
	if in.ResponseContentEncoding != nil {
		q.Set("response-content-encoding", *in.ResponseContentEncoding)
	}
	u.RawQuery = q.Encode()
	req := &http.Request{Method: http.MethodGet, URL: &u, Host: u.Host, Header: http.Header{}}
	creds, err := l.options.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("presign: credentials: %w", err)
	}
	signed, header, err := o.Presigner.PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", l.options.Region, time.Now())
	if err != nil {
		return nil, err
	}
	return &v4.PresignedHTTPRequest{URL: signed, Method: http.MethodGet, SignedHeader: header}, nil
}

// endpoint is bucket's endpoint as the client resolves it for a GET of an
// object: the host, and the path the key follows (the bucket's, path
// style).
func (l *Links) endpoint(ctx context.Context, bucket string) (*url.URL, error) {
	if u, ok := l.endpoints.Load(bucket); ok {
		return u.(*url.URL), nil
	}
	o := l.options
	e, err := o.EndpointResolverV2.ResolveEndpoint(ctx, s3.EndpointParameters{
		Bucket:                         &bucket,
		Region:                         &o.Region,
		UseFIPS:                        aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
		UseDualStack:                   aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
		Endpoint:                       o.BaseEndpoint,
		ForcePathStyle:                 aws.Bool(o.UsePathStyle),
		Accelerate:                     aws.Bool(o.UseAccelerate),
		DisableMultiRegionAccessPoints: aws.Bool(o.DisableMultiRegionAccessPoints),
		UseArnRegion:                   aws.Bool(o.UseARNRegion),
		DisableS3ExpressSessionAuth:    o.DisableS3ExpressSessionAuth,
	})
	if err != nil {
		return nil, fmt.Errorf("presign: resolve the endpoint of bucket %s: %w", bucket, err)
	}
	u := e.URI
	l.endpoints.Store(bucket, &u)
	return &u, nil
}
