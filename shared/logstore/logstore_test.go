package logstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logstore"
)

// fakeS3 serves ListObjectsV2 and HeadObject from sorted keys. Its pages hold
// at most pageSize keys whatever MaxKeys asks, as S3 may, and its continuation
// tokens are opaque to the store. Like S3, it url-encodes the keys it lists
// when asked to; otherwise a page holding a key that XML 1.0 cannot carry
// fails as the SDK fails to read it.
type fakeS3 struct {
	keys     []string
	pageSize int
	meta     map[string]map[string]string
	err      error
	calls    int
}

var modified = time.Date(2026, 11, 21, 5, 14, 0, 0, time.UTC)

func (f *fakeS3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	limit := int(aws.ToInt32(in.MaxKeys))
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("MaxKeys %d out of range", limit)
	}
	limit = min(limit, f.pageSize)
	after := aws.ToString(in.StartAfter)
	if in.ContinuationToken != nil { // S3 ignores StartAfter then
		key, ok := strings.CutPrefix(*in.ContinuationToken, "next:")
		if !ok {
			return nil, fmt.Errorf("bad continuation token %q", *in.ContinuationToken)
		}
		after = key
	}
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(false)}
	last := ""
	for _, k := range f.keys {
		if k <= after || !strings.HasPrefix(k, aws.ToString(in.Prefix)) {
			continue
		}
		if len(out.Contents) == limit {
			out.IsTruncated = aws.Bool(true)
			out.NextContinuationToken = aws.String("next:" + last)
			break
		}
		last = k
		listed := k
		switch {
		case in.EncodingType == types.EncodingTypeUrl:
			listed = url.QueryEscape(k)
		case strings.ContainsFunc(k, func(r rune) bool { return r < ' ' && r != '\t' && r != '\n' && r != '\r' }):
			return nil, fmt.Errorf("deserialization failed: XML syntax error: illegal character code %U", []rune(k)[strings.IndexFunc(k, func(r rune) bool { return r < ' ' })])
		}
		out.Contents = append(out.Contents, types.Object{Key: aws.String(listed), LastModified: &modified, Size: aws.Int64(int64(len(k)))})
	}
	return out, nil
}

func (f *fakeS3) HeadObject(_ context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	meta, ok := f.meta[aws.ToString(in.Key)]
	if !ok {
		return nil, &smithy.OperationError{ServiceID: "S3", OperationName: "HeadObject", Err: &types.NotFound{}}
	}
	return &s3.HeadObjectOutput{Metadata: meta}, nil
}

// twenty returns 20 keys under logs/a/ and a few under prefixes around it.
func twenty() (all, under []string) {
	for i := range 20 {
		under = append(under, fmt.Sprintf("logs/a/%02d.log", i))
	}
	all = slices.Concat([]string{"logs/", "logs/Z.log"}, under, []string{"logs/a0.log", "logs/b/00.log"})
	slices.Sort(all)
	return all, under
}

func TestListingReturnsKeysOfAnyCharacterExactly(t *testing.T) {
	want := []string{"odd/a b+c%41.log", "odd/bell\a.log", "odd/esc\x1b]0;title\a\x1b[2J.log", "odd/new\nline.log", "odd/plain.log", "odd/журнал.log"}
	slices.Sort(want)
	store := logstore.New(&fakeS3{keys: want, pageSize: 2}, nil)
	got, err := store.All(context.Background(), "b", "odd/")
	if err != nil {
		t.Fatal(err)
	}
	if keys := keysOf(got); !slices.Equal(keys, want) {
		t.Errorf("got %q, want %q", keys, want)
	}
}

func keysOf(objs []logkey.Object) []string {
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

func TestPage(t *testing.T) {
	all, want := twenty()
	for _, pageSize := range []int{3, 1000} {
		for limit := 1; limit <= 7; limit++ {
			t.Run(fmt.Sprintf("limit %d over pages of %d returns every key once, in order", limit, pageSize), func(t *testing.T) {
				store := logstore.New(&fakeS3{keys: all, pageSize: pageSize}, nil)
				var got []string
				after := ""
				for range len(want) + 1 {
					objs, done, err := store.Page(context.Background(), "logs", "logs/a/", after, limit)
					if err != nil {
						t.Fatal(err)
					}
					if len(objs) > limit || !done && len(objs) != limit {
						t.Fatalf("got %d objects (done %t), want %d or the last ones", len(objs), done, limit)
					}
					for _, o := range objs {
						got = append(got, o.Key)
						after = o.Key
					}
					if done {
						break
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %q, want %q", got, want)
				}
			})
		}
	}
}

func TestPageStartsAfterAnyKey(t *testing.T) {
	all, under := twenty()
	store := logstore.New(&fakeS3{keys: all, pageSize: 3}, nil)
	objs, done, err := store.Page(context.Background(), "logs", "logs/a/", "logs/a/16", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	if want := under[16:]; !done || !slices.Equal(got, want) {
		t.Fatalf("got %q (done %t), want %q (done)", got, done, want)
	}
}

func TestPageFillsObjects(t *testing.T) {
	store := logstore.New(&fakeS3{keys: []string{"a/1.log"}, pageSize: 1000}, nil)
	objs, done, err := store.Page(context.Background(), "logs", "a/", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := logkey.Object{Bucket: "logs", Key: "a/1.log", LastModified: modified.UnixMilli(), Size: 7}
	if !done || len(objs) != 1 || objs[0] != want {
		t.Fatalf("got %+v (done %t), want [%+v] (done)", objs, done, want)
	}
}

func TestPageRefusesNoLimit(t *testing.T) {
	store := logstore.New(&fakeS3{pageSize: 1000}, nil)
	if _, _, err := store.Page(context.Background(), "logs", "a/", "", 0); err == nil {
		t.Fatal("got no error for limit 0, want one")
	}
}

func TestAllFollowsEveryPage(t *testing.T) {
	all, want := twenty()
	fake := &fakeS3{keys: all, pageSize: 3}
	objs, err := logstore.New(fake, nil).All(context.Background(), "logs", "logs/a/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if fake.calls != 7 {
		t.Fatalf("got %d requests, want 7 (20 keys in pages of 3)", fake.calls)
	}
}

func TestTimes(t *testing.T) {
	tests := []struct {
		name       string
		meta       map[string]string
		start, end *int64
	}{
		{"both times are read", map[string]string{"starttime": "1700000000000", "endtime": "1700000001000"}, ptr(1700000000000), ptr(1700000001000)},
		{"an absent time is nil", map[string]string{"starttime": "1700000000000"}, ptr(1700000000000), nil},
		{"no metadata gives no times", map[string]string{}, nil, nil},
		{"values that are not decimal integers are nil", map[string]string{"starttime": "1.7e12", "endtime": "soon"}, nil, nil},
		{"other metadata is ignored", map[string]string{"owner": "42", "endtime": "5"}, nil, ptr(5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := logstore.New(&fakeS3{meta: map[string]map[string]string{"a/1.log": tt.meta}}, nil)
			start, end, err := store.Times(context.Background(), "logs", "a/1.log")
			if err != nil {
				t.Fatal(err)
			}
			if !equal(start, tt.start) || !equal(end, tt.end) {
				t.Fatalf("got %s, %s, want %s, %s", show(start), show(end), show(tt.start), show(tt.end))
			}
		})
	}
	t.Run("an object deleted since it was listed has no times", func(t *testing.T) {
		start, end, err := logstore.New(&fakeS3{}, nil).Times(context.Background(), "logs", "gone.log")
		if err != nil || start != nil || end != nil {
			t.Fatalf("got %s, %s, %v, want nil, nil, nil", show(start), show(end), err)
		}
	})
}

func ptr(v int64) *int64 { return &v }

func equal(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func show(v *int64) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprint(*v)
}

// timeoutError is what an HTTP client's Timeout produces.
type timeoutError struct{}

func (timeoutError) Error() string   { return "Client.Timeout exceeded while awaiting headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestErrors(t *testing.T) {
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "S3", OperationName: "ListObjectsV2", Err: err}
	}
	status := func(code int) error {
		return op(&smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("unexpected body")})
	}
	tests := []struct {
		name string
		err  error
		kind fault.Kind
		text string
	}{
		{"a missing bucket is not found", op(&types.NoSuchBucket{Message: aws.String("The specified bucket does not exist")}), fault.KindNotFound, "S3 bucket logs does not exist"},
		{"SlowDown is unavailable", op(&smithy.GenericAPIError{Code: "SlowDown"}), fault.KindUnavailable, "S3 is busy, try again"},
		{"throttling is unavailable", op(&smithy.GenericAPIError{Code: "ThrottlingException"}), fault.KindUnavailable, "S3 is busy, try again"},
		{"any 503 is unavailable", status(http.StatusServiceUnavailable), fault.KindUnavailable, "S3 is busy, try again"},
		{"no connection is unavailable", op(&smithyhttp.RequestSendError{Err: errors.New("dial tcp 127.0.0.1:9: connection refused")}), fault.KindUnavailable, "S3 could not be reached, try again"},
		{"a deadline is a timeout", op(&smithyhttp.RequestSendError{Err: context.DeadlineExceeded}), fault.KindTimeout, "Timed out waiting for S3"},
		{"a cancelled request stays internal", op(&smithyhttp.RequestSendError{Err: context.Canceled}), fault.KindInternal, ""},
		{"access denied stays internal", op(&smithy.GenericAPIError{Code: "AccessDenied"}), fault.KindInternal, ""},
		{"a 500 after the retries is unavailable", status(http.StatusInternalServerError), fault.KindUnavailable, "S3 is busy, try again"},
		{"an attempt timeout is a timeout", op(&smithyhttp.RequestSendError{Err: &url.Error{Op: "Get", URL: "http://s3", Err: timeoutError{}}}), fault.KindTimeout, "Timed out waiting for S3"},
		{"another status stays internal", status(http.StatusConflict), fault.KindInternal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := logstore.New(&fakeS3{pageSize: 1000, err: tt.err}, nil)
			_, _, err := store.Page(context.Background(), "logs", "a/", "", 10)
			if got := fault.KindOf(err); got != tt.kind {
				t.Fatalf("got kind %d (%v), want %d", got, err, tt.kind)
			}
			if got := fault.Message(err); got != tt.text {
				t.Fatalf("got message %q, want %q", got, tt.text)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want it to wrap %v", err, tt.err)
			}
			if !strings.HasPrefix(err.Error(), "list s3://logs/a/: ") {
				t.Fatalf("got %q, want it to start with what failed", err)
			}
		})
	}
	t.Run("HEAD errors are translated too", func(t *testing.T) {
		store := logstore.New(&fakeS3{err: op(&smithy.GenericAPIError{Code: "SlowDown"})}, nil)
		_, _, err := store.Times(context.Background(), "logs", "a/1.log")
		if fault.KindOf(err) != fault.KindUnavailable || !strings.HasPrefix(err.Error(), "head s3://logs/a/1.log: ") {
			t.Fatalf("got %v (kind %d), want an unavailable head error", err, fault.KindOf(err))
		}
	})
}

func TestLinks(t *testing.T) {
	client := s3.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("key", "secret", ""),
	}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://127.0.0.1:9000")
		o.UsePathStyle = true
	})
	store := logstore.New(nil, s3.NewPresignClient(client))
	tests := []struct {
		key         string
		disposition string
	}{
		{"svc/2026/11/svc-1-1763702040000-1-host-a_0-1763702040000-service.log", "attachment; filename=svc-1-1763702040000-1-host-a_0-1763702040000-service.log"},
		{"svc/run log (1).gz", `attachment; filename="run log (1).gz"`},
		{`svc/say "hi".log`, `attachment; filename="say \"hi\".log"`},
		{"svc/journal-é.log", "attachment; filename*=utf-8''journal-%C3%A9.log"},
	}
	for _, tt := range tests {
		t.Run("download of "+tt.key+" is an attachment named after the key's base name", func(t *testing.T) {
			get, download, err := store.Links(context.Background(), "logs", tt.key, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			g, d := query(t, get), query(t, download)
			if g.Get("X-Amz-Expires") != "3600" || d.Get("X-Amz-Expires") != "3600" {
				t.Fatalf("got X-Amz-Expires %q and %q, want 3600", g.Get("X-Amz-Expires"), d.Get("X-Amz-Expires"))
			}
			if g.Get("X-Amz-Date") != d.Get("X-Amz-Date") {
				t.Fatalf("got X-Amz-Date %q and %q, want the same instant", g.Get("X-Amz-Date"), d.Get("X-Amz-Date"))
			}
			if g.Has("response-content-disposition") || g.Has("response-content-encoding") {
				t.Fatalf("got overrides in getUrl %s, want none", get)
			}
			if got := d.Get("response-content-disposition"); got != tt.disposition {
				t.Fatalf("got Content-Disposition %q, want %q", got, tt.disposition)
			}
			if got := d.Get("response-content-encoding"); got != "identity" {
				t.Fatalf("got Content-Encoding %q, want identity", got)
			}
		})
	}
}

func query(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}
