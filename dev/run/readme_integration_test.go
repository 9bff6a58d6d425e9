//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/stack"
)

// The README's tour and the guides of docs/ are run as a new user runs
// them: their ```sh blocks, top to bottom, file after file (walkthrough),
// with bash, against make run started the way the README says, from an
// ordinary AWS shell of another machine: a profile that does not exist
// here, config and credentials files that hold other profiles or none, no
// region, an endpoint variable. A README that rots fails here.
//
// How the README is read:
//
//   - Every ```sh block runs, in order, in one bash session (variables set in
//     one block are there in the next), under set -e -o pipefail, at the
//     repository's root, as a user runs it. It must leave the clone as it
//     found it: a file it writes there, or changes, is one a user would find
//     in git status, and fails the test (it is then removed); the README
//     writes into a temporary directory (mktemp -d) instead, which the test
//     keeps in its own (TMPDIR).
//   - A command whose first words are in skipped is not run: make run itself
//     (the test started it already, and it would not return), make events
//     (it runs until Ctrl-C; dev/run's events test covers what it shows), the test
//     suites, and what needs an AWS account, the SAM CLI, Docker or
//     LocalStack. Each skip is logged. go install installs into a directory
//     of the test's (GOBIN).
//   - localhost:3000 is the README's server: the test serves on a free port
//     and rewrites the address. The emulator runs on a free port too
//     (EMULATOR_ADDR), so that make invoke and make seed-logs find it.
//   - Every HTTP answer a command's curl gets must be under 400, unless the
//     command's comment starts with a status ("# 409 FAILURE_ALREADY_AT_STATE"),
//     which the command's last answer must then have. A comment holding a
//     JSON fragment ("# {"job":"expiry","due":1,...}", or "# newest first:
//     [{"state":"ACTIVE",...}, ...]") states fields the command's output
//     must have: an object's keys with those values, an array's first
//     elements in order; "..." stands for whatever else there is. Any other
//     comment is prose.
var skipped = []string{
	"make run", "make events", "make test", "make test-resilience", "make bench", "make lint", "make deploy", "make deploy-local",
	"sam", "samlocal", "aws", "awslocal", "docker", "localstack",
}

// command is one shell command of the walkthrough, continuation lines joined.
type command struct {
	where    string // file:line
	text     string
	status   int    // the status its last answer must have, 0 for any under 400
	fragment string // JSON its output must match, "" for none
}

func TestTheReadmeRunsTopToBottom(t *testing.T) {
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var commands []command
	for _, file := range walkthrough {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		commands = append(commands, readmeCommands(t, file, string(text))...)
	}
	var run []command
	for _, c := range commands {
		if skip := skippedBy(c.text); skip != "" {
			t.Logf("%s: not run (%s): %s", c.where, skip, c.text)
			continue
		}
		run = append(run, c)
	}
	if len(run) < 20 {
		t.Fatalf("got %d commands to run from the README, want its walkthrough", len(run))
	}

	port, emulator := freePort(t), "127.0.0.1:"+freePort(t)
	dir := t.TempDir()
	env := readmeEnv(t, dir, port, emulator)

	server := startMakeRun(t, root, env)

	script, err := os.Create(filepath.Join(dir, "readme.sh"))
	if err != nil {
		t.Fatal(err)
	}
	writeScript(script, run, port)
	script.Close()

	before := treeStatus(t, root)
	// A bound on a hung step, not a figure: the walkthrough builds and runs
	// functions, fleetctl and reports, and CI runs other packages' tests
	// beside it on two CPUs.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", script.Name())
	sh.Dir = root
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	sh.Env = append(env, "FLEET_DIR="+dir, "TMPDIR="+tmp)
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	shErr := sh.Run()
	if left := changedSince(before, treeStatus(t, root)); len(left) > 0 {
		t.Errorf("the README left the clone changed (git status --porcelain):\n%s\nits commands must write into a temporary directory (mktemp -d), not the clone", strings.Join(left, "\n"))
		removeUntracked(t, root, left)
	}

	// What each command did: "begin N", then "end N <statuses>".
	log, _ := os.ReadFile(filepath.Join(dir, "steps.log"))
	ended := map[int][]int{}
	last := -1
	for _, l := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "begin":
			last = n
		case "end":
			var statuses []int
			for _, s := range f[2:] {
				code, _ := strconv.Atoi(s)
				statuses = append(statuses, code)
			}
			ended[n] = statuses
		}
	}
	if shErr != nil {
		at := "before the first command"
		if last >= 0 {
			at = fmt.Sprintf("at %s: %s", run[last].where, run[last].text)
		}
		t.Fatalf("the README failed %s (%v)\n--- output\n%s\n--- make run\n%s", at, shErr, tail(out.String(), 6000), tail(server.output(), 3000))
	}
	for i, c := range run {
		statuses, ok := ended[i]
		if !ok {
			t.Errorf("%s: never ran: %s", c.where, c.text)
			continue
		}
		for j, s := range statuses {
			lastAnswer := j == len(statuses)-1
			switch {
			case lastAnswer && c.status != 0 && s != c.status:
				t.Errorf("%s: got %d, the text says %d: %s", c.where, s, c.status, c.text)
			case (!lastAnswer || c.status == 0) && (s == 0 || s >= 400):
				t.Errorf("%s: got an answer %d, which the text does not announce: %s", c.where, s, c.text)
			}
		}
		if c.status != 0 && len(statuses) == 0 {
			t.Errorf("%s: the text announces %d but the command made no HTTP request: %s", c.where, c.status, c.text)
		}
		if c.fragment != "" {
			got, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out-%d", i)))
			if err := matchFragment(c.fragment, got); err != nil {
				t.Errorf("%s: the output contradicts the text's %s: %v\n%s", c.where, c.fragment, err, tail(string(got), 2000))
			}
		}
	}
	if t.Failed() {
		t.Logf("--- output\n%s", tail(out.String(), 8000))
	}

	server.stop(t, emulator)
	logs := server.output()
	for _, want := range []string{
		"make run: building the local server",
		"local stack: starting moto on " + emulator,
		"local stack: region us-east-1 and the emulator's credentials, whatever the shell says (ignoring AWS_CONFIG_FILE, AWS_ENDPOINT_URL_DYNAMODB, AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE)",
		"local stack: creating the tables",
		"make run: moto on " + emulator + " holds the tables and log buckets in memory only",
		"make run: serving the API and the console on http://127.0.0.1:" + port,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("make run printed no %q:\n%s", want, tail(logs, 3000))
		}
	}
	if strings.Contains(logs, `"status":5`) {
		t.Errorf("make run logged a 5xx:\n%s", tail(logs, 3000))
	}
}

// readmeCommands returns the commands of the ```sh blocks of file, whose
// text is readme.
func readmeCommands(t *testing.T, file, readme string) []command {
	t.Helper()
	var out []command
	in := false
	var pending strings.Builder
	start := 0
	for i, line := range strings.Split(readme, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
			continue
		case in && strings.TrimSpace(line) == "```":
			in = false
			if pending.Len() > 0 {
				t.Fatalf("%s:%d: a block ends inside a continued command", file, i+1)
			}
			continue
		case !in:
			continue
		}
		if pending.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") && !strings.Contains(line, " #") {
			pending.WriteString(strings.TrimSuffix(line, "\\"))
			continue
		}
		pending.WriteString(line)
		text := pending.String()
		pending.Reset()
		code, comment := splitComment(text)
		if strings.TrimSpace(code) == "" {
			continue
		}
		c := command{where: fmt.Sprintf("%s:%d", file, start), text: strings.Join(strings.Fields(code), " ")}
		if m := regexp.MustCompile(`^([1-5]\d\d)\b`).FindStringSubmatch(comment); m != nil {
			c.status, _ = strconv.Atoi(m[1])
		} else if i := strings.IndexAny(comment, "{["); i >= 0 {
			c.fragment = comment[i:]
		}
		out = append(out, c)
	}
	return out
}

// splitComment splits a shell line at its comment: a # after a blank,
// outside quotes.
func splitComment(line string) (code, comment string) {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return line[:i], strings.TrimSpace(line[i+1:])
		}
		prev = r
	}
	return line, ""
}

func skippedBy(command string) string {
	words := strings.Fields(command)
	for _, s := range skipped {
		sw := strings.Fields(s)
		if len(words) >= len(sw) && strings.Join(words[:len(sw)], " ") == s {
			return "`" + s + "`"
		}
	}
	return ""
}

// writeScript writes the commands as one bash script that logs, around each
// command, when it began and the statuses of the HTTP answers its curl got,
// and keeps the output of a command whose comment states fields.
func writeScript(w *os.File, commands []command, port string) {
	b := bufio.NewWriter(w)
	defer b.Flush()
	fmt.Fprint(b, `set -e -o pipefail
steps="$FLEET_DIR/steps.log"
statuses="$FLEET_DIR/statuses"
# Every answer's status, from its headers (the last of a redirect chain).
curl() {
	local headers rc=0
	headers=$(mktemp)
	command curl -D "$headers" "$@" || rc=$?
	awk '/^HTTP\//{s=$2} END{print (s == "" ? 0 : s)}' "$headers" >>"$statuses"
	rm -f "$headers"
	return $rc
}
`)
	for i, c := range commands {
		text := strings.ReplaceAll(c.text, "localhost:3000", "localhost:"+port)
		fmt.Fprintf(b, "\n: >\"$statuses\"\necho 'begin %d' >>\"$steps\"\necho %s >&2\n", i, shellQuote(fmt.Sprintf("--- %s: %s", c.where, c.text)))
		if c.fragment != "" {
			fmt.Fprintf(b, "{ %s\n} >\"$FLEET_DIR/out-%d\"\ncat \"$FLEET_DIR/out-%d\"\n", text, i, i)
		} else {
			fmt.Fprintf(b, "%s\n", text)
		}
		fmt.Fprintf(b, "echo \"end %d $(tr '\\n' ' ' <\"$statuses\")\" >>\"$steps\"\n", i)
	}
}

// treeStatus returns git status --porcelain of the clone at root, every
// untracked file named: what a user would find changed after running the
// README.
func treeStatus(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// changedSince returns the entries of after that before did not have.
func changedSince(before, after []string) []string {
	var out []string
	for _, e := range after {
		if e != "" && !slices.Contains(before, e) {
			out = append(out, e)
		}
	}
	return out
}

// removeUntracked removes the untracked files among entries of git status
// --porcelain (changed tracked files are left for the user to see).
func removeUntracked(t *testing.T, root string, entries []string) {
	t.Helper()
	for _, e := range entries {
		if name, ok := strings.CutPrefix(e, "?? "); ok && !strings.HasPrefix(name, `"`) {
			if err := os.Remove(filepath.Join(root, name)); err != nil {
				t.Error(err)
			}
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// matchFragment checks got against a README fragment such as
// {"job":"expiry","due":1,...} or [{"state":"ACTIVE",...}, ...].
func matchFragment(fragment string, got []byte) error {
	clean := regexp.MustCompile(`,\s*\.\.\.`).ReplaceAllString(fragment, "")
	clean = strings.ReplaceAll(clean, "...", "")
	var want any
	if err := json.Unmarshal([]byte(clean), &want); err != nil {
		return fmt.Errorf("the README's fragment does not read as JSON (%s): %v", clean, err)
	}
	var have any
	if err := json.Unmarshal(got, &have); err != nil {
		return fmt.Errorf("the output is not JSON: %v", err)
	}
	return contains(have, want, "")
}

func contains(have, want any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, want an object", path, have)
		}
		for k, v := range w {
			if err := contains(h[k], v, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) < len(w) {
			return fmt.Errorf("%s: got %v, want an array of at least %d", path, have, len(w))
		}
		for i, v := range w {
			if err := contains(h[i], v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		if fmt.Sprint(have) != fmt.Sprint(want) {
			return fmt.Errorf("%s: got %v, want %v", path, have, want)
		}
	}
	return nil
}

// readmeEnv is the environment of a new user whose shell is set up for an
// AWS account on their own machine: AWS_PROFILE=prod, a profile that exists
// in no file here (the config file holds another, the credentials file does
// not exist), no region, and an endpoint variable. None of it may reach the
// local stack: boto3, under moto, fails on a profile it cannot find.
func readmeEnv(t *testing.T, dir, port, emulator string) []string {
	t.Helper()
	config := filepath.Join(dir, "aws-config")
	if err := os.WriteFile(config, []byte("[profile someone-else]\nregion = eu-west-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "FLEETCTL_") || strings.HasPrefix(k, "XDG_") || k == "PORT" || k == "EMULATOR_ADDR" || k == "GOBIN" || strings.HasPrefix(k, "MAKE") || k == "MFLAGS" {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PORT="+port,
		"EMULATOR_ADDR="+emulator,
		"AWS_PROFILE=prod",
		"AWS_CONFIG_FILE="+config,
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "no-such-aws-credentials"),
		"AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:9",
		"GOBIN="+filepath.Join(dir, "gobin"),
		// fleetctl's default endpoint is make run's usual port; its
		// profiles and log cache stay out of the user's own.
		"FLEETCTL_ENDPOINT=http://127.0.0.1:"+port,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		// Go's build cache is the user's own, not fleetctl's: under the
		// XDG_CACHE_HOME above, make run would compile the SDK anew (over
		// two minutes on a busy two-core machine) on every run of the test.
		"GOCACHE="+goEnv(t, "GOCACHE"),
	)
}

// goEnv is a setting of the go command as this process sees it.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// makeRun is make run in its own process group, as a terminal runs it, so
// that an interrupt reaches make and the server alike, as Ctrl-C does.
type makeRun struct {
	cmd  *exec.Cmd
	done chan error
	mu   sync.Mutex
	out  bytes.Buffer
}

func (m *makeRun) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.Write(p)
}

func (m *makeRun) output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

func startMakeRun(t *testing.T, root string, env []string) *makeRun {
	t.Helper()
	m := &makeRun{done: make(chan error, 1)}
	m.cmd = exec.Command("make", "--no-print-directory", "run")
	m.cmd.Dir = root
	m.cmd.Env = env
	m.cmd.Stdout, m.cmd.Stderr = m, m
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.done <- m.cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	})
	// A first build compiles the SDK; CI has compiled it for go vet already.
	deadline := time.After(3 * time.Minute)
	for !strings.Contains(m.output(), "make run: serving the API") {
		select {
		case err := <-m.done:
			t.Fatalf("make run exited (%v) before serving:\n%s", err, m.output())
		case <-deadline:
			t.Fatalf("make run does not serve after 3 minutes:\n%s", m.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return m
}

// stop interrupts make run as Ctrl-C does (make itself may end by the
// interrupt), and checks that the server stopped the emulator it started.
func (m *makeRun) stop(t *testing.T, emulator string) {
	t.Helper()
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-m.done:
		if err != nil && !strings.Contains(err.Error(), "interrupt") {
			t.Errorf("make run ended with %v after an interrupt:\n%s", err, tail(m.output(), 2000))
		}
	case <-time.After(2 * time.Minute):
		t.Errorf("make run still runs 2 minutes after an interrupt")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", emulator, time.Second)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Errorf("the emulator make run started still answers on %s after it stopped", emulator)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
