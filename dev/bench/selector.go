package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// fleetctlSelector measures a change by selector: fleetctl freeze over a
// fleet of 1,000 machines selected by attribute, under --max-unavailable
// 50%, and activate back, while a poller reads the fleet every 100 ms and
// keeps the most machines it saw out of ACTIVE at once (the guard's figure).
func fleetctlSelector(ctx context.Context, e *env) ([]row, error) {
	n, jobs := e.size(300, 200, 20), 16
	work, err := os.MkdirTemp("", "bench-selector-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	binary, err := buildFleetctl(work)
	if err != nil {
		return nil, err
	}
	s, err := apitest.Up(ctx)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	rep := &benchReporter{}
	srv, err := s.Serve(rep, apitest.None)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	for first := 0; first < n; first += 100 {
		var ms []apitest.Machine
		for i := first; i < min(first+100, n); i++ {
			ms = append(ms, apitest.Machine{ID: fmt.Sprintf("sel-%04d", i), Host: fmt.Sprintf("node-%04d", i), Rack: fmt.Sprintf("rack-%d", i%20),
				Attributes: map[string]string{"pool": "bench"}, RunningTasks: 1})
		}
		if err := s.Report(ctx, time.Time{}, ms...); err != nil {
			return nil, err
		}
	}
	c, err := client.New(client.Options{Endpoint: srv.URL})
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "FLEETCTL_ENDPOINT="+srv.URL, "HOME="+work)
	budget := n / 2

	// The poller runs for the whole freeze. Every machine starts ACTIVE,
	// so the FROZEN ones are those out of ACTIVE: it reads only them (the
	// state query), to weigh little on the run it watches.
	stop, most := make(chan struct{}), make(chan int)
	go func() {
		worst := 0
		for {
			if frozen, err := c.ListSlaves(ctx, string(client.Frozen)); err == nil {
				worst = max(worst, len(frozen))
			}
			select {
			case <-stop:
				most <- worst
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	began := time.Now()
	freeze := command(env, binary, "freeze", "-l", "pool=bench", "--max-unavailable", "50%", "-j", fmt.Sprint(jobs), "--yes", "-m", "bench")
	out, err := freeze.CombinedOutput()
	freezeTime := time.Since(began)
	close(stop)
	seen := <-most
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 11 {
		return nil, fmt.Errorf("fleetctl freeze: %v, want exit code 11 (half held back): %s", err, tail(out))
	}
	summary := regexp.MustCompile(`freeze: (\d+) started, (\d+) not started .*, (\d+) at once`).FindStringSubmatch(string(out))
	if summary == nil || summary[1] != fmt.Sprint(budget) {
		return nil, fmt.Errorf("fleetctl freeze: got %q, want %d started", summary, budget)
	}

	began = time.Now()
	if out, err := command(env, binary, "activate", "-l", "pool=bench", "-j", fmt.Sprint(jobs), "--yes").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fleetctl activate: %v: %s", err, tail(out))
	}
	activateTime := time.Since(began)
	if len(rep.errs) > 0 {
		return nil, fmt.Errorf("answers that do not match openapi.yaml: %s", strings.Join(rep.errs, "; "))
	}
	return []row{
		{figure: fmt.Sprintf("fleetctl freeze -l pool=bench --max-unavailable 50%% -j %d over %d machines (%s started, %s held)", jobs, n, summary[1], summary[2]),
			value: fmt.Sprintf("%s (%.0f changes/s, %s at once)", freezeTime.Round(time.Millisecond), float64(budget)/freezeTime.Seconds(), summary[3])},
		{figure: "most machines out of ACTIVE a poller saw during it", value: fmt.Sprint(seen), target: fmt.Sprintf("≤ %d", budget), met: verdict(seen <= budget)},
		{figure: fmt.Sprintf("fleetctl activate -l pool=bench -j %d, back (%d changed, %d already ACTIVE)", jobs, budget, n-budget),
			value: fmt.Sprintf("%s (%.0f changes/s)", activateTime.Round(time.Millisecond), float64(budget)/activateTime.Seconds())},
	}, nil
}

// tail is the end of a command's output, for an error.
func tail(out []byte) string {
	if len(out) > 500 {
		out = out[len(out)-500:]
	}
	return string(out)
}
