//go:build integration

package logstore_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logstore"
)

const bucket = "task-logs"

// prefixes and how many objects each holds. big/ spans two ListObjectsV2
// pages (S3 returns at most 1,000 keys a page); svc-a/ and svc-ab/ start
// alike, so a listing that went past the slash would mix them.
var prefixes = map[string]int{"big/": 1234, "svc-a/": 150, "svc-ab/": 40}

var (
	server *stack.MinIO
	client *s3.Client // uploads and checks, outside the store
	store  *logstore.Store
	keys   = map[string][]string{} // prefix → its keys, sorted
	began  time.Time
)

// TestMain starts MinIO, which verifies signatures, and points this process's
// SDK at it through the SDK's own environment variables, so that the store
// under test is built exactly as a function builds it.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	server, err = stack.UpMinIO(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer server.Stop()

	client = stack.S3Client(server.Endpoint, server.AccessKey, server.SecretKey)
	began = time.Now()
	if err := stack.CreateBuckets(ctx, client, bucket); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := uploadAll(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store, err = logstore.Open(ctx, true)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// uploadAll puts every object of prefixes, a few at a time.
func uploadAll(ctx context.Context) error {
	var all []string
	for p, n := range prefixes {
		for i := range n {
			keys[p] = append(keys[p], fmt.Sprintf("%s2026/11/task-%04d.log", p, i))
		}
		all = append(all, keys[p]...)
	}
	todo := make(chan string)
	errs := make(chan error, len(all))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for key := range todo {
				errs <- put(ctx, key, key, nil)
			}
		})
	}
	for _, key := range all {
		todo <- key
	}
	close(todo)
	wg.Wait()
	close(errs)
	var err error
	for e := range errs {
		err = errors.Join(err, e)
	}
	return err
}

func put(ctx context.Context, key, body string, meta map[string]string, opts ...func(*s3.PutObjectInput)) error {
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body), Metadata: meta}
	for _, o := range opts {
		o(in)
	}
	if _, err := client.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func TestAllListsEveryObjectOfThePrefix(t *testing.T) {
	for p, want := range keys {
		t.Run(p, func(t *testing.T) {
			objs, err := store.All(context.Background(), bucket, p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Key)
				if o.Bucket != bucket || o.Size != int64(len(o.Key)) {
					t.Fatalf("got %+v, want bucket %s and size %d", o, bucket, len(o.Key))
				}
				if o.LastModified < began.Add(-time.Second).UnixMilli() || o.LastModified > time.Now().UnixMilli() {
					t.Fatalf("got lastModified %d, want the time of the upload (after %d)", o.LastModified, began.UnixMilli())
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %d keys, want %d (first %q)", len(got), len(want), want[0])
			}
		})
	}
}

func TestPageResumesExactly(t *testing.T) {
	want := keys["big/"]
	for _, limit := range []int{7, 400, 1001} {
		t.Run(fmt.Sprintf("pages of %d return every key once, in order", limit), func(t *testing.T) {
			var got []string
			after := ""
			for {
				objs, done, err := store.Page(context.Background(), bucket, "big/", after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if !done && len(objs) != limit {
					t.Fatalf("got %d objects in a page that is not the last, want %d", len(objs), limit)
				}
				for _, o := range objs {
					got = append(got, o.Key)
					after = o.Key
				}
				if done || len(got) > len(want) {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %d keys, want %d", len(got), len(want))
			}
		})
	}
}

func TestMissingBucketIsNotFound(t *testing.T) {
	_, err := store.All(context.Background(), "no-such-bucket", "big/")
	if fault.KindOf(err) != fault.KindNotFound || !strings.Contains(fault.Message(err), "no-such-bucket") {
		t.Fatalf("got %v (kind %d), want not found naming the bucket", err, fault.KindOf(err))
	}
}

func TestCreateBucketsKeepsAnExistingBucket(t *testing.T) {
	if err := stack.CreateBuckets(context.Background(), client, bucket, "task-logs-2"); err != nil {
		t.Fatal(err)
	}
	if objs, err := store.All(context.Background(), bucket, "svc-ab/"); err != nil || len(objs) != prefixes["svc-ab/"] {
		t.Fatalf("got %d objects (%v), want %d", len(objs), err, prefixes["svc-ab/"])
	}
}

func TestTimesFromMetadata(t *testing.T) {
	ctx := context.Background()
	for key, meta := range map[string]map[string]string{
		"times/both.log":  {"starttime": "1763700000000", "endtime": "1763700060000"},
		"times/start.log": {"starttime": "1763700000000"},
		"times/bad.log":   {"starttime": "yesterday", "endtime": "1763700060000.5"},
		"times/none.log":  nil,
	} {
		if err := put(ctx, key, "log", meta); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		key        string
		start, end *int64
	}{
		{"times/both.log", ptr(1763700000000), ptr(1763700060000)},
		{"times/start.log", ptr(1763700000000), nil},
		{"times/bad.log", nil, nil},
		{"times/none.log", nil, nil},
		{"times/deleted.log", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			start, end, err := store.Times(ctx, bucket, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(start, tt.start) || !equal(end, tt.end) {
				t.Fatalf("got %s, %s, want %s, %s", show(start), show(end), show(tt.start), show(tt.end))
			}
		})
	}
}

// raw sees responses as sent: no transparent gunzip.
var raw = &http.Client{Transport: &http.Transport{DisableCompression: true}}

func TestLinksAgainstASigningServer(t *testing.T) {
	ctx := context.Background()
	const key = "links/svc-a-d1-1763700000000-1-host-a_0-1763700000000-service.log.gz"
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte("started\n"))
	_ = zw.Close()
	gz := func(in *s3.PutObjectInput) { in.ContentEncoding = aws.String("gzip") }
	if err := put(ctx, key, zipped.String(), nil, gz); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, "links/other.log", "other", nil); err != nil {
		t.Fatal(err)
	}
	get, download, err := store.Links(ctx, bucket, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(get, server.Endpoint+"/"+bucket+"/") {
		t.Fatalf("got %s, want a URL of %s from AWS_ENDPOINT_URL_S3, path style", get, server.Endpoint)
	}

	t.Run("getUrl serves the object as stored", func(t *testing.T) {
		resp := fetch(t, get, http.StatusOK)
		if resp.body != zipped.String() || resp.header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("got %q encoded %q, want the gzipped bytes encoded gzip", resp.body, resp.header.Get("Content-Encoding"))
		}
	})
	t.Run("downloadUrl serves the bytes as an attachment without an encoding", func(t *testing.T) {
		resp := fetch(t, download, http.StatusOK)
		if resp.body != zipped.String() {
			t.Fatalf("got body %q, want the gzipped bytes", resp.body)
		}
		want := "attachment; filename=svc-a-d1-1763700000000-1-host-a_0-1763700000000-service.log.gz"
		if got := resp.header.Get("Content-Disposition"); got != want {
			t.Fatalf("got Content-Disposition %q, want %q", got, want)
		}
		if got := resp.header.Get("Content-Encoding"); got != "identity" {
			t.Fatalf("got Content-Encoding %q, want identity", got)
		}
	})
	t.Run("a URL pointed at another key is refused", func(t *testing.T) {
		fetch(t, strings.Replace(get, path.Base(key), "other.log", 1), http.StatusForbidden).code(t, "SignatureDoesNotMatch")
	})
	t.Run("a URL with a changed signature is refused", func(t *testing.T) {
		u, err := url.Parse(download)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		sig := []byte(q.Get("X-Amz-Signature"))
		if sig[0] == '0' {
			sig[0] = '1'
		} else {
			sig[0] = '0'
		}
		q.Set("X-Amz-Signature", string(sig))
		u.RawQuery = q.Encode()
		fetch(t, u.String(), http.StatusForbidden).code(t, "SignatureDoesNotMatch")
	})
	t.Run("an expired URL is refused", func(t *testing.T) {
		const ttl = 2 * time.Second
		// Fetched once within its life, then after it. A machine too busy
		// to fetch a link within its two seconds signs another: a refusal
		// counts only when the link had not expired yet.
		var get string
		var signed time.Time
		for deadline := time.Now().Add(2 * time.Minute); ; {
			var err error
			if get, _, err = store.Links(ctx, bucket, key, ttl); err != nil {
				t.Fatal(err)
			}
			if signed, err = time.Parse("20060102T150405Z", query(t, get).Get("X-Amz-Date")); err != nil {
				t.Fatal(err)
			}
			resp, err := raw.Get(get)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			if time.Now().Before(signed.Add(ttl)) || time.Now().After(deadline) {
				t.Fatalf("got status %d for a link %v after it was signed, want 200 before it expires", resp.StatusCode, time.Since(signed))
			}
		}
		time.Sleep(time.Until(signed.Add(ttl + time.Second)))
		fetch(t, get, http.StatusForbidden).code(t, "AccessDenied")
	})
}

type response struct {
	body   string
	header http.Header
}

func fetch(t *testing.T, u string, status int) response {
	t.Helper()
	resp, err := raw.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("got status %d (%s), want %d", resp.StatusCode, body, status)
	}
	return response{string(body), resp.Header}
}

// code checks the S3 error code of an error response.
func (r response) code(t *testing.T, want string) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := xml.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("got %q, want an S3 error: %v", r.body, err)
	}
	if e.Code != want {
		t.Fatalf("got error %s (%s), want %s", e.Code, e.Message, want)
	}
}
