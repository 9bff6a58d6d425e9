package logstore_test

import (
	"context"
	"mime"
	"net/http"
	"path"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"pgregory.net/rapid"

	"github.com/fleetops/fleet/shared/logstore"
)

// at signs as of a fixed instant, so that two presigners can be compared.
type at struct {
	s3.HTTPPresignerV4
	t time.Time
}

func (a at) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string, _ time.Time, opts ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return a.HTTPPresignerV4.PresignHTTP(ctx, creds, r, payloadHash, service, region, a.t, opts...)
}

// Links signs what s3.PresignClient signs, to the byte: any key, a
// download's overrides or none, path style or virtual hosts, any region,
// with or without a session token, any expiry.
func TestLinksAreThePresignClientsToTheByte(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		token := rapid.SampledFrom([]string{"", "session-token/+="}).Draw(t, "token")
		region := rapid.SampledFrom([]string{"us-east-1", "eu-west-1", "ap-southeast-2"}).Draw(t, "region")
		pathStyle := rapid.Bool().Draw(t, "pathStyle")
		endpoint := rapid.SampledFrom([]string{"", "http://127.0.0.1:9000", "https://s3.example.com/prefix"}).Draw(t, "endpoint")
		bucket := rapid.SampledFrom([]string{"logs", "task-logs-123456789012", "my.logs.bucket"}).Draw(t, "bucket")
		key := rapid.StringOfN(rapid.OneOf(rapid.SampledFrom([]rune("/ +%?#&=;:@!$'()*,~é_-.\\\"<>")), rapid.Rune()), 1, 64, -1).Draw(t, "key")
		download := rapid.Bool().Draw(t, "download")
		expires := time.Duration(rapid.IntRange(1, 7*24*3600).Draw(t, "expires")) * time.Second
		client := s3.NewFromConfig(aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", token)}, func(o *s3.Options) {
			o.UsePathStyle = pathStyle
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		})
		in := &s3.GetObjectInput{Bucket: &bucket, Key: &key}
		if download {
			in.ResponseContentDisposition = aws.String(mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(key)}))
			in.ResponseContentEncoding = aws.String("identity")
		}
		signedAt := time.Date(2026, 12, 2, 13, 45, 7, 0, time.UTC)
		opts := func(o *s3.PresignOptions) {
			o.Expires = expires
			o.Presigner = at{o.Presigner, signedAt}
		}
		want, wantErr := s3.NewPresignClient(client).PresignGetObject(context.Background(), in, opts)
		got, err := logstore.NewLinks(client).PresignGetObject(context.Background(), in, opts)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("got error %v, the SDK's %v", err, wantErr)
		}
		if err == nil && got.URL != want.URL {
			t.Fatalf("got  %s\nwant %s", got.URL, want.URL)
		}
	})
}
