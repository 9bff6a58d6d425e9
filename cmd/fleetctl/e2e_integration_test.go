//go:build integration

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output of this run")

// The built binary and the stack it runs against; the servers are shared by
// the tests, one per kind of authentication.
var (
	binary  string
	local   *apitest.Stack
	servers = map[apitest.Auth]*httptest.Server{}
)

// TestMain builds fleetctl, starts moto and MinIO and serves the API over
// them three times: without auth (as make run), behind a bearer-token
// authorizer, and behind SigV4 verification. The tests run fleetctl as a
// separate process, as a user would.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(e2eMain(m))
}

func e2eMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fleetctl-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "fleetctl")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fleetctl: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	local, err = apitest.Up(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer local.Close()
	rep := &reporter{}
	for _, auth := range []apitest.Auth{apitest.None, apitest.Tokens, apitest.SigV4} {
		srv, err := local.Serve(rep, auth)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.Close()
		servers[auth] = srv
	}
	code := m.Run()
	if len(rep.errs) > 0 {
		fmt.Fprintf(os.Stderr, "answers that do not match openapi.yaml:\n%s\n", strings.Join(rep.errs, "\n"))
		code = 1
	}
	return code
}

// reporter collects the handlers' answers that do not match openapi.yaml;
// the servers outlive any one test.
type reporter struct{ errs []string }

func (r *reporter) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// result is one run of fleetctl.
type result struct {
	stdout, stderr string
	code           int
}

// runLimit bounds one run of fleetctl in these tests.
const runLimit = 5 * time.Minute

// fleetctl runs the binary against the server of auth with env added to
// a clean environment (its own HOME, config and cache, UTC). A run that
// outlasts runLimit is killed, and answers exit code -1: a command that
// should have ended (a watch given a bad pattern) fails its test rather
// than hanging the suite.
func fleetctl(t *testing.T, auth apitest.Auth, env []string, args ...string) result {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TZ=UTC", "PATH=" + os.Getenv("PATH"), "FLEETCTL_ENDPOINT=" + servers[auth].URL,
	}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout.String(), stderr.String(), code}
}

func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("got exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// wantError checks a failure: the exit code, and one line on stderr that
// holds every part of want (after the notices of retries, if any).
func (r result) wantError(t *testing.T, code int, want ...string) {
	t.Helper()
	r.want(t, code)
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	for len(lines) > 1 && strings.HasPrefix(lines[0], "fleetctl: retrying in ") {
		lines = lines[1:]
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "fleetctl: ") {
		t.Errorf("got stderr %q, want one line starting fleetctl: ", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("got stderr %q, want it to say %q", r.stderr, w)
		}
	}
}

var timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)

// golden compares got, its timestamps replaced by a placeholder of the
// same width (so alignment is still checked), with testdata/<name>.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = timestamps.ReplaceAllString(got, "YYYY-MM-DD hh:mm:ss")
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", file, got, want)
	}
}

// machines reports machines up, as the scheduler does.
func machines(t *testing.T, ids ...string) {
	t.Helper()
	var ms []apitest.Machine
	for i, id := range ids {
		ms = append(ms, apitest.Machine{ID: id, Host: fmt.Sprintf("%s.example.com", id), Rack: []string{"us-east-1a", "us-east-1b"}[i%2],
			Attributes: map[string]string{"instance_type": "m5.4xlarge"}, Resources: map[string]any{"cpus": 16, "mem": 63000}, RunningTasks: 1})
	}
	if err := local.Report(context.Background(), time.Time{}, ms...); err != nil {
		t.Fatal(err)
	}
}

func TestTableFormatsMatchTheirGoldenOutput(t *testing.T) {
	machines(t, "gold-a1", "gold-a2", "gold-b1")
	fleetctl(t, apitest.None, nil, "freeze", "gold-a2", "-m", "kernel upgrade on gold-a2.example.com, then a reboot and a disk check that takes a while", "--for", "2h").want(t, 0)
	fleetctl(t, apitest.None, nil, "decommission", "gold-b1", "-m", "retiring").want(t, 0)

	golden(t, "list", fleetctl(t, apitest.None, nil, "list", "gold-*").want(t, 0).stdout)
	golden(t, "list-wide", fleetctl(t, apitest.None, nil, "list", "gold-*", "-o", "wide").want(t, 0).stdout)
	golden(t, "list-frozen-names", fleetctl(t, apitest.None, nil, "list", "--state", "frozen", "gold-*", "-o", "name").want(t, 0).stdout)
	golden(t, "show", fleetctl(t, apitest.None, nil, "show", "gold-a2").want(t, 0).stdout)

	var listed []client.Slave
	out := fleetctl(t, apitest.None, nil, "list", "gold-*", "-o", "json").want(t, 0).stdout
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 3 || listed[1].CurrentState.State != client.Frozen {
		t.Errorf("got %s (%v), want the 3 gold machines as JSON, gold-a2 FROZEN", out, err)
	}
	exp := fleetctl(t, apitest.None, nil, "expiring").want(t, 0).stdout
	if !regexp.MustCompile(`(?m)^gold-a2\s+ACTIVE\s+\d{4}-.*kernel upgrade`).MatchString(exp) {
		t.Errorf("got expiring\n%s\nwant gold-a2 reverting to ACTIVE", exp)
	}
}

func TestChangesOneResultLinePerMachine(t *testing.T) {
	machines(t, "chg-1", "chg-2", "chg-3")
	none := apitest.None

	// Several machines without a terminal to confirm on need --yes.
	fleetctl(t, none, nil, "freeze", "chg-1", "chg-2").wantError(t, exitUsage, "--yes")
	if got := fleetctl(t, none, nil, "list", "chg-*", "--state", "frozen", "-o", "name").want(t, 0).stdout; got != "" {
		t.Fatalf("got frozen %q, want nothing changed without --yes", got)
	}

	dry := fleetctl(t, none, nil, "freeze", "chg-1", "chg-2", "--for", "90m", "--dry-run").want(t, 0)
	if dry.stdout != "chg-1: would freeze (ACTIVE → FROZEN, reverting to ACTIVE after 1h30m0s)\nchg-2: would freeze (ACTIVE → FROZEN, reverting to ACTIVE after 1h30m0s)\n" {
		t.Errorf("got dry run %q", dry.stdout)
	}

	r := fleetctl(t, none, nil, "freeze", "chg-1", "chg-nope", "chg-2", "-m", "maintenance", "--yes")
	r.want(t, exitNotFound)
	if r.stdout != "chg-1: FROZEN\nchg-2: FROZEN\n" {
		t.Errorf("got stdout %q, want one line per frozen machine", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "fleetctl: chg-nope: not found (404): ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("got stderr %q, want one not-found line", r.stderr)
	}
	fleetctl(t, none, nil, "freeze", "chg-1").wantError(t, exitRefused, "refused (409)", "FAILURE_ALREADY_AT_STATE")
	fleetctl(t, none, nil, "freeze", "chg-1", "--dry-run").wantError(t, exitRefused, "FAILURE_ALREADY_AT_STATE")

	fleetctl(t, none, nil, "activate", "chg-1", "--for", "2h", "-m", "try it").want(t, 0)
	if got := fleetctl(t, none, nil, "expiring", "-o", "json").want(t, 0).stdout; !strings.Contains(got, `"machineId": "chg-1"`) {
		t.Errorf("got %s, want chg-1's expiring change", got)
	}
	fleetctl(t, none, nil, "make-permanent", "chg-1").want(t, 0)
	if got := fleetctl(t, none, nil, "expiring", "-o", "json").want(t, 0).stdout; strings.Contains(got, `"machineId": "chg-1"`) {
		t.Errorf("got %s, want chg-1's expiring change gone", got)
	}
	hist := fleetctl(t, none, nil, "show", "chg-1", "-o", "json").want(t, 0).stdout
	var shown struct {
		History []client.StateUpdate `json:"history"`
	}
	if err := json.Unmarshal([]byte(hist), &shown); err != nil || len(shown.History) != 3 || shown.History[0].Message != "try it" {
		t.Errorf("got %s, want ACTIVE (try it), FROZEN, ACTIVE", hist)
	}

	fleetctl(t, none, nil, "decommission", "chg-3").want(t, 0)
	fleetctl(t, none, nil, "delete", "chg-3").want(t, 0)
	fleetctl(t, none, nil, "show", "chg-3").wantError(t, exitNotFound, "not found (404)")
	fleetctl(t, none, nil, "delete", "chg-3").wantError(t, exitNotFound, "Couldn't find dead Slave with id chg-3")

	if err := local.Report(context.Background(), time.Time{}, apitest.Machine{ID: "chg-2", Host: "h", Rack: "r", Lost: true}); err != nil {
		t.Fatal(err)
	}
	fleetctl(t, none, nil, "purge-dead").wantError(t, exitUsage, "--yes")
	fleetctl(t, none, nil, "purge-dead", "--yes").want(t, 0)
	fleetctl(t, none, nil, "show", "chg-2").want(t, exitNotFound)
}

func TestBadInputGivesOneLineAndItsExitCode(t *testing.T) {
	machines(t, "bad-1")
	for _, tc := range []struct {
		name string
		auth apitest.Auth
		env  []string
		args []string
		code int
		want []string
	}{
		{"an unknown state", apitest.None, nil, []string{"list", "--state", "sleepy"}, exitUsage, []string{`unknown state "sleepy"`}},
		{"a bad duration", apitest.None, nil, []string{"freeze", "bad-1", "--for", "2 hours"}, exitUsage, []string{`invalid duration "2 hours"`}},
		{"a bad --since", apitest.None, nil, []string{"logs", "ls", "--request", "r", "--since", "last week"}, exitUsage, []string{`--since "last week"`}},
		{"an unknown flag", apitest.None, nil, []string{"list", "--colour"}, exitUsage, []string{"unknown flag: --colour"}},
		{"a bad pattern to list", apitest.None, nil, []string{"list", "node-["}, exitUsage, []string{`pattern "node-[": syntax error in pattern`}},
		{"a bad pattern to watch", apitest.None, nil, []string{"watch", "node-["}, exitUsage, []string{`pattern "node-[": syntax error in pattern`}},
		{"a missing id", apitest.None, nil, []string{"show"}, exitUsage, []string{"accepts 1 arg"}},
		{"an unreachable endpoint", apitest.None, []string{"FLEETCTL_ENDPOINT=http://127.0.0.1:9", "FLEETCTL_TIMEOUT=2s"}, []string{"list"}, exitUnavailable, []string{"unavailable", "127.0.0.1:9"}},
		{"no credentials (401)", apitest.Tokens, nil, []string{"list"}, exitAuth, []string{"not authenticated (401): authentication required"}},
		{"a reader changing (403)", apitest.Tokens, []string{"FLEETCTL_AUTH=bearer", "FLEETCTL_TOKEN=" + apitest.ReaderToken}, []string{"freeze", "bad-1"}, exitAuth, []string{"not allowed (403)", "admin groups"}},
		{"a refused change (409)", apitest.None, nil, []string{"activate", "bad-1"}, exitRefused, []string{"refused (409)", "FAILURE_ALREADY_AT_STATE"}},
		{"an invalid change (400)", apitest.None, nil, []string{"freeze", "bad-1", "--for", "2h", "--revert", "dead"}, exitRefused, []string{"refused (400)", "DEAD"}},
		{"a malformed task id (400)", apitest.None, nil, []string{"logs", "ls", "--task", "nope"}, exitRefused, []string{"refused (400)", "not a valid task id"}},
		{"an unknown machine (404)", apitest.None, nil, []string{"show", "bad-none"}, exitNotFound, []string{"not found (404)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleetctl(t, tc.auth, tc.env, tc.args...).wantError(t, tc.code, tc.want...)
		})
	}
	// The reader may read, with a token from a profile.
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	profiles := fmt.Sprintf("default: team\nprofiles:\n  team:\n    endpoint: %s\n    auth: bearer\n    token: %s\n    headers:\n      X-Team: ops\n", servers[apitest.Tokens].URL, apitest.ReaderToken)
	if err := os.WriteFile(cfg, []byte(profiles), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"FLEETCTL_CONFIG=" + cfg, "FLEETCTL_ENDPOINT="}
	fleetctl(t, apitest.Tokens, env, "show", "bad-1").want(t, 0)
	shown := fleetctl(t, apitest.Tokens, env, "config").want(t, 0).stdout
	for _, want := range []string{`profile +team +config file default`, `endpoint +` + regexp.QuoteMeta(servers[apitest.Tokens].URL) + ` +profile team`,
		`auth +bearer +profile team`, `headers +X-Team: ops`, `token +read… `} {
		if !regexp.MustCompile(want).MatchString(shown) {
			t.Errorf("got config\n%s\nwant it to hold %q", shown, want)
		}
	}
	if strings.Contains(shown, apitest.ReaderToken) {
		t.Errorf("got config\n%s\nwith the whole token", shown)
	}
	fleetctl(t, apitest.Tokens, append(env, "FLEETCTL_PROFILE=prod"), "list").wantError(t, exitUsage, `no profile "prod"`)
}

func TestSigV4SigningPassesTheVerifier(t *testing.T) {
	machines(t, "sig-1")
	creds := []string{"FLEETCTL_AUTH=sigv4", "FLEETCTL_REGION=" + apitest.SigV4Region,
		"AWS_ACCESS_KEY_ID=" + apitest.SigV4AccessKey, "AWS_EC2_METADATA_DISABLED=true"}
	r := fleetctl(t, apitest.SigV4, append(creds, "AWS_SECRET_ACCESS_KEY="+apitest.SigV4SecretKey), "freeze", "sig-1", "-m", "signed change")
	r.want(t, 0)
	fleetctl(t, apitest.SigV4, append(creds, "AWS_SECRET_ACCESS_KEY="+apitest.SigV4SecretKey), "show", "sig-1").want(t, 0)
	fleetctl(t, apitest.SigV4, append(creds, "AWS_SECRET_ACCESS_KEY=wrong"), "list").wantError(t, exitAuth, "403", "signature")
	fleetctl(t, apitest.SigV4, nil, "list").wantError(t, exitAuth, "403")
}

func TestEveryCommandHasHelpWithExamplesAndCompletionWorks(t *testing.T) {
	for _, c := range [][]string{{"list"}, {"show"}, {"freeze"}, {"decommission"}, {"activate"}, {"expiring"}, {"make-permanent"},
		{"watch"}, {"delete"}, {"purge-dead"}, {"diff"}, {"config"}, {"logs"}, {"logs", "ls"}, {"logs", "fetch"}, {"logs", "cat"}, {"logs", "grep"},
		{"version"}, {"help"}, {"completion"}, {"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}, {"completion", "powershell"}} {
		out := fleetctl(t, apitest.None, nil, append(c, "--help")...).want(t, 0).stdout
		if !strings.Contains(out, "Examples:\n  fleetctl ") {
			t.Errorf("fleetctl %s --help has no examples:\n%s", strings.Join(c, " "), out)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if out := fleetctl(t, apitest.None, nil, "completion", shell).want(t, 0).stdout; !strings.Contains(out, "fleetctl") {
			t.Errorf("completion %s: got %.100q", shell, out)
		}
	}
	got := fleetctl(t, apitest.None, nil, "__complete", "list", "--state", "").want(t, 0).stdout
	if !strings.Contains(got, "starting-decommission\n") {
		t.Errorf("got state completions %q", got)
	}
}

// logSet puts logs of one request in the last days: two tasks of deploy
// d1 and one of d2, plain and gzipped, and returns their bodies by key and
// the task ids.
func logSet(t *testing.T, request string, size int) (map[string]string, []string) {
	t.Helper()
	now := time.Now().UTC()
	bodies := map[string]string{}
	var tasks []string
	for i, deploy := range []string{"d1", "d1", "d2"} {
		task := fmt.Sprintf("%s-%s-%d-%d-node%d-us_east_1a", request, deploy, now.Add(-72*time.Hour).UnixMilli(), i, i)
		tasks = append(tasks, task)
		for j, name := range []string{"stdout", "stderr.gz"} {
			var text strings.Builder
			for n := 0; text.Len() < size || n < 3; n++ {
				level := []string{"INFO", "WARN", "ERROR"}[n%3]
				fmt.Fprintf(&text, "%s task %d file %d line %d: request handled in %d ms\n", level, i, j, n+1, n*7%500)
			}
			body := []byte(text.String())
			if strings.HasSuffix(name, ".gz") {
				var gz bytes.Buffer
				zw := gzip.NewWriter(&gz)
				zw.Write(body)
				zw.Close()
				body = gz.Bytes()
			}
			key, err := local.PutLog(context.Background(), apitest.Log{TaskID: task, Filename: name, Index: j,
				Modified: now.Add(-time.Duration(10*i+j) * time.Hour), Body: body})
			if err != nil {
				t.Fatal(err)
			}
			bodies[key] = text.String()
		}
	}
	return bodies, tasks
}

func TestLogsListFetchCatGrep(t *testing.T) {
	bodies, tasks := logSet(t, "e2elogs", 0)
	none := apitest.None
	cache := t.TempDir()
	env := []string{"FLEETCTL_CACHE_DIR=" + cache}

	var listed []client.Log
	out := fleetctl(t, none, env, "logs", "ls", "--request", "e2elogs", "--since", "7d", "-o", "json").want(t, 0).stdout
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 6 {
		t.Fatalf("got %s (%v), want 6 logs", out, err)
	}
	for i := 1; i < len(listed); i++ {
		if listed[i].LastModified < listed[i-1].LastModified {
			t.Errorf("got %s before %s, want oldest first", listed[i-1].Key, listed[i].Key)
		}
	}
	table := fleetctl(t, none, env, "logs", "ls", "--request", "e2elogs", "--deploy", "d2", "--since", time.Now().Add(-7*24*time.Hour).Format("2006-01-02")).want(t, 0).stdout
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "MODIFIED") {
		t.Errorf("got\n%s\nwant a header and deploy d2's 2 logs", table)
	}
	var ofTask []client.Log
	if err := json.Unmarshal([]byte(fleetctl(t, none, env, "logs", "ls", "--task", tasks[2], "-o", "json").want(t, 0).stdout), &ofTask); err != nil || len(ofTask) != 2 {
		t.Errorf("got %v (%v), want task %s's 2 logs", ofTask, err, tasks[2])
	}
	if got := fleetctl(t, none, env, "logs", "ls", "--request", "e2elogs", "--since", "2020-01-01", "--until", "2020-02-01").want(t, 0).stdout; strings.Count(got, "\n") != 1 {
		t.Errorf("got\n%s\nwant only the header: no log is of January 2020", got)
	}

	fleetctl(t, none, env, "logs", "fetch", "--request", "e2elogs", "--since", "7d", "-j", "3").want(t, 0)
	for key, body := range bodies {
		path := filepath.Join(cache, strings.ReplaceAll(strings.TrimPrefix(servers[none].URL, "http://"), ":", "_"), key)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(key, ".gz") && string(raw) != body {
			t.Errorf("%s: got %q, want %q", key, raw, body)
		}
	}

	cat := fleetctl(t, none, env, "logs", "cat", "--request", "e2elogs", "--since", "7d").want(t, 0).stdout
	var want strings.Builder
	for _, l := range listed {
		want.WriteString(bodies[l.Key])
	}
	if cat != want.String() {
		t.Errorf("got cat\n%s\nwant every log gunzipped, oldest first\n%s", cat, want.String())
	}

	grep := fleetctl(t, none, env, "logs", "grep", "--request", "e2elogs", "--since", "7d", "error.*file 1").want(t, exitNoMatch)
	if grep.stdout != "" {
		t.Errorf("got %q for a case-sensitive miss", grep.stdout)
	}
	grep = fleetctl(t, none, env, "logs", "grep", "--request", "e2elogs", "--since", "7d", "-i", "error.*file 1")
	grep.want(t, 0)
	var wantGrep strings.Builder
	for _, l := range listed {
		if strings.HasSuffix(l.Key, ".gz") {
			fmt.Fprintf(&wantGrep, "%s:3:%s\n", l.Key, strings.Split(bodies[l.Key], "\n")[2])
		}
	}
	if grep.stdout != wantGrep.String() {
		t.Errorf("got grep\n%s\nwant\n%s", grep.stdout, wantGrep.String())
	}
	count := fleetctl(t, none, env, "logs", "grep", "--request", "e2elogs", "--since", "7d", "-c", "-v", "INFO").want(t, 0).stdout
	if strings.Count(count, ":2\n") != 6 {
		t.Errorf("got -c -v\n%s\nwant key:2 for each of the 6 logs", count)
	}
	files := fleetctl(t, none, env, "logs", "grep", "--request", "e2elogs", "--deploy", "d2", "--since", "7d", "-l", "-F", "task 2 file 0").want(t, 0).stdout
	if lines := strings.Split(strings.TrimSpace(files), "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], "stdout") {
		t.Errorf("got -l %q, want the one stdout log of task 2", files)
	}
	// Streamed, without a cache.
	streamed := fleetctl(t, none, []string{"FLEETCTL_CACHE_DIR=" + t.TempDir()}, "logs", "grep", "--request", "e2elogs", "--since", "7d", "-i", "error.*file 1").want(t, 0).stdout
	if streamed != wantGrep.String() {
		t.Errorf("got streamed grep\n%s\nwant\n%s", streamed, wantGrep.String())
	}
}

// TestAnInterruptedFetchResumes leaves the cache as a fetch stopped midway
// leaves it: one log complete, one half downloaded. Their bytes are marked
// (same sizes, other content), so the result shows what was downloaded
// again: nothing of the complete log, only the rest of the partial one.
// Then a real fetch is killed midway and run again.
func TestAnInterruptedFetchResumes(t *testing.T) {
	logSet(t, "e2eresume", 256<<10)
	none := apitest.None
	cache := t.TempDir()
	env := []string{"FLEETCTL_CACHE_DIR=" + cache}
	sel := []string{"--request", "e2eresume", "--since", "7d"}
	var listed []client.Log
	if err := json.Unmarshal([]byte(fleetctl(t, none, env, append([]string{"logs", "ls", "--json"}, sel...)...).want(t, 0).stdout), &listed); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, strings.ReplaceAll(strings.TrimPrefix(servers[none].URL, "http://"), ":", "_"))
	done, half := listed[0], listed[1]
	raw := func(l client.Log) []byte {
		out, err := local.GetLog(context.Background(), l.Key)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	marked := bytes.Repeat([]byte("#"), int(done.Size))
	write := func(path string, data []byte, mtime time.Time) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if !mtime.IsZero() {
			os.Chtimes(path, mtime, mtime)
		}
	}
	write(filepath.Join(dir, done.Key), marked, time.UnixMilli(done.LastModified))
	halfBytes := raw(half)
	n := len(halfBytes) / 2
	write(filepath.Join(dir, half.Key)+".part", bytes.Repeat([]byte("#"), n), time.Time{})

	fleetctl(t, none, env, append([]string{"logs", "fetch", "-j", "2"}, sel...)...).want(t, 0)
	if got, _ := os.ReadFile(filepath.Join(dir, done.Key)); !bytes.Equal(got, marked) {
		t.Errorf("%s was downloaded again, want it kept as complete", done.Key)
	}
	got, _ := os.ReadFile(filepath.Join(dir, half.Key))
	if len(got) != len(halfBytes) || !bytes.Equal(got[:n], bytes.Repeat([]byte("#"), n)) || !bytes.Equal(got[n:], halfBytes[n:]) {
		t.Errorf("%s: got %d bytes, want the kept first %d and the rest downloaded (%d in all)", half.Key, len(got), n, len(halfBytes))
	}
	if _, err := os.Stat(filepath.Join(dir, half.Key) + ".part"); !os.IsNotExist(err) {
		t.Errorf("got the .part file left (%v)", err)
	}

	// A real interruption: kill a fetch as soon as it has written, then
	// fetch again and compare every log.
	fresh := t.TempDir()
	cmd := exec.Command(binary, append([]string{"logs", "fetch", "-j", "1"}, sel...)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "FLEETCTL_ENDPOINT=" + servers[none].URL, "FLEETCTL_CACHE_DIR=" + fresh}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if matches, _ := filepath.Glob(filepath.Join(fresh, "*", "e2eresume", "*", "*", "*")); len(matches) > 0 {
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	fleetctl(t, none, []string{"FLEETCTL_CACHE_DIR=" + fresh}, append([]string{"logs", "fetch", "-j", "2"}, sel...)...).want(t, 0)
	freshDir := filepath.Join(fresh, strings.ReplaceAll(strings.TrimPrefix(servers[none].URL, "http://"), ":", "_"))
	for _, l := range listed {
		got, err := os.ReadFile(filepath.Join(freshDir, l.Key))
		if err != nil || !bytes.Equal(got, raw(l)) {
			t.Errorf("%s: after the interrupted fetch and another: got %d bytes (%v), want the object", l.Key, len(got), err)
		}
	}
}

// completions runs fleetctl's hidden __complete, as the shell's completion
// script does on Tab, and returns the ids offered (descriptions dropped)
// and the directive line.
func completions(t *testing.T, env []string, line ...string) ([]string, string) {
	t.Helper()
	out := fleetctl(t, apitest.None, env, append([]string{"__complete"}, line...)...).want(t, 0).stdout
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var ids []string
	for _, l := range lines[:len(lines)-1] {
		id, _, _ := strings.Cut(l, "\t")
		ids = append(ids, id)
	}
	return ids, lines[len(lines)-1]
}

func TestShellCompletionCompletesMachineIDsFromTheList(t *testing.T) {
	machines(t, "cmpl-a1", "cmpl-a2", "cmpl-b1")
	fleetctl(t, apitest.None, nil, "freeze", "cmpl-a2", "--for", "2h").want(t, 0)
	for _, tc := range []struct {
		name string
		line []string
		want []string
	}{
		{"show completes the ids starting with what is typed", []string{"show", "cmpl-a"}, []string{"cmpl-a1", "cmpl-a2"}},
		{"show takes one id, so a second is not completed", []string{"show", "cmpl-a1", "cmpl-"}, nil},
		{"freeze leaves out the ids already on the line", []string{"freeze", "cmpl-a1", "cmpl-"}, []string{"cmpl-a2", "cmpl-b1"}},
		{"decommission", []string{"decommission", "cmpl-b"}, []string{"cmpl-b1"}},
		{"activate", []string{"activate", "-m", "done", "cmpl-a"}, []string{"cmpl-a1", "cmpl-a2"}},
		{"wait", []string{"wait", "cmpl-b"}, []string{"cmpl-b1"}},
		{"delete", []string{"delete", "cmpl-b"}, []string{"cmpl-b1"}},
		{"make-permanent offers only the machines with an expiring change", []string{"make-permanent", "cmpl-"}, []string{"cmpl-a2"}},
		{"a prefix no machine has completes nothing", []string{"show", "cmpl-z"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, directive := completions(t, nil, tc.line...)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("__complete %s: got %q, want %q", strings.Join(tc.line, " "), ids, tc.want)
			}
			if directive != ":4" {
				t.Errorf("got directive %s, want :4 (no file names)", directive)
			}
		})
	}
	out := fleetctl(t, apitest.None, nil, "__complete", "show", "cmpl-a2").want(t, 0).stdout
	if out != "cmpl-a2\tFROZEN\n:4\n" {
		t.Errorf("got %q, want the id described by its state", out)
	}
	// The endpoint given on the line is the one asked.
	if ids, _ := completions(t, []string{"FLEETCTL_ENDPOINT=http://127.0.0.1:9"}, "--endpoint", servers[apitest.None].URL, "show", "cmpl-b"); !slices.Equal(ids, []string{"cmpl-b1"}) {
		t.Errorf("with --endpoint: got %q, want cmpl-b1", ids)
	}
}

// A Tab must never hang the shell: an endpoint that accepts connections
// and never answers, or refuses them, completes nothing, within the
// completion's own bound (2 s) rather than --timeout (30 s, retries
// included).
func TestShellCompletionOfASlowOrUnreachableEndpointCompletesNothingQuickly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered, until the test ends
		}
	}()
	for name, endpoint := range map[string]string{"silent": "http://" + ln.Addr().String(), "refusing": "http://127.0.0.1:9"} {
		t.Run(name, func(t *testing.T) {
			// --timeout set far beyond any machine's slowness: a
			// completion that outlasts half of it waited for --timeout,
			// not for its own 2 s.
			start := time.Now()
			ids, directive := completions(t, []string{"FLEETCTL_ENDPOINT=" + endpoint, "FLEETCTL_TIMEOUT=4m"}, "show", "")
			took := time.Since(start)
			if len(ids) != 0 || directive != ":4" {
				t.Errorf("got %q %s, want nothing completed", ids, directive)
			}
			if took > 2*time.Minute {
				t.Errorf("completion took %s, want it bounded by its 2 s, not by --timeout", took)
			}
		})
	}
}
