//go:build integration

package logstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/logstore"
)

// oddKeys are keys that XML 1.0 cannot carry (ESC, BEL, other C0 controls),
// that a url encoding could confuse (space, plus, percent) or that are
// simply not ASCII, beside ordinary ones.
var oddKeys = []string{
	"odd/2026/11/esc-\x1b]0;pwned\a\x1b[2Jhi.log",
	"odd/2026/11/bell-\a.log",
	"odd/2026/11/controls-\x01\x02\x1f\x7f.log",
	"odd/2026/11/a b+c%41%2B.log",
	"odd/2026/11/журнал.log",
	"odd/2026/11/plain-1.log",
	"odd/2026/11/plain-2.log",
}

// breakKey holds line breaks, which moto's HTTP server cannot take in a
// path: it is put only on MinIO.
const breakKey = "odd/2026/11/tab-\t-cr-\r-lf-\n.log"

// MinIO, like S3, url-encodes the StartAfter it echoes in a listing; moto
// echoes it raw, so on moto a page cannot resume after a key holding a
// control character (its listing is then XML that cannot be read), only
// after an ordinary one.

// TestListingKeepsEveryKeyExact lists a prefix holding keys with control
// characters next to ordinary ones, on MinIO (which the presign tests use)
// and on moto (which make run uses): every object comes back, each with its
// exact key, whole or a page at a time.
func TestListingKeepsEveryKeyExact(t *testing.T) {
	ctx := context.Background()
	motoServer, err := stack.StartMoto(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { motoServer.Stop() })
	motoClient := stack.LocalS3Client(motoServer.Endpoint)
	if err := stack.CreateBuckets(ctx, motoClient, bucket); err != nil {
		t.Fatal(err)
	}
	for _, emulator := range []struct {
		name   string
		client *s3.Client
		keys   []string
		page   int // resuming after every page's last key
	}{{"MinIO", client, append([]string{breakKey}, oddKeys...), 3}, {"moto", motoClient, oddKeys, 5}} {
		t.Run(emulator.name, func(t *testing.T) {
			for _, key := range emulator.keys {
				if _, err := emulator.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(key)}); err != nil {
					t.Fatalf("put %q: %v", key, err)
				}
			}
			want := slices.Sorted(slices.Values(emulator.keys))
			store := logstore.New(emulator.client, s3.NewPresignClient(emulator.client))
			all, err := store.All(ctx, bucket, "odd/")
			if err != nil {
				t.Fatal(err)
			}
			if got := keysOf(all); !slices.Equal(got, want) {
				t.Errorf("All: got %q, want %q", got, want)
			}
			for _, o := range all {
				if o.Size != int64(len(o.Key)) || o.LastModified < time.Now().Add(-time.Hour).UnixMilli() {
					t.Errorf("%q: got size %d, modified %d, want %d bytes written just now", o.Key, o.Size, o.LastModified, len(o.Key))
				}
			}
			var paged []string
			for after, done := "", false; !done; {
				page, end, err := store.Page(ctx, bucket, "odd/", after, emulator.page)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, keysOf(page)...)
				if len(page) > 0 {
					after = page[len(page)-1].Key
				}
				done = end
			}
			if !slices.Equal(paged, want) {
				t.Errorf("Page by %d: got %q, want %q", emulator.page, paged, want)
			}
		})
	}
}
