//go:build integration

package stack

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Commands after make run (make events, make report, make seed-logs) find
// every table and bucket there: they say they create something only when
// they do, and name only what they create.
func TestUpSaysItCreatesOnlyWhatIsMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	up := func(addr string) (*Local, string) {
		t.Helper()
		var progress bytes.Buffer
		local, err := UpWith(ctx, addr, Options{Command: "test", Progress: &progress})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { local.Close() })
		return local, progress.String()
	}
	first, said := up("127.0.0.1:0")
	if !strings.Contains(said, "local stack: creating the tables ") || !strings.Contains(said, " and the buckets ") {
		t.Errorf("a new emulator: got\n%s\nwant the tables and buckets created said", said)
	}
	addr := strings.TrimPrefix(first.Moto.Endpoint, "http://")
	if _, said := up(addr); strings.Contains(said, "creating") {
		t.Errorf("an emulator holding everything: got\n%s\nwant nothing said created", said)
	}
	if _, err := first.S3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(first.LogBuckets[0])}); err != nil {
		t.Fatal(err)
	}
	if _, said := up(addr); !strings.Contains(said, "local stack: creating the buckets "+first.LogBuckets[0]+"\n") {
		t.Errorf("an emulator missing a bucket: got\n%s\nwant only that bucket said created", said)
	}
}
