package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
	"github.com/fleetops/fleet/shared/web"
)

// These tests run fleetctl in process against the real slave routes over
// the in-memory store: no emulator, so each takes milliseconds. The
// integration tests (e2e_integration_test.go) run the built binary over
// the whole API on the emulators.

// inProcess is the service a test's fleetctl talks to.
type inProcess struct {
	store *memstore.Store
	url   string
}

// newInProcess serves the slave routes over a store holding one machine
// per id, in the state given, with limits as the service's configuration
// would set them.
func newInProcess(t *testing.T, limits machine.Limits, states map[string]machine.State) *inProcess {
	t.Helper()
	store := memstore.New(0)
	at := time.Now().Add(-time.Hour).UnixMilli()
	for id, st := range states {
		store.Put(machine.Slave{ID: id, FirstSeenAt: at, Host: id + ".example.com", RackID: "rack-1",
			Current: machine.Update{SlaveID: id, State: st, Timestamp: at, Message: "seeded"}})
	}
	h := web.Wrap(slaves.New(store, access.Policy{Mode: access.ModeNone}, limits), web.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("FLEETCTL_ENDPOINT", srv.URL)
	return &inProcess{store: store, url: srv.URL}
}

// ctlResult is what one fleetctl command line did.
type ctlResult struct {
	code           int
	stdout, stderr string
}

func (p *inProcess) run(args ...string) ctlResult {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return ctlResult{code, stdout.String(), stderr.String()}
}

func (p *inProcess) state(t *testing.T, id string) machine.State {
	t.Helper()
	s, err := p.store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Current.State
}

func (p *inProcess) entries(t *testing.T, id string) int {
	t.Helper()
	h, err := p.store.History(t.Context(), id, time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(h)
}

var defaultLimits = machine.Limits{MaxDecommissioning: 2, MaxExpiring: 30 * 24 * time.Hour}

func TestADryRunIsAnsweredByTheServiceAndChangesNothing(t *testing.T) {
	p := newInProcess(t, defaultLimits, map[string]machine.State{"m-1": machine.Active, "m-2": machine.Active})
	r := p.run("freeze", "m-1", "m-2", "--for", "90m", "--dry-run")
	want := "m-1: would freeze (ACTIVE → FROZEN, reverting to ACTIVE after 1h30m0s)\nm-2: would freeze (ACTIVE → FROZEN, reverting to ACTIVE after 1h30m0s)\n"
	if r.code != exitOK || r.stdout != want {
		t.Errorf("got %d %q %q, want 0 %q", r.code, r.stdout, r.stderr, want)
	}
	for _, id := range []string{"m-1", "m-2"} {
		if st, n := p.state(t, id), p.entries(t, id); st != machine.Active || n != 1 {
			t.Errorf("%s: got %s with %d history entries, want ACTIVE with 1: a dry run changes nothing", id, st, n)
		}
	}
	if exp, _ := p.store.ListExpiring(t.Context(), time.Now()); len(exp) != 0 {
		t.Errorf("got expiring %+v, want none", exp)
	}
}

func TestADryRunGetsTheServicesRefusals(t *testing.T) {
	tests := []struct {
		name   string
		limits machine.Limits
		args   []string
		code   int
		says   string
	}{
		{"a machine already there", defaultLimits, []string{"freeze", "m-frozen", "--dry-run"}, exitRefused, "FAILURE_ALREADY_AT_STATE"},
		{"an illegal transition", defaultLimits, []string{"freeze", "m-draining", "--dry-run"}, exitRefused, "FAILURE_ILLEGAL_TRANSITION"},
		{"an unknown machine", defaultLimits, []string{"activate", "m-nope", "--dry-run"}, exitNotFound, "not found (404)"},
		// The client knows no limit of its own: this service allows at
		// most an hour, which only the service can say.
		{"an expiring change past the service's longest", machine.Limits{MaxExpiring: time.Hour}, []string{"freeze", "m-active", "--for", "2h", "--dry-run"}, exitRefused, "refused (400)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newInProcess(t, tt.limits, map[string]machine.State{"m-active": machine.Active, "m-frozen": machine.Frozen, "m-draining": machine.StartingDecommission})
			r := p.run(tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.says) || r.stdout != "" {
				t.Errorf("got %d stdout %q stderr %q, want %d saying %q", r.code, r.stdout, r.stderr, tt.code, tt.says)
			}
		})
	}
}

func TestAChangeByIDPrintsOneLinePerMachine(t *testing.T) {
	p := newInProcess(t, defaultLimits, map[string]machine.State{"m-1": machine.Active, "m-2": machine.Active})
	r := p.run("freeze", "m-1", "m-nope", "m-2", "-m", "maintenance", "--for", "2h", "--yes")
	if r.code != exitNotFound || r.stdout != "m-1: FROZEN for 2h, then ACTIVE\nm-2: FROZEN for 2h, then ACTIVE\n" {
		t.Errorf("got %d %q, want 4 and a line per frozen machine", r.code, r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "fleetctl: m-nope: not found (404): ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("got stderr %q, want one not-found line", r.stderr)
	}
	if st := p.state(t, "m-2"); st != machine.Frozen {
		t.Errorf("got m-2 %s, want FROZEN", st)
	}
}

func TestChangeCommandLinesThatAreRefusedBeforeAnyCall(t *testing.T) {
	for _, args := range [][]string{
		{"freeze"},
		{"freeze", "m-1", "--state", "active"},
		{"freeze", "m-1", "--revert", "active"},
		{"freeze", "m-1", "--for", "soon"},
		{"freeze", "m-1", "-j", "0"},
		{"decommission", "m-1", "--wait-timeout", "1m"},
		{"freeze", "m-1", "m-2"}, // no terminal to confirm on, no --yes
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			p := newInProcess(t, defaultLimits, map[string]machine.State{"m-1": machine.Active, "m-2": machine.Active})
			if r := p.run(args...); r.code != exitUsage {
				t.Errorf("got %d %q, want %d", r.code, r.stderr, exitUsage)
			}
			if st := p.state(t, "m-1"); st != machine.Active {
				t.Errorf("got m-1 %s, want ACTIVE", st)
			}
		})
	}
}

func TestTheGuardHoldsBackWhatItDoesNotStart(t *testing.T) {
	p := newInProcess(t, defaultLimits, map[string]machine.State{"m-1": machine.Active, "m-2": machine.Active, "m-3": machine.Active})
	r := p.run("freeze", "--host", "m-*", "--max-unavailable", "2", "--yes")
	if r.code != exitHeld || !strings.Contains(r.stderr, "fleetctl: m-3: not started: --max-unavailable 2 reached") {
		t.Errorf("got %d %q, want %d naming m-3", r.code, r.stderr, exitHeld)
	}
	if got := []machine.State{p.state(t, "m-1"), p.state(t, "m-2"), p.state(t, "m-3")}; got[0] != machine.Frozen || got[1] != machine.Frozen || got[2] != machine.Active {
		t.Errorf("got %v, want the first two frozen", got)
	}
}

// fleetctl is a client: it links the client package and nothing of the
// server's, so it cannot guess the server's rules.
func TestFleetctlImportsNoSharedPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/fleetops/fleet/shared/") {
			t.Errorf("fleetctl depends on %s", p)
		}
	}
}

func TestListSelectsByStateAndGlob(t *testing.T) {
	p := newInProcess(t, defaultLimits, map[string]machine.State{"a-1": machine.Active, "a-2": machine.Frozen, "b-1": machine.Frozen})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "-o", "name"}, "a-1\na-2\nb-1\n"},
		{[]string{"list", "--state", "frozen", "-o", "name"}, "a-2\nb-1\n"},
		{[]string{"list", "a-*", "-o", "name"}, "a-1\na-2\n"},
	} {
		if r := p.run(tt.args...); r.code != exitOK || r.stdout != tt.want {
			t.Errorf("%v: got %d %q %q, want 0 %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
	if r := p.run("list", "--state", "sleeping"); r.code != exitUsage {
		t.Errorf("an unknown state: got %d %q, want %d", r.code, r.stderr, exitUsage)
	}
}

func TestAnExpiringChangeIsListedAndMadePermanent(t *testing.T) {
	p := newInProcess(t, defaultLimits, map[string]machine.State{"m-1": machine.Active, "m-2": machine.Active})
	if r := p.run("freeze", "m-1", "--for", "2h", "-m", "patch"); r.code != exitOK {
		t.Fatalf("freeze: got %d %q", r.code, r.stderr)
	}
	if r := p.run("expiring"); r.code != exitOK || !strings.Contains(r.stdout, "m-1") || !strings.Contains(r.stdout, "patch") {
		t.Errorf("expiring: got %d %q, want m-1's change", r.code, r.stdout)
	}
	if r := p.run("make-permanent", "m-1"); r.code != exitOK || r.stdout != "m-1: permanent, no longer reverts to ACTIVE\n" {
		t.Errorf("make-permanent: got %d %q %q", r.code, r.stdout, r.stderr)
	}
	if exp, _ := p.store.ListExpiring(t.Context(), time.Now()); len(exp) != 0 {
		t.Errorf("got expiring %+v, want none", exp)
	}
	if st := p.state(t, "m-1"); st != machine.Frozen {
		t.Errorf("got m-1 %s, want it still FROZEN", st)
	}
	if r := p.run("make-permanent", "m-2"); r.code != exitNotFound {
		t.Errorf("make-permanent of a machine without a change: got %d %q, want %d", r.code, r.stderr, exitNotFound)
	}
}

func TestShowAsJSONHoldsTheHistoryNewestFirst(t *testing.T) {
	p := newInProcess(t, defaultLimits, map[string]machine.State{"m-1": machine.Active})
	p.run("freeze", "m-1", "-m", "first")
	p.run("activate", "m-1", "-m", "second")
	r := p.run("show", "m-1", "-o", "json")
	first, second := strings.Index(r.stdout, `"first"`), strings.Index(r.stdout, `"second"`)
	if r.code != exitOK || first < 0 || second < 0 || second > first {
		t.Errorf("got %d %s, want the history with second before first", r.code, r.stdout)
	}
}
