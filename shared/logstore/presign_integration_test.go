//go:build integration

package logstore_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/config"
)

// Presigned links as MinIO, which verifies signatures, sees them: they live
// exactly LOG_URL_TTL (never over config.MaxURLTTL), and no part of a link
// that decides what it fetches, or until when, can be changed.

func TestAccessPresignedLinksLiveExactlyTheConfiguredTTL(t *testing.T) {
	ctx := context.Background()
	const key = "presign/ttl.log"
	if err := put(ctx, key, "ttl", nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"", "1s", "90m", "12h", "43200s"} {
		cfg, err := config.LoadLogs(func(name string) string {
			return map[string]string{"LOG_BUCKETS": bucket, "LOG_URL_TTL": v}[name]
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Run("LOG_URL_TTL="+v, func(t *testing.T) {
			before := time.Now().UTC().Truncate(time.Second)
			get, download, err := store.Links(ctx, bucket, key, cfg.URLTTL)
			if err != nil {
				t.Fatal(err)
			}
			g, d := query(t, get), query(t, download)
			want := strconv.Itoa(int(cfg.URLTTL.Seconds()))
			if g.Get("X-Amz-Expires") != want || d.Get("X-Amz-Expires") != want {
				t.Errorf("got X-Amz-Expires %s and %s, want %s", g.Get("X-Amz-Expires"), d.Get("X-Amz-Expires"), want)
			}
			for _, q := range []url.Values{g, d} {
				if n, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || time.Duration(n)*time.Second > config.MaxURLTTL {
					t.Errorf("got X-Amz-Expires %q, want at most %v", q.Get("X-Amz-Expires"), config.MaxURLTTL)
				}
			}
			signed, err := time.Parse("20060102T150405Z", g.Get("X-Amz-Date"))
			if err != nil || d.Get("X-Amz-Date") != g.Get("X-Amz-Date") || signed.Before(before) || signed.After(time.Now()) {
				t.Errorf("got signed at %s and %s, want both now", g.Get("X-Amz-Date"), d.Get("X-Amz-Date"))
			}
			if v != "1s" { // a one-second link may be gone by the time it is fetched
				fetch(t, get, http.StatusOK)
				fetch(t, download, http.StatusOK)
			}
		})
	}
}

func TestAccessPresignedLinksCannotBeRetargetedOrExtended(t *testing.T) {
	ctx := context.Background()
	const (
		key       = "presign/svc-a/mine.log"
		other     = "presign/svc-b/theirs.log"
		elsewhere = "task-logs-presign-other"
	)
	if err := stack.CreateBuckets(ctx, client, elsewhere); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, other} {
		if err := put(ctx, k, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(elsewhere), Key: aws.String(key), Body: strings.NewReader(key)}); err != nil {
		t.Fatal(err)
	}
	get, download, err := store.Links(ctx, bucket, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, get, http.StatusOK); r.body != key {
		t.Fatalf("got %q, want the object's own bytes", r.body)
	}
	// change returns u with f applied to its parsed form.
	change := func(u string, f func(*url.URL, url.Values)) string {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		q := parsed.Query()
		f(parsed, q)
		parsed.RawQuery = q.Encode()
		return parsed.String()
	}
	tests := []struct {
		name, url, code string
	}{
		{"another key of the bucket", strings.Replace(get, "/"+key+"?", "/"+other+"?", 1), "SignatureDoesNotMatch"},
		{"a download URL turned to another key", strings.Replace(download, "/"+key+"?", "/"+other+"?", 1), "SignatureDoesNotMatch"},
		{"the same key in another bucket", strings.Replace(get, "/"+bucket+"/", "/"+elsewhere+"/", 1), "SignatureDoesNotMatch"},
		{"the bucket's listing", strings.Replace(get, "/"+key+"?", "/?", 1), "SignatureDoesNotMatch"},
		{"the key's prefix listed", change(strings.Replace(get, "/"+key+"?", "/?", 1), func(_ *url.URL, q url.Values) {
			q.Set("prefix", "presign/")
		}), "SignatureDoesNotMatch"},
		{"a longer life", change(get, func(_ *url.URL, q url.Values) { q.Set("X-Amz-Expires", "43200") }), "SignatureDoesNotMatch"},
		{"the longest life S3 allows", change(get, func(_ *url.URL, q url.Values) { q.Set("X-Amz-Expires", "604800") }), "SignatureDoesNotMatch"},
		{"a later signing time", change(get, func(_ *url.URL, q url.Values) {
			signed, _ := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
			q.Set("X-Amz-Date", signed.Add(12*time.Hour).Format("20060102T150405Z"))
		}), ""},
		{"another response type", change(get, func(_ *url.URL, q url.Values) { q.Set("response-content-type", "text/html") }), "SignatureDoesNotMatch"},
		{"a download without its attachment header", change(download, func(_ *url.URL, q url.Values) { q.Del("response-content-disposition") }), "SignatureDoesNotMatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			if tt.url == get || tt.url == download {
				t.Fatalf("the URL was not changed: %s", tt.url)
			}
			r := fetch(t, tt.url, http.StatusForbidden)
			if tt.code != "" {
				r.code(t, tt.code)
			}
		})
	}
	t.Run("a PUT or DELETE with the GET link is refused", func(t *testing.T) {
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			req, err := http.NewRequest(method, get, strings.NewReader("overwritten"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := raw.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: got %d, want 403", method, resp.StatusCode)
			}
		}
		if r := fetch(t, get, http.StatusOK); r.body != key {
			t.Errorf("got %q, want the object unchanged", r.body)
		}
	})
}
