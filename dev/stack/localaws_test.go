package stack

import (
	"os"
	"slices"
	"testing"
)

// A developer's AWS environment must never make the local stack lie: with
// AWS_REGION=eu-west-1 the tables would be created in one region of the
// emulator and looked for in another, and a profile or an endpoint variable
// would send calls elsewhere.
func TestLocalAWSOverridesTheCallersAWSEnvironment(t *testing.T) {
	caller := map[string]string{
		"AWS_REGION":                "eu-west-1",
		"AWS_DEFAULT_REGION":        "eu-west-1",
		"AWS_ACCESS_KEY_ID":         "AKIAIOSFODNN7EXAMPLE",
		"AWS_SECRET_ACCESS_KEY":     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN":         "token",
		"AWS_PROFILE":               "production",
		"AWS_ENDPOINT_URL":          "https://dynamodb.eu-west-1.amazonaws.com",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9",
		"AWS_ENDPOINT_URL_S3":       "http://127.0.0.1:9",
	}
	for k, v := range caller {
		t.Setenv(k, v)
	}
	env, ignored := LocalAWS("http://127.0.0.1:4566")

	want := map[string]string{
		"AWS_REGION": LocalRegion, "AWS_DEFAULT_REGION": LocalRegion,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
	}
	for k, v := range want {
		if env[k] != v || os.Getenv(k) != v {
			t.Errorf("%s: got %q (process %q), want %q", k, env[k], os.Getenv(k), v)
		}
	}
	for _, k := range []string{"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_S3"} {
		if v, set := os.LookupEnv(k); set {
			t.Errorf("%s: got %q, want it cleared", k, v)
		}
	}
	var names []string
	for k := range caller {
		names = append(names, k)
	}
	slices.Sort(names)
	if !slices.Equal(ignored, names) {
		t.Errorf("ignored: got %v, want %v", ignored, names)
	}
}

func TestAddrIsEmulatorAddrOrLocalStacksPort(t *testing.T) {
	t.Setenv("EMULATOR_ADDR", "")
	if got := Addr(); got != "127.0.0.1:4566" {
		t.Errorf("got %q, want 127.0.0.1:4566", got)
	}
	t.Setenv("EMULATOR_ADDR", "127.0.0.1:45660")
	if got := Addr(); got != "127.0.0.1:45660" {
		t.Errorf("got %q, want 127.0.0.1:45660", got)
	}
}
