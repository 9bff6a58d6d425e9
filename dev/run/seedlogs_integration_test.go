//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
)

// make seed-logs against make run's server: the set once, whatever the
// number of runs, with logs of the last hour for the walkthrough's
// `fleetctl logs ls --since 1h`.
func TestMakeSeedLogsSeedsTheSetOnceWithLogsOfTheLastHour(t *testing.T) {
	h, local, _ := indexedStack(t)
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "seedlogs")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "dev", "seedlogs")).CombinedOutput(); err != nil {
		t.Fatalf("build seedlogs: %v\n%s", err, out)
	}
	seed := func() string {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "EMULATOR_ADDR="+strings.TrimPrefix(local.Moto.Endpoint, "http://"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("seedlogs: %v\n%s", err, out)
		}
		return string(out)
	}
	bucket := local.LogBuckets[0]
	keys := func() []string {
		t.Helper()
		var out []string
		pages := s3.NewListObjectsV2Paginator(local.S3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				out = append(out, aws.ToString(o.Key))
			}
		}
		return out
	}

	first := seed()
	seeded := keys()
	if want := fmt.Sprintf("uploaded %d task logs to s3://%s", len(seeded), bucket); len(seeded) == 0 || !strings.Contains(first, want) {
		t.Fatalf("got %q and %d logs in the bucket, want %q", first, len(seeded), want)
	}

	second := seed()
	if !strings.Contains(second, fmt.Sprintf("already holds the %d task logs seeded at", len(seeded))) || !strings.Contains(second, "nothing added") {
		t.Errorf("a second run said %q, want that it added nothing", second)
	}
	if got := keys(); len(got) != len(seeded) {
		t.Errorf("after a second run the bucket holds %d logs, want the %d of the first", len(got), len(seeded))
	}

	// A run cut short is completed by the next, from the same instant.
	for _, key := range seeded[len(seeded)-2:] {
		if _, err := local.S3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
	}
	if third := seed(); !strings.Contains(third, fmt.Sprintf("uploaded the 2 task logs missing of the %d seeded at", len(seeded))) {
		t.Errorf("a run after two logs went said %q, want them uploaded again", third)
	}
	if got := keys(); strings.Join(got, "\n") != strings.Join(seeded, "\n") {
		t.Errorf("the bucket holds %d logs, want the %d of the first run, the same keys", len(got), len(seeded))
	}

	now := time.Now()
	lastHour := fmt.Sprintf("/api/logs/request/web-api?start=%d&end=%d", now.Add(-time.Hour).UnixMilli(), now.UnixMilli())
	if got, body := lookup(t, h, lastHour); len(got) < 3 {
		t.Errorf("GET %s: got %s, want the logs of the tasks still running", lastHour, body)
	}
}
