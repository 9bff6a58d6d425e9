package stack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Client returns a client for the S3 server (moto, MinIO) at endpoint,
// signing with accessKey and secretKey in LocalRegion. It addresses buckets in
// the path, as a server on a bare host:port needs, and, like DynamoDBClient,
// reads no environment or shared config file.
func S3Client(endpoint, accessKey, secretKey string) *s3.Client {
	return s3.NewFromConfig(aws.Config{
		Region:      LocalRegion,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

// LocalS3Client returns a client for the emulator at endpoint, with the
// emulator's credentials, as DynamoDBClient is for DynamoDB.
func LocalS3Client(endpoint string) *s3.Client {
	return S3Client(endpoint, localAccessKey, localSecretKey)
}

// CreateBuckets creates the named buckets. It is idempotent: a bucket that
// already exists and belongs to the caller is kept as it is. LocalRegion is
// us-east-1, the one region where a bucket needs no location constraint.
func CreateBuckets(ctx context.Context, client *s3.Client, names ...string) error {
	for _, name := range names {
		_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
		var owned *types.BucketAlreadyOwnedByYou
		if err != nil && !errors.As(err, &owned) {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

const s3Bucket = "AWS::S3::Bucket"

// LocalBucketName names a bucket of the template after its logical id, in
// lower case as bucket names must be ("ReportsBucket" is "reportsbucket"):
// the local default, also used by dev/env.local.json.
func LocalBucketName(logicalID string) string { return strings.ToLower(logicalID) }

// Buckets lists the logical ids of the template's S3 buckets, sorted.
func (t *Template) Buckets() []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == s3Bucket {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// LocalBuckets returns every bucket the local stack creates: the template's
// own (LocalBucketName) and the log buckets LogsFunction reads.
func (t *Template) LocalBuckets() ([]string, error) {
	names, err := t.LogBuckets()
	if err != nil {
		return nil, err
	}
	for _, id := range t.Buckets() {
		names = append(names, LocalBucketName(id))
	}
	return names, nil
}
