package stack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// MotoStartTimeout bounds how long StartMoto waits for a new server to
// answer. moto's imports take seconds, and over a minute on a busy 2-core
// machine; a server that cannot start (moto missing) exits at once.
const MotoStartTimeout = 2 * time.Minute

// ForeignWait bounds how long StartMoto waits for an answer from a server
// that no command of the local stack runs (LocalStack, or not an emulator).
const ForeignWait = 30 * time.Second

const motoInstallHint = "moto is needed for local DynamoDB, the version dev/moto-requirements.txt pins; install it with: python3 -m pip install -r dev/moto-requirements.txt (or run make deps)"

// Moto is a running AWS emulator: one StartMoto started, or one (moto,
// LocalStack...) that was already answering at the address asked for.
type Moto struct {
	// Endpoint is the emulator's URL, e.g. http://127.0.0.1:4566, for
	// AWS_ENDPOINT_URL.
	Endpoint string
	// Started tells whether StartMoto started the process (and Stop stops it).
	Started bool

	cmd      *exec.Cmd
	claim    *Claim        // of the address, held while the server runs
	exited   chan struct{} // closed when cmd has been waited for
	output   *tail
	stopOnce sync.Once
	stopErr  error
}

// StartMoto returns the emulator at addr ("127.0.0.1:4566"), or starts
// python3 dev/motoserver.py there when nothing listens there. Port 0
// ("127.0.0.1:0") always starts a new server on a free port, as tests do. It
// waits until the server answers, at most MotoStartTimeout; ctx bounds only
// that wait, not the server's life: call Stop. The server runs with
// ProcessEnv: none of the caller's AWS variables.
//
// On a fixed port it first claims the address (claim.go): while another
// command of the local stack (make run, say) is starting the emulator
// there, it waits for it to be ready instead of racing it with a second
// server on the same port.
//
// A server that listens but is slow to answer is busy, not absent: moto
// serves one request at a time (dev/motoserver.py), and a large machine
// report keeps it for seconds. It is waited for (ForeignWait, or BusyWait
// when a command of the local stack runs it), rather than taken for none
// and a second one started on its port, which could only fail.
//
// MOTO_PYTHON names the Python interpreter to use instead of python3.
func StartMoto(ctx context.Context, addr string) (*Moto, error) {
	return StartMotoWith(ctx, addr, Options{})
}

// Options say which command starts the local stack, and where it tells
// what it does.
type Options struct {
	// Command names this command in the emulator's claim, for the commands
	// that wait for it ("make run"); the program's name when empty.
	Command string
	// Progress gets one line a step, and what a wait is for; nil: silence.
	Progress io.Writer
}

func (o Options) say(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

func (o Options) command() string {
	if o.Command != "" {
		return o.Command
	}
	return filepath.Base(os.Args[0])
}

// StartMotoWith is StartMoto as the command o names, saying on o.Progress
// what it waits for and when it starts a server.
func StartMotoWith(ctx context.Context, addr string, o Options) (*Moto, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("start moto: address %q: %w", addr, err)
	}
	if port == "0" {
		return startMoto(ctx, host, port, o)
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("start moto: %w", err)
	}
	claim, holder, err := claimEmulator(root, addr, o.command())
	for err == nil && holder != nil {
		if holder, err = waitClaim(ctx, root, addr, holder, o.say); err != nil || holder != nil {
			break // ready: its emulator is used below
		}
		claim, holder, err = claimEmulator(root, addr, o.command()) // it ended
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("start moto: %w", err)
	case holder != nil:
		return running(ctx, addr, holder, o)
	case Listening(addr):
		// Not started by a command of the local stack (LocalStack, or a
		// make run of another checkout): used as it is.
		claim.release()
		return running(ctx, addr, nil, o)
	}
	m, err := startMoto(ctx, host, port, o)
	if err != nil {
		claim.release()
		return nil, err
	}
	m.claim = claim
	return m, nil
}

// startMoto starts a new server at host:port.
func startMoto(ctx context.Context, host, port string, o Options) (*Moto, error) {
	o.say("local stack: starting moto on %s (python3 dev/motoserver.py)", net.JoinHostPort(host, port))
	root, err := RepoRoot()
	if err != nil {
		return nil, fmt.Errorf("start moto: %w", err)
	}
	python := os.Getenv("MOTO_PYTHON")
	if python == "" {
		python = "python3"
	}
	script := filepath.Join(root, "dev", "motoserver.py")
	cmd := exec.Command(python, script, "--host", host, "--port", port, "--quiet")
	cmd.Dir = root
	cmd.Env = ProcessEnv(nil)
	setProcessGroup(cmd)
	m := &Moto{cmd: cmd, Started: true, exited: make(chan struct{}), output: &tail{max: 8 << 10}}
	if o.Progress != nil {
		m.output.say = func(line string) { o.say("%s", line) }
	}
	cmd.Stderr = m.output
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start moto: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto: %w; %s", err, motoInstallHint)
	}

	// The server prints one line once it listens: "motoserver listening on URL".
	// Whatever follows is kept (the tail) for error messages only.
	listening := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		if _, url, ok := strings.Cut(strings.TrimSpace(line), "listening on "); ok {
			listening <- url
		} else {
			_, _ = m.output.Write([]byte(line))
		}
		_, _ = io.Copy(m.output, r)
	}()
	go func() {
		_ = cmd.Wait()
		close(m.exited)
	}()

	timer := time.NewTimer(MotoStartTimeout)
	defer timer.Stop()
	select {
	case m.Endpoint = <-listening:
	case <-m.exited:
		// The script names the missing module and how to install it, if that is why.
		return nil, fmt.Errorf("start moto: %s exited (%v): %s", script, cmd.ProcessState, m.output)
	case <-timer.C:
		_ = m.Stop()
		return nil, fmt.Errorf("start moto: no answer within %v: %s; %s", MotoStartTimeout, m.output, motoInstallHint)
	case <-ctx.Done():
		_ = m.Stop()
		return nil, fmt.Errorf("start moto: %w", ctx.Err())
	}
	for !answers(ctx, m.Endpoint) {
		select {
		case <-m.exited:
			return nil, fmt.Errorf("start moto: exited (%v): %s", cmd.ProcessState, m.output)
		case <-timer.C:
			_ = m.Stop()
			return nil, fmt.Errorf("start moto: %s does not answer within %v: %s", m.Endpoint, MotoStartTimeout, m.output)
		case <-ctx.Done():
			_ = m.Stop()
			return nil, fmt.Errorf("start moto: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return m, nil
}

// Stop stops the emulator if StartMoto started it (its whole process group),
// then gives up its claim of the address, and does nothing otherwise. It is
// safe to call more than once.
func (m *Moto) Stop() error {
	if m == nil || !m.Started {
		return nil
	}
	m.stopOnce.Do(func() {
		m.stopErr = stopGroup(m.cmd, m.exited, "moto")
		m.claim.release()
	})
	return m.stopErr
}

// Reset empties the emulator, as a new one starts: no tables, buckets,
// queues or event buses (moto's /moto-api/reset). Tests that share one
// emulator reset it instead of starting another, which costs seconds of
// CPU.
func (m *Moto) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.Endpoint+"/moto-api/reset", nil)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("reset moto at %s: got %s, want 200", m.Endpoint, res.Status)
	}
	return nil
}

// SharedMoto is one emulator for the tests of a package: started on first
// use, emptied for each test that asks for it, stopped after the last. A
// start of moto costs seconds of CPU, a reset a request.
type SharedMoto struct {
	once sync.Once
	moto *Moto
	err  error
}

// Empty starts the emulator the first time, empties it (Reset) and
// returns it.
func (s *SharedMoto) Empty(ctx context.Context) (*Moto, error) {
	s.once.Do(func() { s.moto, s.err = StartMoto(ctx, "127.0.0.1:0") })
	if s.err != nil {
		return nil, s.err
	}
	if err := s.moto.Reset(ctx); err != nil {
		return nil, err
	}
	return s.moto, nil
}

// Stop stops the emulator, if Empty started one.
func (s *SharedMoto) Stop() {
	if s.moto != nil {
		_ = s.moto.Stop()
	}
}

// Ready tells the commands waiting for the emulator StartMoto started that
// they may use it: call it once what they need is there (make run's
// tables, buckets and event routes). It does nothing for an emulator this
// process did not start.
func (m *Moto) Ready() error {
	if m == nil {
		return nil
	}
	return m.claim.ready()
}

// running returns the server that listens on addr once it answers: one
// request, however long it takes, within ForeignWait, or BusyWait when
// holder, a command of the local stack, runs it (it is busy, not stuck).
func running(ctx context.Context, addr string, holder *Claimant, o Options) (*Moto, error) {
	endpoint := "http://" + addr
	began, wait := time.Now(), ForeignWait
	if holder != nil {
		wait = BusyWait
		// Said only when the answer is slow to come.
		busy := time.AfterFunc(5*time.Second, func() {
			o.say("local stack: the emulator on %s is %s and busy (moto answers one request at a time): waiting for its answer, up to %v", addr, holder.owns(), wait)
		})
		defer busy.Stop()
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for statusWithin(ctx, endpoint, wait) == 0 {
		if holder != nil && !Listening(addr) {
			return nil, fmt.Errorf("start moto: nothing listens on %s, where %s runs the emulator: it stopped; restart %s", addr, holder, holder.name())
		}
		select {
		case <-ctx.Done():
			switch {
			case ctx.Err() != context.DeadlineExceeded:
				return nil, fmt.Errorf("start moto: %w", ctx.Err())
			case holder != nil:
				return nil, fmt.Errorf("start moto: the emulator on %s is %s and gives no HTTP answer after %v: it is busy (a large report, say) or stuck; let %s finish its work and try again, or restart it", addr, holder.owns(), time.Since(began).Round(time.Second), holder.name())
			}
			return nil, fmt.Errorf("start moto: something listens on %s but gives no HTTP answer within %v; stop it, or run the local stack elsewhere with EMULATOR_ADDR", addr, ForeignWait)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return &Moto{Endpoint: endpoint}, nil
}

// Listening reports whether something accepts TCP connections on addr: an
// emulator there may be too busy to answer a request soon, but it still
// accepts one.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// answers reports whether an HTTP server answers at url.
func answers(ctx context.Context, url string) bool {
	return status(ctx, url) != 0
}

// status returns the HTTP status url answers with, or 0 when nothing answers
// within a second.
func status(ctx context.Context, url string) int {
	return statusWithin(ctx, url, time.Second)
}

// statusWithin is status, waiting at most timeout for the answer.
func statusWithin(ctx context.Context, url string, timeout time.Duration) int {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// stopGroup stops cmd's process group: a polite signal, then a kill after 5 s.
// exited is closed once cmd has been waited for.
func stopGroup(cmd *exec.Cmd, exited <-chan struct{}, name string) error {
	signalGroup(cmd, false)
	select {
	case <-exited:
		return nil
	case <-time.After(5 * time.Second):
		signalGroup(cmd, true)
		<-exited
		return fmt.Errorf("stop %s: killed after 5 s without exiting", name)
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	// say, when set, gets each whole line that tells of an S3 event that
	// went nowhere ("motoserver: S3 event ..."), which moto itself would
	// swallow (dev/motoserver.py).
	say     func(line string)
	pending []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	if t.say != nil {
		t.pending = append(t.pending, p...)
		for {
			line, rest, ok := bytes.Cut(t.pending, []byte("\n"))
			if !ok {
				break
			}
			if bytes.HasPrefix(line, []byte("motoserver: S3 event ")) {
				t.say(string(line))
			}
			t.pending = rest
		}
		if len(t.pending) > t.max {
			t.pending = t.pending[:0]
		}
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "no output"
	}
	return s
}
