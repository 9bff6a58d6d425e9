package stack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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

// Every process the local stack starts runs without the caller's AWS
// variables: moto reads a profile the shell names, and one that does not
// exist here makes it answer every request with an HTML 500.
func TestProcessEnvHoldsNoneOfTheCallersAWSVariables(t *testing.T) {
	caller := map[string]string{
		"AWS_PROFILE":                 "prod",
		"AWS_DEFAULT_PROFILE":         "prod",
		"AWS_CONFIG_FILE":             "/home/someone/.aws/config",
		"AWS_SHARED_CREDENTIALS_FILE": "/home/someone/.aws/credentials",
		"AWS_REGION":                  "eu-west-1",
		"AWS_ACCESS_KEY_ID":           "AKIAIOSFODNN7EXAMPLE",
		"AWS_SESSION_TOKEN":           "token",
		"AWS_ENDPOINT_URL_S3":         "http://127.0.0.1:9",
		"AWS_SDK_LOAD_CONFIG":         "1",
		"FLEET_TEST_KEPT":             "kept",
		"MINIO_ROOT_USER":             "theirs",
	}
	for k, v := range caller {
		t.Setenv(k, v)
	}
	env := map[string]string{}
	for _, kv := range ProcessEnv(map[string]string{"MINIO_ROOT_USER": "fleet-root"}) {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; dup {
			t.Errorf("%s is set twice", k)
		}
		env[k] = v
	}
	want := map[string]string{
		"AWS_REGION": LocalRegion, "AWS_DEFAULT_REGION": LocalRegion,
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"FLEET_TEST_KEPT": "kept", "MINIO_ROOT_USER": "fleet-root",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s: got %q, want %q", k, env[k], v)
		}
	}
	for k, v := range env {
		if _, ok := want[k]; strings.HasPrefix(k, "AWS_") && !ok {
			t.Errorf("%s=%s reaches the process, want no AWS variable of the caller", k, v)
		}
	}
	if env["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH: got %q, want the caller's", env["PATH"])
	}
}

// An emulator busy with a large report takes seconds to answer: it is
// reused, not taken for absent (a second one started on its port could
// only fail with "Address already in use").
func TestStartMotoWaitsForAnEmulatorThatIsSlowToAnswer(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond) // longer than a probe's second
		w.WriteHeader(http.StatusNotFound)
	}))
	defer slow.Close()
	t.Setenv("MOTO_PYTHON", "false") // a second emulator would fail at once

	moto, err := StartMoto(context.Background(), strings.TrimPrefix(slow.URL, "http://"))
	if err != nil {
		t.Fatalf("got %v, want the busy emulator reused", err)
	}
	if moto.Started || moto.Endpoint != slow.URL {
		t.Errorf("got started=%v endpoint=%s, want the running %s reused", moto.Started, moto.Endpoint, slow.URL)
	}
}
