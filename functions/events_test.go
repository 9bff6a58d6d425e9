//go:build integration

// Package functions_test runs every sample event in events/ through the real
// bootstrap binary of its function, served by a local Lambda Runtime API,
// against tables that a moto_server started here holds. Every API Gateway
// answer must match openapi.yaml.
package functions_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/edge"
)

// steps is the order the events run in, each with the status it must get
// (0 for a non-HTTP event that must succeed). Together they walk one slave
// through every route.
var steps = []struct {
	file     string
	function string
	status   int
	contains string // in the response body, when set
}{
	{"inventory-machine-report.json", "InventoryFunction", 0, ""},
	{"inventory-machine-report-detail.json", "InventoryFunction", 0, ""},
	{"inventory-report-object.json", "InventoryFunction", 0, ""},
	{"inventory-plan-step.json", "InventoryFunction", 0, `"machines":3`},
	{"slaves-list.json", "SlavesFunction", 200, ""},
	{"slaves-details.json", "SlavesFunction", 200, ""},
	{"slaves-history.json", "SlavesFunction", 200, ""},
	{"slaves-freeze.json", "SlavesFunction", 200, ""},
	{"slaves-list-frozen.json", "SlavesFunction", 200, ""},
	{"slaves-activate.json", "SlavesFunction", 200, ""},
	{"slaves-freeze-expiring.json", "SlavesFunction", 200, ""},
	{"slaves-list-expiring.json", "SlavesFunction", 200, ""},
	{"expiry-run.json", "ExpiryFunction", 0, ""},
	{"publisher-stream-records.json", "PublisherFunction", 0, `{"batchItemFailures":[]}`},
	{"expiry-scheduled-event.json", "ExpiryFunction", 0, ""},
	{"slaves-delete-expiring.json", "SlavesFunction", 200, ""},
	{"slaves-decommission.json", "SlavesFunction", 200, ""},
	{"inventory-machine-lost.json", "InventoryFunction", 0, ""},
	{"expiry-retention.json", "ExpiryFunction", 0, ""},
	{"slaves-delete-dead.json", "SlavesFunction", 200, ""},
	{"slaves-delete.json", "SlavesFunction", 200, ""},
	// The lookups read the index (the template's LogIndex): the sample
	// log's S3 event reaches IndexerFunction first, as EventBridge
	// delivers it.
	{"indexer-object-created.json", "IndexerFunction", 0, `"outcome":"indexed"`},
	{"logs-task.json", "LogsFunction", 200, sampleLog},
	{"logs-request.json", "LogsFunction", 200, ""},
	{"logs-deploy.json", "LogsFunction", 200, ""},
	{"logs-search.json", "LogsFunction", 200, ""},
	// The sample log's listing item is not what the index holds (its size
	// and ETag): a HEAD finds the index right, and the README is no log.
	{"indexer-reconcile-batch.json", "IndexerFunction", 0, `"batch":{"added":0,"removed":0,"updated":0,"unchanged":1,"skipped":1}`},
	{"console-page.json", "ConsoleFunction", 200, `<script type="module" src="assets/`},
}

// sampleLog is a key of the task the logs events look up, in the default
// LOG_KEY_FORMAT.
const sampleLog = "web-api/2026/11/web-api-v42-1793491200000-0-node17-us_east_1a_0-1793494800000-stdout"

func TestEveryEventRunsThroughItsFunction(t *testing.T) {
	ctx := context.Background()
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()

	t.Run("every file in events/ is exercised", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(local.Root, "events", "*.json"))
		listed := map[string]bool{}
		for _, s := range steps {
			listed[s.file] = true
		}
		for _, f := range files {
			if !listed[filepath.Base(f)] {
				t.Errorf("got %s in events/, want it in steps", filepath.Base(f))
			}
		}
	})

	// The log of the sample events' task, where the task uploader puts it.
	_, err = local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(local.LogBuckets[0]), Key: aws.String(sampleLog),
		Body: strings.NewReader("started\n"), Metadata: map[string]string{"starttime": "1793491200000"}})
	if err != nil {
		t.Fatal(err)
	}

	// The report object inventory-report-object.json announces: the inline
	// sample's detail, as a scheduler writes it to the reports bucket.
	report, err := os.ReadFile(filepath.Join(local.Root, "events", "inventory-machine-report-detail.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(local.ReportsBucket),
		Key: aws.String("reports/2026-11-21T05:15:00Z.json"), Body: bytes.NewReader(report)})
	if err != nil {
		t.Fatal(err)
	}

	doc := apidoc.MustLoad(t)
	dirs, err := stack.FunctionDirs(local.Root)
	if err != nil {
		t.Fatal(err)
	}
	binaries := map[string]string{}
	for fn, dir := range dirs {
		binaries[fn] = build(t, local.Root, dir)
	}
	for _, s := range steps {
		t.Run(s.file, func(t *testing.T) {
			event, err := os.ReadFile(filepath.Join(local.Root, "events", s.file))
			if err != nil {
				t.Fatal(err)
			}
			env := functionEnv(t, local, s.function)
			out, err := invokeEvent(ctx, binaries[s.function], env, event)
			if err != nil {
				t.Fatalf("got error %v, want a response", err)
			}
			if s.status == 0 {
				if !strings.Contains(string(out), s.contains) {
					t.Errorf("got %s, want it to contain %s", out, s.contains)
				}
				return
			}
			var resp struct {
				StatusCode        int                 `json:"statusCode"`
				MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
				Body              string              `json:"body"`
				Base64            bool                `json:"isBase64Encoded"`
			}
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatalf("got %s, want an API Gateway response: %v", out, err)
			}
			body := []byte(resp.Body)
			if resp.Base64 {
				if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
					t.Fatalf("got a body that is not base64: %v", err)
				}
			}
			header := http.Header{}
			for k, vs := range resp.MultiValueHeaders {
				for _, v := range vs {
					header.Add(k, v)
				}
			}
			req, _, err := edge.Request(ctx, event)
			if err != nil {
				t.Fatal(err)
			}
			// The console's page is HTML, outside the API's description.
			if err := doc.Check(req, resp.StatusCode, header, body); s.function != "ConsoleFunction" && err != nil {
				t.Errorf("answer does not match %s: %v", apidoc.File, err)
			}
			if resp.StatusCode != s.status {
				t.Errorf("got %d %s, want %d", resp.StatusCode, resp.Body, s.status)
			}
			if !strings.Contains(resp.Body, s.contains) {
				t.Errorf("got %s, want it to contain %s", resp.Body, s.contains)
			}
			// A sample event shows what a route answers: the log routes'
			// events ask for no compression, so the body reads as it is.
			if s.function == "LogsFunction" && (resp.Base64 || !json.Valid([]byte(resp.Body))) {
				t.Errorf("got a body that is not readable JSON (base64 %v): %.80s", resp.Base64, resp.Body)
			}
		})
	}

	// A function given an event it does not handle fails, so that a
	// misrouted event is seen (make invoke exits non-zero) rather than
	// applied as something else.
	foreign := []struct {
		file, function, message string
	}{
		{"slaves-list.json", "InventoryFunction", `machine report has no "machines" list`},
		{"expiry-run.json", "InventoryFunction", `machine report has no "machines" list`},
		{"indexer-object-created.json", "InventoryFunction", "where reports are"},
		{"slaves-list.json", "ExpiryFunction", "an API Gateway request is not a scheduled event"},
		{"inventory-machine-report.json", "ExpiryFunction", `an EventBridge "Machine Report" event is not a scheduled event`},
		{"inventory-machine-report-detail.json", "ExpiryFunction", "a machine report is not a scheduled event"},
		{"inventory-machine-report.json", "SlavesFunction", "not an API Gateway proxy event"},
		{"expiry-run.json", "LogsFunction", "not an API Gateway proxy event"},
		{"expiry-run.json", "ConsoleFunction", "not an API Gateway proxy event"},
		{"slaves-list.json", "PublisherFunction", "not a DynamoDB stream event"},
		{"indexer-object-created.json", "PublisherFunction", "not a DynamoDB stream event"},
		{"expiry-run.json", "IndexerFunction", `neither a reconciliation step nor an S3 "Object Created" or "Object Deleted" event`},
	}
	for _, f := range foreign {
		t.Run(f.function+" refuses "+f.file, func(t *testing.T) {
			event, err := os.ReadFile(filepath.Join(local.Root, "events", f.file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := invokeEvent(ctx, binaries[f.function], functionEnv(t, local, f.function), event)
			var ferr *lambdarun.FunctionError
			if !errors.As(err, &ferr) || !strings.Contains(ferr.Message, f.message) {
				t.Errorf("got %s, %v, want a function error saying %q", out, err, f.message)
			}
		})
	}
}

// invokeEvent runs binary once with env and event, as make invoke does,
// and returns its response. Its timeout is patience, not Lambda's default
// 3 s: the sample events go through the emulators, which a busy machine
// slows many times over; the production timeouts have their own tests.
func invokeEvent(ctx context.Context, binary string, env map[string]string, event []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, patience+time.Minute)
	defer cancel()
	res, err := lambdarun.Function{Binary: binary, Env: env, Timeout: patience, Logs: os.Stderr}.Invoke(ctx, event)
	return res.Response, err
}

// build compiles a function for this machine, with the Lambda build's
// flags, once per run of the package: every test that runs the function
// runs the same binary.
func build(t *testing.T, root, dir string) string {
	t.Helper()
	return buildOnce(t, dir, func(out string) error {
		return lambdarun.Build(context.Background(), root, runtime.GOARCH, "./functions/"+dir, out)
	})
}

// A go build costs seconds of CPU: the package builds each binary once,
// for every test that runs it. Each test that stores data starts its own
// stack: a list of the slaves reads the change feed's latest changes, so
// one test's changes would show in another's list.
var binaries lambdarun.Binaries

func TestMain(m *testing.M) {
	var err error
	if binaries.Dir, err = os.MkdirTemp("", "functions-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binaries.Dir)
	os.Exit(code)
}

// buildOnce returns the package's binary called name, which write makes
// the first time it is asked for.
func buildOnce(t *testing.T, name string, write func(out string) error) string {
	t.Helper()
	path, err := binaries.Get(name, write)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// functionEnv is what `make invoke` gives a function: the template's
// environment, the repository's env-vars file for sam local invoke, and
// then the local stack's endpoint and credentials, which a container would
// have from its environment.
func functionEnv(t *testing.T, local *stack.Local, function string) map[string]string {
	t.Helper()
	noShell := func(string) (string, bool) { return "", false }
	env, err := local.Template.InvokeEnv(function, noShell, filepath.Join(local.Root, "dev", "env.local.json"))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(env, local.Env)
	// make invoke's DynamoDB attempt deadline, not the production second:
	// on a busy machine moto takes longer, and an attempt cut off after the
	// emulator applied it is retried into a 409 of its own change.
	stack.LocalDeadlines(env, noShell)
	if strings.TrimSpace(env["AUTH_MODE"]) == "" {
		t.Fatal("got no AUTH_MODE in the function's environment")
	}
	return env
}
