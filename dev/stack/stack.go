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
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
// be the same everywhere.
const (
	LocalRegion    = "us-east-1"
	localAccessKey = "test"
	localSecretKey = "test"
)

// LocalAWS points this process's AWS SDK at endpoint: it sets AWS_REGION,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY only where they are unset (to
// us-east-1, test, test) and AWS_ENDPOINT_URL always. It returns the four
// values, to pass on to a child process's environment.
func LocalAWS(endpoint string) map[string]string {
	env := map[string]string{}
	for _, kv := range [][2]string{
		{"AWS_REGION", LocalRegion},
		{"AWS_ACCESS_KEY_ID", localAccessKey},
		{"AWS_SECRET_ACCESS_KEY", localSecretKey},
	} {
		v := os.Getenv(kv[0])
		if v == "" {
			v = kv[1]
			_ = os.Setenv(kv[0], v)
		}
		env[kv[0]] = v
	}
	_ = os.Setenv("AWS_ENDPOINT_URL", endpoint)
	env["AWS_ENDPOINT_URL"] = endpoint
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

// Local is an emulator holding the template's tables and log buckets.
type Local struct {
	Root       string // repository root
	Template   *Template
	Moto       *Moto
	DynamoDB   *dynamodb.Client
	S3         *s3.Client
	LogBuckets []string // created empty if absent
	// Env is what LocalAWS set: the AWS variables a child process needs.
	Env map[string]string
}

// Up finds the repository, loads template.yaml, starts (or finds) the emulator
// at addr (see StartMoto), creates the template's tables named by LocalName
// and LogsFunction's log buckets, and points this process's AWS SDK at the
// emulator (LocalAWS). Close stops what it started.
func Up(ctx context.Context, addr string) (*Local, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	tpl, err := LoadTemplate(filepath.Join(root, TemplateFile))
	if err != nil {
		return nil, err
	}
	moto, err := StartMoto(ctx, addr)
	if err != nil {
		return nil, err
	}
	client := DynamoDBClient(moto.Endpoint)
	if err := tpl.CreateTables(ctx, client, LocalName); err != nil {
		_ = moto.Stop()
		return nil, fmt.Errorf("create tables at %s: %w", moto.Endpoint, err)
	}
	s3Client := S3Client(moto.Endpoint, localAccessKey, localSecretKey)
	buckets, err := tpl.LogBuckets()
	if err == nil {
		err = CreateBuckets(ctx, s3Client, buckets...)
	}
	if err != nil {
		_ = moto.Stop()
		return nil, fmt.Errorf("create log buckets at %s: %w", moto.Endpoint, err)
	}
	return &Local{
		Root:       root,
		Template:   tpl,
		Moto:       moto,
		DynamoDB:   client,
		S3:         s3Client,
		LogBuckets: buckets,
		Env:        LocalAWS(moto.Endpoint),
	}, nil
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
