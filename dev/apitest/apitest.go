// Package apitest serves the API over the local stack (moto for DynamoDB,
// MinIO for the task logs and their presigned URLs) on loopback, built by
// the functions' own constructors and assembled as make run assembles it
// (dev/localapi), from an environment as the template gives it, for the
// integration tests of the client and of fleetctl and for the benchmarks.
// Every answer of the handlers is checked against openapi.yaml
// (dev/apidoc). In front of them it plays API Gateway's authorizer: bearer
// tokens naming users, or SigV4 signatures verified by signing the request
// again with the SDK's own signer.
package apitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/app/inventoryapp"
	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/localapi"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/logkey"
)

// LogBucket is the one bucket of LOG_BUCKETS.
const LogBucket = "fleetctl-task-logs"

// The credentials the SigV4 verifier accepts, and the region it checks.
const (
	SigV4AccessKey = "AKIDFLEETCTLTEST"
	SigV4SecretKey = "fleetctl-test-secret"
	SigV4Region    = "eu-west-1"
)

// Tokens of the bearer authorizer: an admin, and a user who may only read.
const (
	AdminToken  = "admin-token"
	ReaderToken = "reader-token"
)

// Stack is the local stack the API is served over.
type Stack struct {
	Local  *stack.Local
	MinIO  *stack.MinIO
	S3     *s3.Client // MinIO, for putting logs
	format logkey.Format
	report inventoryapp.Handler
	quiet  *slog.Logger
}

// env is the functions' environment over the stack: the template's
// defaults (2 decommissioning at once, 30 days of expiry), the one log
// bucket, lookups that wait for the emulators, and the authorization auth
// plays.
func env(auth Auth, override map[string]string) func(string) string {
	vars := map[string]string{
		"SLAVES_TABLE": stack.Tables.Slaves, "HISTORY_TABLE": stack.Tables.History,
		"EXPIRING_TABLE": stack.Tables.Expiring, "REQUESTS_TABLE": stack.Tables.Requests, "CHANGES_TABLE": stack.Tables.Changes,
		"LOG_BUCKETS": LogBucket, "S3_FORCE_PATH_STYLE": "true",
		"LOG_LIST_TIMEOUT": "30s", "LOG_LINK_TIMEOUT": "30s",
		// Reports here name a few machines each: the brake is off.
		"MAX_LOST_FRACTION": "1",
		"AUTH_MODE":         "none",
	}
	if auth != None {
		vars["AUTH_MODE"], vars["ADMIN_GROUPS"], vars["READ_GROUPS"] = "authorizer", "admin", "readers"
	}
	for k, v := range override {
		vars[k] = v
	}
	return func(name string) string { return vars[name] }
}

// Up starts moto and MinIO and creates the tables and the log bucket.
// Close stops them.
func Up(ctx context.Context) (*Stack, error) {
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	minio, err := stack.UpMinIO(ctx)
	if err != nil {
		local.Close()
		return nil, err
	}
	s := &Stack{Local: local, MinIO: minio, quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s.S3 = stack.S3Client(minio.Endpoint, minio.AccessKey, minio.SecretKey)
	if err := stack.CreateBuckets(ctx, s.S3, LogBucket); err != nil {
		s.Close()
		return nil, err
	}
	if s.format, err = logkey.ParseFormat(logkey.DefaultFormat); err != nil {
		s.Close()
		return nil, err
	}
	if s.report, err = inventoryapp.New(ctx, env(None, nil), inventoryapp.Options{Log: s.quiet, DynamoDB: local.DynamoDB}); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops MinIO and moto.
func (s *Stack) Close() {
	s.MinIO.Stop()
	s.Local.Close()
}

// Auth is how a server authenticates its callers.
type Auth int

const (
	// None is make run's AUTH_MODE none: every call is allowed.
	None Auth = iota
	// Tokens accepts "Bearer admin-token" (group admin) and
	// "Bearer reader-token" (group readers); admins change, both read.
	Tokens
	// SigV4 accepts requests signed for execute-api in SigV4Region with
	// SigV4AccessKey, as an admin; a bad signature is API Gateway's 403.
	SigV4
)

// Serve serves the API on a new loopback server with the given
// authentication; every handler answer that does not match openapi.yaml is
// reported to t. Limits are the defaults (2 decommissioning at once, 30
// days of expiry).
func (s *Stack) Serve(t apidoc.Reporter, auth Auth) (*httptest.Server, error) {
	doc, err := apidoc.Load()
	if err != nil {
		return nil, err
	}
	api, err := s.Handler(auth, Options{})
	if err != nil {
		return nil, err
	}
	h := doc.Recorder(t, api)
	switch auth {
	case Tokens:
		h = tokens(h)
	case SigV4:
		h = sigV4(h)
	}
	return httptest.NewServer(h), nil
}

// Options change what Handler serves.
type Options struct {
	// Env overrides variables of the functions' environment (an empty
	// LOG_BUCKETS, a shorter deadline).
	Env map[string]string
	// Console serves the operator console on / as make run does; without
	// it, / is the API's 404.
	Console bool
}

// Handler returns the API over the stack behind web.Wrap, assembled as
// make run assembles it (localapi), with the authorization auth names (the
// caller plays the authorizer in front of it, as Serve does).
func (s *Stack) Handler(auth Auth, opts Options) (http.Handler, error) {
	getenv := env(auth, opts.Env)
	return localapi.New(context.Background(), localapi.Options{
		Env:      func(string) (func(string) string, error) { return getenv, nil },
		DynamoDB: s.Local.DynamoDB,
		Log:      s.quiet,
		Console:  opts.Console,
	})
}

// tokenUsers are the callers the bearer tokens name.
var tokenUsers = map[string]access.Identity{
	AdminToken:  {ID: "alice", Email: "alice@example.com", Groups: []string{"admin"}},
	ReaderToken: {ID: "bob", Email: "bob@example.com", Groups: []string{"readers"}},
}

// tokens plays a Cognito or Lambda authorizer: a known token becomes the
// identity the handlers read; anything else reaches them without one (and
// gets their 401).
func tokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if id, ok := tokenUsers[token]; ok {
			r = r.WithContext(access.WithIdentity(r.Context(), id))
		}
		next.ServeHTTP(w, r)
	})
}

// sigV4 plays API Gateway's AWS_IAM authorization: it signs a copy of the
// request, holding only the headers the caller signed, with the SDK's
// signer at the caller's X-Amz-Date, and compares the signatures.
func sigV4(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := VerifySigV4(r); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"message": err.Error()})
			return
		}
		id := access.Identity{ID: "arn:aws:iam::123456789012:user/ops", Groups: []string{"admin"}}
		next.ServeHTTP(w, r.WithContext(access.WithIdentity(r.Context(), id)))
	})
}

// VerifySigV4 checks r's SigV4 signature against SigV4AccessKey and
// SigV4SecretKey for execute-api in SigV4Region. It reads r's body and
// puts it back.
func VerifySigV4(r *http.Request) error {
	authz := r.Header.Get("Authorization")
	fields, ok := strings.CutPrefix(authz, "AWS4-HMAC-SHA256 ")
	if !ok {
		return errors.New("missing authentication token")
	}
	parts := map[string]string{}
	for _, f := range strings.Split(fields, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		parts[k] = v
	}
	scope := strings.Split(parts["Credential"], "/")
	if len(scope) != 5 || scope[0] != SigV4AccessKey || scope[2] != SigV4Region || scope[3] != "execute-api" {
		return fmt.Errorf("the security token included in the request is invalid (credential %q)", parts["Credential"])
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return errors.New("the signed request has no X-Amz-Date")
	}
	if d := time.Since(at); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("signature expired")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	clone, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	for _, name := range strings.Split(parts["SignedHeaders"], ";") {
		if name != "host" {
			clone.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	clone.ContentLength = r.ContentLength
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if hash == "" {
		hash = sha256Hex(body)
	}
	creds := aws.Credentials{AccessKeyID: SigV4AccessKey, SecretAccessKey: SigV4SecretKey}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, clone, hash, "execute-api", SigV4Region, at); err != nil {
		return err
	}
	if clone.Header.Get("Authorization") != authz {
		return errors.New("the request signature we calculated does not match the signature you provided")
	}
	return nil
}

// Report reports machines up through the inventory handler, as the
// scheduler does, at the time at (zero: now).
func (s *Stack) Report(ctx context.Context, at time.Time, machines ...Machine) error {
	type entry struct {
		ID           string            `json:"id"`
		Host         string            `json:"host"`
		RackID       string            `json:"rackId"`
		Attributes   map[string]string `json:"attributes"`
		Resources    map[string]any    `json:"resources"`
		Lost         bool              `json:"lost"`
		RunningTasks int               `json:"runningTasks"`
	}
	var entries []entry
	for _, m := range machines {
		entries = append(entries, entry{m.ID, m.Host, m.Rack, m.Attributes, m.Resources, m.Lost, m.RunningTasks})
	}
	detail, err := json.Marshal(map[string]any{"complete": false, "machines": entries})
	if err != nil {
		return err
	}
	_, err = s.report(ctx, detail)
	return err
}

// Machine is one machine of a report.
type Machine struct {
	ID, Host, Rack string
	Attributes     map[string]string
	Resources      map[string]any
	Lost           bool
	RunningTasks   int
}

// Log is one task log to put in LogBucket.
type Log struct {
	TaskID   string
	Filename string
	Index    int
	Modified time.Time
	Body     []byte
}

// Key is the log's key under the default LOG_KEY_FORMAT.
func (s *Stack) Key(l Log) (string, error) {
	task, err := logkey.ParseTaskID(l.TaskID)
	if err != nil {
		return "", err
	}
	return s.format.Key(logkey.File{Task: task, Filename: l.Filename, Index: l.Index, Modified: l.Modified}), nil
}

// PutLog uploads l to LogBucket, as the task uploader does, and returns its key.
func (s *Stack) PutLog(ctx context.Context, l Log) (string, error) {
	key, err := s.Key(l)
	if err != nil {
		return "", err
	}
	_, err = s.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(LogBucket),
		Key:    aws.String(key),
		Body:   strings.NewReader(string(l.Body)),
		Metadata: map[string]string{
			"starttime": strconv.FormatInt(l.Modified.Add(-time.Hour).UnixMilli(), 10),
			"endtime":   strconv.FormatInt(l.Modified.UnixMilli(), 10),
		},
	})
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", LogBucket, key, err)
	}
	return key, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// GetLog returns the bytes stored under key in LogBucket.
func (s *Stack) GetLog(ctx context.Context, key string) ([]byte, error) {
	out, err := s.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(LogBucket), Key: aws.String(key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}
