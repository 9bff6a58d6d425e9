package sdkconfig

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestRetryerTriesThreeTimesWithShortPauses(t *testing.T) {
	r := Retryer()
	if got := r.MaxAttempts(); got != MaxAttempts {
		t.Errorf("got %d attempts, want %d", got, MaxAttempts)
	}
	for attempt := 1; attempt <= 20; attempt++ {
		for range 100 {
			d, err := r.RetryDelay(attempt, nil)
			if err != nil || d <= 0 || d > maxBackoff+time.Millisecond {
				t.Fatalf("attempt %d: got pause %v (%v), want in (0, %v]", attempt, d, err, maxBackoff+time.Millisecond)
			}
		}
	}
}

// The worst case of one call must leave the API time to answer: API Gateway
// gives up after 29 s and the slave and log functions after 20 s.
func TestWorstCaseOfOneCallFitsTheDeadlines(t *testing.T) {
	for _, attempt := range []time.Duration{DynamoDBAttemptTimeout, S3AttemptTimeout} {
		worst := MaxAttempts*attempt + (MaxAttempts-1)*maxBackoff
		if worst > 10*time.Second {
			t.Errorf("got worst case %v per call, want at most 10 s", worst)
		}
	}
}

func TestLoadReadsLambdasEnvironment(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	lambda := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}
	cfg, err := load(env(lambda), DynamoDB, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != "AKIA" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" {
		t.Errorf("got credentials %+v (%v), want the role's from the environment", creds, err)
	}
	if cfg.Region != "eu-west-1" || cfg.BaseEndpoint != nil || cfg.Retryer == nil || cfg.HTTPClient == nil {
		t.Errorf("got region %q, endpoint %v, want eu-west-1 and AWS's own endpoint with the retry policy", cfg.Region, cfg.BaseEndpoint)
	}
	for _, missing := range []string{"AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		vars := maps.Clone(lambda)
		delete(vars, missing)
		if _, err := load(env(vars), DynamoDB, time.Second); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: got %v, want an error naming it", missing, err)
		}
	}
}

func TestEndpointIsTheSDKsConfiguredEndpoint(t *testing.T) {
	tests := []struct {
		name    string
		vars    map[string]string
		service string
		want    string
	}{
		{"none is AWS's own", nil, DynamoDB, ""},
		{"the global variable serves every service", map[string]string{"AWS_ENDPOINT_URL": "http://moto:5000"}, S3, "http://moto:5000"},
		{"the service's variable wins", map[string]string{"AWS_ENDPOINT_URL": "http://moto:5000", "AWS_ENDPOINT_URL_S3": "http://minio:9000"}, S3, "http://minio:9000"},
		{"another service's variable is not read", map[string]string{"AWS_ENDPOINT_URL_S3": "http://minio:9000"}, DynamoDB, ""},
		{"ignoring configured endpoints", map[string]string{"AWS_ENDPOINT_URL": "http://moto:5000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, DynamoDB, ""},
		// sam local invoke passes a template variable it resolves to
		// AWS::NoValue as an empty one: empty is unset.
		{"an empty variable is AWS's own", map[string]string{"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_DYNAMODB": ""}, DynamoDB, ""},
		{"an empty service variable leaves the global one", map[string]string{"AWS_ENDPOINT_URL": "http://moto:5000", "AWS_ENDPOINT_URL_S3": ""}, S3, "http://moto:5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Endpoint(func(k string) string { return tt.vars[k] }, tt.service)
			if (got == nil && tt.want != "") || (got != nil && *got != tt.want) {
				t.Errorf("got %v, want %q", got, tt.want)
			}
		})
	}
}
