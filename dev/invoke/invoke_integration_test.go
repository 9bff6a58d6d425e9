//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
)

// The package's tests share one emulator, started on first use, and one
// directory of function binaries: a start-up of moto costs seconds of CPU,
// and so does linking a function again. Each test empties the emulator
// first (emptyEmulator), so that none sees what another applied.
var (
	shared   stack.SharedMoto
	binaries lambdarun.Binaries
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "invoke-binaries-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binaries.Dir = dir
	defer shared.Stop()
	return m.Run()
}

// emptyEmulator resets the shared emulator to no tables, buckets or
// queues, as a new one starts, and returns it.
func emptyEmulator(t *testing.T) *stack.Moto {
	t.Helper()
	moto, err := shared.Empty(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return moto
}

// make invoke as a user meets it: the response alone on stdout, START, END
// and REPORT on stderr, the caller's variables and parameter overrides
// reaching the function, the caller's AWS environment ignored, and an event
// the function does not handle failing it.
func TestInvokeRunsAFunctionAsSamLocalInvokeDoes(t *testing.T) {
	moto := emptyEmulator(t)
	addr := strings.TrimPrefix(moto.Endpoint, "http://")

	// A shell set up for a real account, in another region.
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	t.Setenv("AWS_PROFILE", "production")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")

	// invoke runs function on event, with the binary built for it unless
	// extra names another.
	invoke := func(t *testing.T, function, event string, extra ...string) (stdout, stderr string, err error) {
		t.Helper()
		args := []string{
			"-function", function, "-event", filepath.Join("..", "..", "events", event),
			"-template", filepath.Join("..", "..", "template.yaml"),
			"-env-vars", filepath.Join("..", "env.local.json"), "-moto", addr,
		}
		if !slices.Contains(extra, "-binary") {
			args = append(args, "-binary", build(t, function))
		}
		args = append(args, extra...)
		var out, errs strings.Builder
		err = run(args, &out, &errs)
		return out.String(), errs.String(), err
	}

	t.Run("a machine report, with the shell's region elsewhere", func(t *testing.T) {
		stdout, stderr, err := invoke(t, "InventoryFunction", "inventory-machine-report.json")
		if err != nil {
			t.Fatalf("got %v\n%s", err, stderr)
		}
		var res map[string]int
		if err := json.Unmarshal([]byte(stdout), &res); err != nil || res["machines"] != 3 || res["failed"] != 0 {
			t.Errorf("got stdout %q, want only the response, 3 machines applied", stdout)
		}
		report := regexp.MustCompile(`(?m)^START RequestId: (\S+) Version: \$LATEST\n(?s:.*)^END RequestId: (\S+)\nREPORT RequestId: (\S+)\tDuration: [0-9.]+ ms\tBilled Duration: \d+ ms\tMemory Size: 512 MB\tMax Memory Used: \d+ MB\tInit Duration: [0-9.]+ ms\n`)
		if m := report.FindStringSubmatch(stderr); m == nil || m[1] != m[2] || m[2] != m[3] {
			t.Errorf("got stderr %q, want START, the logs, END and REPORT of one request", stderr)
		}
	})

	// The log the sample events look up, for a presigned link.
	_, err := stack.LocalS3Client(moto.Endpoint).PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String("task-logs"), Key: aws.String("web-api/2026/11/web-api-v42-1793491200000-0-node17-us_east_1a_0-1793494800000-stdout"),
		Body: strings.NewReader("started\n"), Metadata: map[string]string{"starttime": "1793491200000"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The lookups read the index (the template's LogIndex): S3's event of
	// the log reaches IndexerFunction first, as EventBridge delivers it.
	if stdout, stderr, err := invoke(t, "IndexerFunction", "indexer-object-created.json"); err != nil || !strings.Contains(stdout, `"outcome": "indexed"`) {
		t.Fatalf("got %q, %v\n%s, want the log indexed", stdout, err, stderr)
	}
	expires := func(t *testing.T, stdout string) string {
		t.Helper()
		var resp struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal([]byte(stdout), &resp); err != nil || resp.StatusCode != 200 {
			t.Fatalf("got stdout %q, want only a 200 response", stdout)
		}
		m := regexp.MustCompile(`X-Amz-Expires=(\d+)`).FindStringSubmatch(resp.Body)
		if m == nil {
			t.Fatalf("got body %s, want presigned links", resp.Body)
		}
		return m[1]
	}
	t.Run("a variable of the caller's shell reaches the function", func(t *testing.T) {
		t.Setenv("LOG_URL_TTL", "2h")
		stdout, stderr, err := invoke(t, "LogsFunction", "logs-task.json")
		if err != nil {
			t.Fatalf("got %v\n%s", err, stderr)
		}
		if got := expires(t, stdout); got != "7200" {
			t.Errorf("got links valid %s s, want 7200 (LOG_URL_TTL=2h)", got)
		}
	})
	t.Run("a parameter override reaches the function", func(t *testing.T) {
		stdout, stderr, err := invoke(t, "LogsFunction", "logs-task.json", "-parameter-overrides", "LogUrlTtl=3h")
		if err != nil {
			t.Fatalf("got %v\n%s", err, stderr)
		}
		if got := expires(t, stdout); got != "10800" {
			t.Errorf("got links valid %s s, want 10800 (LogUrlTtl=3h)", got)
		}
	})
	t.Run("a binary built for another system says so", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "bootstrap")
		if err := os.WriteFile(other, []byte("\xcf\xfa\xed\xfe not a program of this machine"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, _, err := invoke(t, "SlavesFunction", "slaves-list.json", "-binary", other)
		if err == nil || !strings.Contains(err.Error(), "is not a program of this machine") || !strings.Contains(err.Error(), "make invoke builds it for this one") {
			t.Errorf("got %v, want it to say the binary is for another system", err)
		}
	})
	t.Run("an event the function does not handle fails it", func(t *testing.T) {
		stdout, _, err := invoke(t, "InventoryFunction", "slaves-list.json")
		var ferr *lambdarun.FunctionError
		if !errors.As(err, &ferr) || !strings.Contains(ferr.Message, `machine report has no "machines" list`) {
			t.Errorf("got %v, want the function's error", err)
		}
		if stdout != "" {
			t.Errorf("got stdout %q, want nothing", stdout)
		}
	})
}

// An emulator busy with a large report is slow to answer even the probe
// make invoke sends before anything else; it must be used, not taken for
// absent (a second one started on its port fails with "Address already in
// use"). Here every GET, the probe, waits longer than a probe's second.
func TestInvokeUsesAnEmulatorThatIsSlowToAnswer(t *testing.T) {
	moto := emptyEmulator(t)
	target, err := url.Parse(moto.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			time.Sleep(1500 * time.Millisecond)
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(busy.Close)

	var stdout, stderr strings.Builder
	err = run([]string{
		"-function", "InventoryFunction", "-event", filepath.Join("..", "..", "events", "inventory-machine-report.json"),
		"-binary", build(t, "InventoryFunction"), "-template", filepath.Join("..", "..", "template.yaml"),
		"-env-vars", filepath.Join("..", "env.local.json"), "-moto", strings.TrimPrefix(busy.URL, "http://"),
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("got %v, want the busy emulator used\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "started moto") || !strings.Contains(stdout.String(), `"machines": 3`) {
		t.Errorf("got stdout %q, stderr %q, want 3 machines applied on the running emulator", stdout.String(), stderr.String())
	}
}

// build compiles function for this machine into the package's binaries,
// with the Lambda build's flags, once for all the tests that run it.
func build(t *testing.T, function string) string {
	t.Helper()
	out, err := binaries.Get(function, func(out string) error {
		root := filepath.Join("..", "..")
		dirs, err := stack.FunctionDirs(root)
		if err != nil {
			return err
		}
		return lambdarun.Build(context.Background(), root, runtime.GOARCH, "./functions/"+dirs[function], out)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// make invoke gives the function make run's DynamoDB attempt deadline
// (stack.LocalDeadlines): on an emulator that takes longer than the
// production second to answer each call, as moto does behind a large
// report, the report is applied instead of running out of attempts.
func TestInvokeGivesTheFunctionMakeRunsAttemptDeadline(t *testing.T) {
	t.Setenv(stack.AttemptTimeoutEnv, "")
	os.Unsetenv(stack.AttemptTimeoutEnv)
	moto := emptyEmulator(t)
	target, err := url.Parse(moto.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	// Every call of the function is slow. The calls that set up the tables
	// are make invoke's own, before the function starts, and pass at once:
	// slowed too, they only made the test wait.
	setup := []string{"DescribeTable", "CreateTable", "DescribeTimeToLive", "UpdateTimeToLive"}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service, operation, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		if strings.HasPrefix(service, "DynamoDB_") && !slices.Contains(setup, operation) {
			time.Sleep(1200 * time.Millisecond) // over the production second
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)

	var stdout, stderr strings.Builder
	err = run([]string{
		"-function", "InventoryFunction", "-event", filepath.Join("..", "..", "events", "inventory-machine-report.json"),
		"-binary", build(t, "InventoryFunction"), "-template", filepath.Join("..", "..", "template.yaml"),
		"-env-vars", filepath.Join("..", "env.local.json"), "-moto", strings.TrimPrefix(slow.URL, "http://"),
	}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), `"changed": 3`) {
		t.Fatalf("got %v, stdout %q, want the 3 machines applied\n%s", err, stdout.String(), stderr.String())
	}
}
