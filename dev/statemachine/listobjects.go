package statemachine

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ListAPI is the S3 call ListObjects makes.
type ListAPI interface {
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// listPage is the keys of one page, as Step Functions reads them.
const listPage = 1000

// ListObjects is the List of the ItemReader arn:aws:states:::s3:listObjectsV2
// over api: pages of 1,000 objects in key order, each item in the shape
// Step Functions gives it: Key, Size, LastModified (epoch seconds), Etag
// and StorageClass. It asks S3 to url-encode the keys and decodes them: a
// key holding a control character, which XML cannot carry, must not stop
// the listing.
func ListObjects(api ListAPI) List {
	return func(ctx context.Context, bucket, prefix, token string) ([]any, string, error) {
		in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, MaxKeys: aws.Int32(listPage), EncodingType: types.EncodingTypeUrl}
		if token != "" {
			in.ContinuationToken = &token
		}
		out, err := api.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, "", err
		}
		items := make([]any, 0, len(out.Contents))
		for _, o := range out.Contents {
			key, err := url.QueryUnescape(aws.ToString(o.Key))
			if err != nil {
				return nil, "", fmt.Errorf("list s3://%s/%s: key %q is not url-encoded: %w", bucket, prefix, aws.ToString(o.Key), err)
			}
			items = append(items, map[string]any{
				"Key":          key,
				"Size":         float64(aws.ToInt64(o.Size)),
				"LastModified": float64(aws.ToTime(o.LastModified).Unix()),
				"Etag":         aws.ToString(o.ETag),
				"StorageClass": string(o.StorageClass),
			})
		}
		if !aws.ToBool(out.IsTruncated) {
			return items, "", nil
		}
		return items, aws.ToString(out.NextContinuationToken), nil
	}
}
