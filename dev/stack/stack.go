// Package stack stands up the service's AWS resources locally, from
// template.yaml: it starts (or finds) a DynamoDB emulator, creates the
// template's tables in it and computes each function's environment the way the
// template gives it. dev/run, dev/invoke and the integration tests of every
// package use it, so that all of them follow the one template.
//
// A test package's TestMain typically does:
//
//	local, err := stack.Up(ctx, "127.0.0.1:0")
//	...
//	code := m.Run()
//	local.Close()
//	os.Exit(code)
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TemplateFile is the template's file name at the repository root.
const TemplateFile = "template.yaml"

// RepoRoot returns the repository root: the nearest directory, from the
// working directory upwards, that holds template.yaml. Tests run in their
// package's directory, so this finds the root from any package.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, TemplateFile)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no " + TemplateFile + " in the working directory or above it")
		}
		dir = parent
	}
}

// Local AWS settings: moto accepts any credentials, and the region only has to
// be the same everywhere: the emulator keeps each region's tables apart, so a
// table created in one region is not found from another.
const (
	LocalRegion    = "us-east-1"
	localAccessKey = "test"
	localSecretKey = "test"
)

// DynamoDBAttemptTimeout is DYNAMODB_ATTEMPT_TIMEOUT on the emulator (make
// run sets it). The emulator takes about a second for a 1 MB page of a large
// fleet, where DynamoDB takes milliseconds, and answers one request at a
// time, so the eight segments of a list take turns there: one page's
// attempt can wait several seconds. The production second would end every
// list of a few thousand slaves in a 504, and its retries would keep the
// emulator busy with answers nobody waits for (docs/decisions.md,
// "Deadlines of the local stack").
const DynamoDBAttemptTimeout = 30 * time.Second

// DefaultAddr is where make run, make invoke and make seed-logs find the
// emulator, or start it: LocalStack's port. EMULATOR_ADDR moves it.
const DefaultAddr = "127.0.0.1:4566"

// Addr returns the emulator's address: EMULATOR_ADDR, or DefaultAddr.
func Addr() string {
	if a := strings.TrimSpace(os.Getenv("EMULATOR_ADDR")); a != "" {
		return a
	}
	return DefaultAddr
}

// callerAWS lists the variables of a developer's shell that would send the
// SDK elsewhere than the emulator, to another region of it, or make it read
// a profile: the local stack sets or clears every one of them.
var callerAWS = []string{
	"AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
	"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_ENDPOINT_URL",
}

// LocalAWS points this process's AWS SDK at the emulator at endpoint, in
// LocalRegion with the emulator's credentials, whatever the developer's
// shell says: AWS_REGION=eu-west-1 or a profile there must not send the
// tables to one region and the requests to another, nor a request to a real
// account. It sets AWS_REGION, AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_ENDPOINT_URL, and clears the rest of
// callerAWS and every service's AWS_ENDPOINT_URL_<SERVICE>. It returns the
// variables a child process needs and the names of the caller's variables
// it replaced or cleared (for one line telling so). The processes the local
// stack starts get none of the caller's variables either (ProcessEnv).
func LocalAWS(endpoint string) (env map[string]string, ignored []string) {
	env = localAWSEnv(endpoint)
	ignored = ignoredAWS(env)
	for _, k := range callerAWSNames() {
		if want, ok := env[k]; ok {
			_ = os.Setenv(k, want)
		} else {
			_ = os.Unsetenv(k)
		}
	}
	return env, ignored
}

// IgnoredAWS returns the names of the caller's AWS variables that LocalAWS
// would replace or clear for an emulator at endpoint, without changing
// anything: the local stack says so before it starts a process.
func IgnoredAWS(endpoint string) []string {
	return ignoredAWS(localAWSEnv(endpoint))
}

func localAWSEnv(endpoint string) map[string]string {
	return map[string]string{
		"AWS_REGION":            LocalRegion,
		"AWS_DEFAULT_REGION":    LocalRegion,
		"AWS_ACCESS_KEY_ID":     localAccessKey,
		"AWS_SECRET_ACCESS_KEY": localSecretKey,
		"AWS_ENDPOINT_URL":      endpoint,
	}
}

// callerAWSNames is callerAWS and the AWS_ENDPOINT_URL_<SERVICE> variables
// this process has.
func callerAWSNames() []string {
	names := slices.Clone(callerAWS)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_ENDPOINT_URL_") {
			names = append(names, k)
		}
	}
	return names
}

func ignoredAWS(env map[string]string) []string {
	var ignored []string
	for _, k := range callerAWSNames() {
		if v, set := os.LookupEnv(k); set && v != env[k] {
			ignored = append(ignored, k)
		}
	}
	slices.Sort(ignored)
	return ignored
}

// ProcessEnv returns the environment of a process the local stack starts
// (the emulator, MinIO, dev/deploylocal.py, a build): this process's
// environment without a single AWS_ variable, then AWS_REGION and
// AWS_DEFAULT_REGION set to LocalRegion, AWS_CONFIG_FILE and
// AWS_SHARED_CREDENTIALS_FILE naming an empty file (os.DevNull), then set.
// A developer's shell set up for an account reaches none of them: boto3,
// which moto and the SAM translator run on, fails on a profile it cannot
// find (ProfileNotFound), and moto then answers every request with an HTML
// 500; a profile that does exist, or ~/.aws/config's default one, could
// hold an SSO session or a credential process. The function binaries get
// no variable of this process at all (lambdarun).
func ProcessEnv(set map[string]string) []string {
	local := map[string]string{
		"AWS_REGION":                  LocalRegion,
		"AWS_DEFAULT_REGION":          LocalRegion,
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	}
	maps.Copy(local, set)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, replaced := local[k]
		return strings.HasPrefix(k, "AWS_") || replaced
	})
	for _, k := range slices.Sorted(maps.Keys(local)) {
		env = append(env, k+"="+local[k])
	}
	return env
}

// DynamoDBClient returns a client for the emulator at endpoint. It reads no
// environment or shared config file, so a developer's AWS profile cannot send
// it elsewhere.
func DynamoDBClient(endpoint string) *dynamodb.Client {
	return dynamodb.NewFromConfig(aws.Config{
		Region:      LocalRegion,
		Credentials: credentials.NewStaticCredentialsProvider(localAccessKey, localSecretKey, ""),
	}, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	})
}

// Local is an emulator holding the template's tables and buckets, and the
// log buckets.
type Local struct {
	Root       string // repository root
	Template   *Template
	Moto       *Moto
	DynamoDB   *dynamodb.Client
	S3         *s3.Client
	LogBuckets []string // created empty if absent
	// ReportsBucket is the template's ReportsBucket, where the large form
	// of machine reports goes (created empty if absent).
	ReportsBucket string
	// Env is what LocalAWS set: the AWS variables a child process needs.
	Env map[string]string
	// Ignored names the caller's AWS variables that LocalAWS replaced or
	// cleared.
	Ignored []string
}

// Up finds the repository, loads template.yaml, starts (or finds) the emulator
// at addr (see StartMoto), creates the template's tables named by LocalName,
// its buckets named by LocalBucketName and LogsFunction's log buckets, and points this process's AWS SDK at the
// emulator (LocalAWS). Close stops what it started.
func Up(ctx context.Context, addr string) (*Local, error) {
	return UpWith(ctx, addr, Options{})
}

// UpWithProgress is Up telling what it does, one line a step, on progress
// (nil for silence): a first start spends seconds in moto's own start.
func UpWithProgress(ctx context.Context, addr string, progress io.Writer) (*Local, error) {
	return UpWith(ctx, addr, Options{Progress: progress})
}

// UpWith is Up as the command o names, telling what it does on o.Progress.
// An emulator it starts is claimed until Close (StartMoto): the caller
// says when the others may use it (Local.Moto.Ready).
func UpWith(ctx context.Context, addr string, o Options) (*Local, error) {
	say := o.say
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	tpl, err := LoadTemplate(filepath.Join(root, TemplateFile))
	if err != nil {
		return nil, err
	}
	began := time.Now()
	// Said before anything starts: the emulator starts without them.
	if ignored := IgnoredAWS("http://" + addr); len(ignored) > 0 {
		say("local stack: region %s and the emulator's credentials, whatever the shell says (ignoring %s)", LocalRegion, strings.Join(ignored, ", "))
	}
	moto, err := StartMotoWith(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	if moto.Started {
		say("local stack: moto answers on %s (%.1fs)", moto.Endpoint, time.Since(began).Seconds())
	} else {
		say("local stack: using the emulator already running on %s", addr)
	}
	env, ignored := LocalAWS(moto.Endpoint)
	buckets, err := tpl.LocalBuckets()
	if err != nil {
		_ = moto.Stop()
		return nil, err
	}
	client := DynamoDBClient(moto.Endpoint)
	s3Client := S3Client(moto.Endpoint, localAccessKey, localSecretKey)
	// Said only when something is missing: on an emulator that make run
	// set up, every command would otherwise announce work it does not do.
	if what := missing(ctx, client, s3Client, tpl, buckets); what != "" {
		say("local stack: creating %s", what)
	}
	if err := tpl.CreateTables(ctx, client, LocalName); err != nil {
		_ = moto.Stop()
		return nil, fmt.Errorf("create tables at %s: %w", moto.Endpoint, err)
	}
	if err := CreateBuckets(ctx, s3Client, buckets...); err != nil {
		_ = moto.Stop()
		return nil, fmt.Errorf("create buckets at %s: %w", moto.Endpoint, err)
	}
	logBuckets, err := tpl.LogBuckets()
	if err != nil {
		_ = moto.Stop()
		return nil, err
	}
	local := &Local{
		Root:          root,
		Template:      tpl,
		Moto:          moto,
		DynamoDB:      client,
		S3:            s3Client,
		LogBuckets:    logBuckets,
		ReportsBucket: LocalBucketName("ReportsBucket"),
		Env:           env,
		Ignored:       ignored,
	}
	if err := local.CreateEventBuses(ctx); err != nil {
		_ = moto.Stop()
		return nil, fmt.Errorf("create event buses at %s: %w", moto.Endpoint, err)
	}
	return local, nil
}

// missing names the template's tables and the buckets the emulator does
// not hold yet ("the tables A, B and the buckets c"), "" when it holds them
// all. A listing that fails names everything: CreateTables and
// CreateBuckets, which run whatever this says, report the failure.
func missing(ctx context.Context, db *dynamodb.Client, s3c *s3.Client, tpl *Template, buckets []string) string {
	tables := tpl.Tables()
	var have []string
	for p := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			have = nil
			break
		}
		have = append(have, page.TableNames...)
	}
	tables = slices.DeleteFunc(slices.Clone(tables), func(id string) bool { return slices.Contains(have, LocalName(id)) })
	if out, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil {
		buckets = slices.DeleteFunc(slices.Clone(buckets), func(b string) bool {
			return slices.ContainsFunc(out.Buckets, func(o s3types.Bucket) bool { return aws.ToString(o.Name) == b })
		})
	}
	var parts []string
	if len(tables) > 0 {
		parts = append(parts, "the tables "+strings.Join(tables, ", "))
	}
	if len(buckets) > 0 {
		parts = append(parts, "the buckets "+strings.Join(buckets, ", "))
	}
	return strings.Join(parts, " and ")
}

// LogBuckets returns the buckets LogsFunction reads (its LOG_BUCKETS), which
// the task uploader owns in a deployment and the local stack creates.
func (t *Template) LogBuckets() ([]string, error) {
	env, err := t.FunctionEnv("LogsFunction", LocalName)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, b := range strings.Split(env["LOG_BUCKETS"], ",") {
		if b = strings.TrimSpace(b); b != "" {
			names = append(names, b)
		}
	}
	return names, nil
}

// Close stops the emulator if Up started it.
func (l *Local) Close() error {
	return l.Moto.Stop()
}
