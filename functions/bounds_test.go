//go:build integration

package functions_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// The worst data of each route, as the test stores it.
const (
	historyChanges = 230 // each with a message of 4,096 '<', 29 KB as Lambda carries it: 215 fit
	bigSlaves      = 120 // each with 60,000 characters of attributes, half of them '<'
	bigExpiring    = 200 // each with the longest message and actionId, in '<': 32 KB as Lambda carries it, about 190 fit
	longLogs       = 520 // each with a key of about 1,000 bytes, mostly '<': about 440 fit
	boundsTask     = "bounds-api-v7-1793491200000-0-node3-us_east_1a"
)

// TestEveryAnswerFitsLambdasResponse stores, in the emulators, data that
// makes each route's answer far larger than Lambda can return buffered, and
// calls every route through the real SlavesFunction and LogsFunction
// binaries (with patient backend deadlines: patientBuild), run by a local
// Lambda Runtime API that refuses a response over Lambda's limits as Lambda
// does (6 MB buffered, 200 MB streamed), with and without Accept-Encoding
// gzip. Every function streams (docs/behaviour.md "Answers of any size"):
// every answer must be delivered whole, be JSON and match openapi.yaml;
// only search pages end early, by their own bound.
func TestEveryAnswerFitsLambdasResponse(t *testing.T) {
	ctx := context.Background()
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	// Logs go to MinIO, which takes hundreds of uploads at once. It is
	// built by make test; nothing of this process's environment changes.
	binary, err := stack.MinIOBinary()
	if err != nil {
		t.Fatal(err)
	}
	minio, err := stack.StartMinIO(ctx, binary)
	if err != nil {
		t.Fatalf("%v (make test builds MinIO)", err)
	}
	defer minio.Stop()
	logStore := stack.S3Client(minio.Endpoint, minio.AccessKey, minio.SecretKey)
	if err := stack.CreateBuckets(ctx, logStore, local.LogBuckets...); err != nil {
		t.Fatal(err)
	}
	doc := apidoc.MustLoad(t)
	// The memory size the template gives each function is enforced. The
	// deadlines are not the production ones: this test is about the size of
	// the answers, and the emulators, moto above all (it serves one request
	// at a time), take seconds over these tables on a loaded machine (see
	// patientBuild); the production deadlines have their own test.
	memory := func(function string) int {
		cfg, err := local.Template.FunctionConfig(function)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.MemorySize
	}
	// SlavesFunction's only backend deadline is DynamoDB's attempt, which
	// it reads from the environment (below): the binary the other tests
	// run serves, where LogsFunction's S3 deadline needs patientBuild.
	slavesFn := lambdarun.Function{Binary: build(t, local.Root, "slaves"), Name: "SlavesFunction", MemorySize: memory("SlavesFunction"),
		Env: functionEnv(t, local, "SlavesFunction"), Timeout: patience, Logs: io.Discard}
	logsFn := lambdarun.Function{Binary: patientBuild(t, local.Root, "logs"), Name: "LogsFunction", MemorySize: memory("LogsFunction"),
		Env: functionEnv(t, local, "LogsFunction"), Timeout: patience, Logs: io.Discard}
	logsFn.Env["AWS_ENDPOINT_URL_S3"] = minio.Endpoint
	logsFn.Env["AWS_ACCESS_KEY_ID"], logsFn.Env["AWS_SECRET_ACCESS_KEY"] = minio.AccessKey, minio.SecretKey
	logsFn.Env["LOG_LIST_TIMEOUT"], logsFn.Env["LOG_LINK_TIMEOUT"] = patience.String(), patience.String()
	// A DynamoDB attempt's deadline is the environment's (config.Slaves),
	// one second unless set: patience here, or a page of the large
	// attributes that a busy machine's emulator takes more than a second
	// for is a 504.
	slavesFn.Env[stack.AttemptTimeoutEnv] = patience.String()
	// MinIO sends no S3 events to index these logs by: the lookups list it.
	logsFn.Env["LOG_INDEX"] = "false"

	started := time.Now()
	var keys []string
	var uploadErr error
	uploaded := make(chan struct{})
	go func() {
		defer close(uploaded)
		keys, uploadErr = storeLongLogs(logStore, local.LogBuckets[0])
	}()
	store := dynamo.New(local.DynamoDB, stack.Tables, 90*24*time.Hour)
	changed, bigIDs := storeWorstSlaves(t, store)
	if <-uploaded; uploadErr != nil {
		t.Fatal(uploadErr)
	}
	t.Logf("stored the worst data in %v", time.Since(started).Round(time.Millisecond))

	call := func(t *testing.T, fn lambdarun.Function, method, target, body string, gz bool) answer {
		t.Helper()
		return invokeRoute(t, fn, doc, method, target, body, gz)
	}
	history := "/api/slaves/slave/" + url.PathEscape(changed)
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip %v", gz), func(t *testing.T) {
			t.Run("a history of the longest messages", func(t *testing.T) {
				// 29 MB without gzip: streamed, all of it arrives.
				a := call(t, slavesFn, "GET", history, "", gz)
				a.wantArray(t, historyChanges+1)
				a = call(t, slavesFn, "GET", history+"?limit=5", "", gz)
				a.wantArray(t, 5)
				call(t, slavesFn, "GET", history+"?limit=0", "", gz).wantStatus(t, 400)
			})
			t.Run("the fleet of slaves with large attributes", func(t *testing.T) {
				a := call(t, slavesFn, "GET", "/api/slaves", "", gz)
				a.wantArray(t, bigSlaves+bigExpiring+1)
				if gz && a.header.Get("Content-Encoding") != "gzip" {
					t.Errorf("got Content-Encoding %q, want gzip for a client that accepts it", a.header.Get("Content-Encoding"))
				}
				call(t, slavesFn, "GET", "/api/slaves/slave/"+bigIDs[0]+"/details", "", gz).wantStatus(t, 200)
			})
			t.Run("the expiring changes with the longest message and actionId", func(t *testing.T) {
				a := call(t, slavesFn, "GET", "/api/slaves/expiring", "", gz)
				a.wantArray(t, bigExpiring)
			})
			lookups := []string{
				"/api/logs/task/" + boundsTask + "?excludeMetadata=true",
				"/api/logs/request/bounds-api?excludeMetadata=true&start=1793491200000",
				"/api/logs/request/bounds-api/deploy/v7?excludeMetadata=true&start=1793491200000",
			}
			for _, target := range lookups {
				t.Run("the lookup "+target[:strings.Index(target, "?")], func(t *testing.T) {
					a := call(t, logsFn, "GET", target, "", gz)
					a.wantArray(t, longLogs)
				})
			}
			t.Run("the search, page by page", func(t *testing.T) {
				search := map[string]any{"taskIds": []string{boundsTask}, "maxPerPage": 1000, "excludeMetadata": true}
				seen := map[string]int{}
				pages := 0
				for ; pages < 20; pages++ {
					body, _ := json.Marshal(search)
					a := call(t, logsFn, "POST", "/api/logs/search", string(body), gz)
					a.wantStatus(t, 200)
					var page struct {
						ContinuationTokens map[string]any `json:"continuationTokens"`
						LastPage           bool           `json:"lastPage"`
						Results            []struct {
							Key string `json:"key"`
						} `json:"results"`
					}
					if err := json.Unmarshal(a.body, &page); err != nil {
						t.Fatal(err)
					}
					for _, r := range page.Results {
						seen[r.Key]++
					}
					if page.LastPage {
						break
					}
					search["continuationTokens"] = page.ContinuationTokens
				}
				if pages == 0 {
					t.Errorf("got all %d logs on one page, want pages cut to fit", len(seen))
				}
				for _, k := range keys {
					if seen[k] != 1 {
						t.Errorf("got %.60s… %d times over %d pages, want once", k, seen[k], pages+1)
					}
				}
			})
		})
	}
	t.Logf("all in %v", time.Since(started).Round(time.Millisecond))
}

// patience is how long the bounds test lets a function and each of its
// backend calls take: on a machine busy with other work, moto takes
// seconds per page of the test's largest tables.
const patience = 2 * time.Minute

// patientBuild compiles a function for this machine as build does, with
// every SDK attempt timeout of shared/sdkconfig (DynamoDB's second, S3's
// two) replaced by patience, through go build's -overlay: the production
// source is compiled as it is, but for those constants. A store that
// answered after a second would otherwise turn a test of response sizes
// into a 504 of the emulator's speed. (The functions read DynamoDB's
// deadline from DYNAMODB_ATTEMPT_TIMEOUT, which the test sets; S3's is
// the constant's, which LogsFunction uses.) It is built once per run of
// the package, as build's binaries are.
func patientBuild(t *testing.T, root, dir string) string {
	t.Helper()
	return buildOnce(t, "patient-"+dir, func(out string) error {
		src := filepath.Join(root, "shared", "sdkconfig", "sdkconfig.go")
		code, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		attempt := regexp.MustCompile(`(?m)^(\t(?:DynamoDBAttemptTimeout|S3AttemptTimeout)\s*=) .+$`)
		if n := len(attempt.FindAll(code, -1)); n != 2 {
			return fmt.Errorf("%s declares %d of DynamoDBAttemptTimeout and S3AttemptTimeout, want both, one a line", src, n)
		}
		patched := out + ".sdkconfig.go"
		if err := os.WriteFile(patched, attempt.ReplaceAll(code, []byte(fmt.Sprintf("$1 %d", patience))), 0o644); err != nil {
			return err
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{src: patched}})
		overlayFile := out + ".overlay.json"
		if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
			return err
		}
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-overlay", overlayFile, "-o", out, "./functions/"+dir)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s with patient attempts: %v\n%s", dir, err, msg)
		}
		return nil
	})
}

// In production a DynamoDB that does not answer costs a request the
// attempts docs/testing.md's Resilience section documents, 3 cut off after 1 s
// each, and then a JSON 504: the real SlavesFunction binary, built as
// Lambda runs it, with the template's memory, against a DynamoDB that takes
// every request and never answers. That the attempts fit well inside the
// function's timeout is arithmetic (shared/sdkconfig's
// TestWorstCaseOfOneCallFitsTheDeadlines); here the function has patience,
// so a busy machine's slow start is not taken for a timeout.
func TestAStalledDynamoDBIsA504AfterItsAttempts(t *testing.T) {
	const attemptTimeout, maxAttempts = time.Second, 3
	var mu sync.Mutex
	var attempts []time.Duration
	stop := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		_, _ = io.Copy(io.Discard, r.Body) // then net/http notices the client leaving
		select {
		case <-r.Context().Done(): // the client gave up on the attempt
		case <-stop: // it never did: not counted as an attempt cut off
			return
		}
		mu.Lock()
		attempts = append(attempts, time.Since(began))
		mu.Unlock()
	}))
	defer stalled.Close()
	defer close(stop) // first: Close waits for the requests held

	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.LoadTemplate(filepath.Join(root, stack.TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := tpl.FunctionConfig("SlavesFunction")
	if err != nil {
		t.Fatal(err)
	}
	env, err := tpl.InvokeEnv("SlavesFunction", func(string) (string, bool) { return "", false }, filepath.Join(root, "dev", "env.local.json"))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(env, map[string]string{"AWS_REGION": stack.LocalRegion, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_ENDPOINT_URL": stalled.URL})
	fn := lambdarun.Function{Binary: build(t, root, "slaves"), Name: "SlavesFunction", MemorySize: cfg.MemorySize, Timeout: patience, Env: env, Logs: io.Discard}

	began := time.Now()
	a := invokeRoute(t, fn, apidoc.MustLoad(t), "GET", "/api/slaves/expiring", "", false)
	took := time.Since(began)
	a.wantStatus(t, http.StatusGatewayTimeout)
	var e web.ErrorBody
	if err := json.Unmarshal(a.body, &e); err != nil || e.Message != "Timed out waiting for DynamoDB" {
		t.Errorf("got %s, want the message Timed out waiting for DynamoDB", a.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != maxAttempts {
		t.Errorf("got %d attempts, want %d", len(attempts), maxAttempts)
	}
	for i, d := range attempts {
		// Measured here, an attempt starts once its request has arrived,
		// after the client's dial and send, which a loaded machine slows;
		// and a cut-off may be noticed late, by any amount. Half the
		// timeout still tells the attempt timeout from a shorter one.
		if d < attemptTimeout/2 {
			t.Errorf("attempt %d was cut off after %v, want %v", i+1, d.Round(time.Millisecond), attemptTimeout)
		}
	}
	t.Logf("504 after %v, attempts %v, the template's timeout %v", took.Round(time.Millisecond), attempts, cfg.Timeout)
}

// fleetSize is the largest fleet the slave list is sized for.
const fleetSize = 100_000

// TestBoundsHoldOnAFleetOf100000Slaves lists fleetSize slaves through the
// real SlavesFunction binary at the template's memory size, with and
// without gzip: the whole fleet either way, streamed, and never more memory
// than the function has. The slaves table
// is an in-memory one that pages a parallel Scan as DynamoDB does
// (fleettable): the emulator takes seconds per page on a table this large.
func TestBoundsHoldOnAFleetOf100000Slaves(t *testing.T) {
	ctx := context.Background()
	local, err := stack.Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	table, err := fleettable.New(fleettable.Items(fleetSize, 100), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The list's cursor reads the change feed, which the emulator holds.
	if _, err := table.Beside(local.Moto.Endpoint); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(table)
	defer srv.Close()
	cfg, err := local.Template.FunctionConfig("SlavesFunction")
	if err != nil {
		t.Fatal(err)
	}
	fn := lambdarun.Function{Binary: build(t, local.Root, "slaves"), Name: "SlavesFunction", MemorySize: cfg.MemorySize,
		Env: functionEnv(t, local, "SlavesFunction"), Timeout: patience, Logs: io.Discard}
	fn.Env["AWS_ENDPOINT_URL_DYNAMODB"] = srv.URL
	doc := apidoc.MustLoad(t)
	for _, gz := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip %v", gz), func(t *testing.T) {
			a := invokeRoute(t, fn, doc, "GET", "/api/slaves", "", gz)
			// 1.5 MB gzipped, 36 MB of JSON without: streamed, all of
			// it arrives either way.
			a.wantArray(t, fleetSize)
			var ids []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(a.body, &ids); err != nil {
				t.Fatal(err)
			}
			for i, s := range ids {
				if want := fmt.Sprintf("fleet-%06d", i); s.ID != want {
					t.Fatalf("got %s at %d, want %s: every slave once, in id order", s.ID, i, want)
				}
			}
		})
	}
}

// storeWorstSlaves stores, through the same handlers the functions use, a
// slave with a long history of the longest messages (accepted as they are
// under the limit, refused one character longer), slaves with large
// attributes, and slaves whose expiring changes hold the longest message and
// actionId a request can carry. It returns the slave with the history and
// the ones with large attributes.
func storeWorstSlaves(t *testing.T, store *dynamo.Store) (string, []string) {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	report := func(machines []string) {
		t.Helper()
		detail := `{"complete":false,"machines":[` + strings.Join(machines, ",") + `]}`
		if res, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(ctx, json.RawMessage(detail)); err != nil || res.Failed > 0 {
			t.Fatalf("report: %+v, %v", res, err)
		}
	}
	h := web.Wrap(slaves.New(store, access.Policy{Mode: access.ModeNone}, machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}),
		web.Options{Logger: quiet})
	post := func(path, key, body string) int {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	changed := "bounds-history-S1"
	report([]string{fmt.Sprintf(`{"id":%q,"host":"node-h"}`, changed)})
	longest := strings.Repeat("<", slaves.MaxMessage)
	for i := range historyChanges {
		action := []string{"freeze", "activate"}[i%2]
		body, _ := json.Marshal(map[string]string{"message": longest})
		if code := post("/api/slaves/slave/"+changed+"/"+action, fmt.Sprint("h", i), string(body)); code != 200 {
			t.Fatalf("%s with a message of %d '<': got %d, want 200", action, slaves.MaxMessage, code)
		}
	}
	tooLong, _ := json.Marshal(map[string]string{"message": longest + "<"})
	if code := post("/api/slaves/slave/"+changed+"/freeze", "h-too-long", string(tooLong)); code != 400 {
		t.Fatalf("freeze with a message of %d characters: got %d, want 400", slaves.MaxMessage+1, code)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var big []string
	var machines []string
	for i := range bigSlaves {
		id := fmt.Sprintf("bounds-big-S%03d", i)
		attrs := map[string]string{}
		for j := range 6 {
			attrs[fmt.Sprint("a", j)] = halfEscaped(rng, 10_000)
		}
		m, _ := json.Marshal(map[string]any{"id": id, "host": "node-" + id, "rackId": "us-east-1a", "attributes": attrs})
		machines = append(machines, string(m))
		big = append(big, id)
	}
	report(machines)

	machines = nil
	for i := range bigExpiring {
		machines = append(machines, fmt.Sprintf(`{"id":"bounds-expiring-S%d","host":"node-e%d"}`, i, i))
	}
	report(machines)
	for i := range bigExpiring {
		// The longest message and actionId accepted, in '<' that JSON
		// writes as 6 bytes.
		actionID := strconv.Itoa(i) + strings.Repeat("<", slaves.MaxActionID)
		body, _ := json.Marshal(map[string]any{"message": longest, "durationMillis": 3_600_000, "revertToState": "ACTIVE",
			"actionId": actionID[:slaves.MaxActionID]})
		body = bytes.ReplaceAll(body, []byte(`\u003c`), []byte("<"))
		if code := post(fmt.Sprintf("/api/slaves/slave/bounds-expiring-S%d/freeze", i), fmt.Sprint("e", i), string(body)); code != 200 {
			t.Fatalf("expiring freeze with a body of %d bytes: got %d, want 200", len(body), code)
		}
	}
	return changed, big
}

// halfEscaped returns n random characters, half of them '<': text that
// gzip compresses well but not entirely, and that JSON makes 3.5 times
// larger.
func halfEscaped(rng *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:;!?"
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(2) == 0 {
			b[i] = '<'
		} else {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
	}
	return string(b)
}

// storeLongLogs uploads the logs of boundsTask to bucket, with keys of
// about 1,000 bytes in the default LOG_KEY_FORMAT, and returns their keys.
// The keys are mostly '<', which JSON writes as 6 bytes and a URL as 3;
// they extend the uploader's key after its file name, so they are still the
// task's logs.
func storeLongLogs(client *s3.Client, bucket string) ([]string, error) {
	format, err := logkey.ParseFormat(logkey.DefaultFormat)
	if err != nil {
		return nil, err
	}
	task, err := logkey.ParseTaskID(boundsTask)
	if err != nil {
		return nil, err
	}
	keys := make([]string, longLogs)
	for i := range keys {
		at := time.UnixMilli(task.StartedAt).Add(time.Duration(i) * time.Minute)
		// MinIO keeps a key's segments as file names, of at most 255 bytes.
		long := strings.Repeat(strings.Repeat("<", 150)+"/", 5) + strings.Repeat("<", 150) + ".log"
		keys[i] = format.Key(logkey.File{Task: task, Filename: "/", Index: i, Modified: at}) + long
	}
	var wg sync.WaitGroup
	errs := make([]error, len(keys))
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				_, errs[i] = client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[i]),
					Body: strings.NewReader("log\n")})
			}
		})
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()
	return keys, errors.Join(errs...)
}

// answer is an API Gateway answer as a client gets it: the body base64-
// decoded and decompressed.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// invokeRoute sends one request through the function's real binary as an
// API Gateway REST API event, and checks what every answer must be:
// delivered (not Lambda's Function.ResponseSizeTooLarge), JSON, and as
// openapi.yaml describes it.
func invokeRoute(t *testing.T, fn lambdarun.Function, doc *apidoc.Doc, method, target, body string, gz bool) answer {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string][]string{"Accept": {"application/json"}}
	if gz {
		headers["Accept-Encoding"] = []string{"gzip, deflate, br"}
	}
	if body != "" {
		headers["Content-Type"] = []string{"application/json"}
	}
	event, _ := json.Marshal(map[string]any{
		"httpMethod": method, "path": u.EscapedPath(), "multiValueQueryStringParameters": u.Query(),
		"multiValueHeaders": headers, "body": body, "isBase64Encoded": false,
		"requestContext": map[string]any{"requestId": fmt.Sprintf("bounds-%d", time.Now().UnixNano()), "domainName": "api.example.com",
			"identity": map[string]any{"sourceIp": "203.0.113.7"}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), patience+time.Minute)
	defer cancel()
	res, err := fn.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("%s %s: got %v, want an answer", method, target, err)
	}
	if !res.Streamed && len(res.Response) > lambdarun.MaxResponseSize {
		t.Fatalf("%s %s: got a response of %d bytes, want at most %d", method, target, len(res.Response), lambdarun.MaxResponseSize)
	}
	var envelope struct {
		StatusCode        int                 `json:"statusCode"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		Body              string              `json:"body"`
		Base64            bool                `json:"isBase64Encoded"`
	}
	if err := json.Unmarshal(res.Response, &envelope); err != nil {
		t.Fatalf("%s %s: got %.200s, want an API Gateway response: %v", method, target, res.Response, err)
	}
	a := answer{status: envelope.StatusCode, header: http.Header(envelope.MultiValueHeaders), body: []byte(envelope.Body)}
	if envelope.Base64 {
		if a.body, err = base64.StdEncoding.DecodeString(envelope.Body); err != nil {
			t.Fatalf("%s %s: got a body that is not base64: %v", method, target, err)
		}
	}
	wire := a.body
	if a.header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(a.body))
		if err == nil {
			a.body, err = io.ReadAll(zr)
		}
		if err != nil {
			t.Fatalf("%s %s: got a gzip body that does not decompress: %v", method, target, err)
		}
	}
	if !json.Valid(a.body) {
		t.Fatalf("%s %s: got %d %.200q, want JSON", method, target, a.status, a.body)
	}
	req, _, err := edge.Request(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Check(req, a.status, a.header, wire); err != nil {
		t.Errorf("%s %s: answer does not match %s: %v", method, target, apidoc.File, err)
	}
	t.Logf("%s %s, gzip %v: %d, %d bytes of response; %s", method, target, gz, a.status, len(res.Response), res.Report(fn.MemorySize))
	return a
}

func (a answer) wantStatus(t *testing.T, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("got %d %.200s, want %d", a.status, a.body, status)
	}
}

// wantArray checks that the answer is the JSON array of all total elements.
func (a answer) wantArray(t *testing.T, total int) {
	t.Helper()
	a.wantStatus(t, 200)
	var elems []json.RawMessage
	if err := json.Unmarshal(a.body, &elems); err != nil {
		t.Fatalf("got %.200s, want a JSON array", a.body)
	}
	if len(elems) != total {
		t.Errorf("got %d elements, want all %d", len(elems), total)
	}
}
