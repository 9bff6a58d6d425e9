// Command drain plays the scheduler for one machine being decommissioned
// on the local stack: it reports the machine's running tasks counting down
// to 0, one machine report every -every, the way the scheduler reports a
// machine whose tasks end (docs/fleetctl.md, "Local drains"). Each report is an
// EventBridge "Machine Report" event (events/inventory-machine-report.json
// is one) run through the real InventoryFunction binary, as make invoke
// runs it; nothing is written to a table but by the function. So
// fleetctl decommission --wait can be followed to its end against make run:
//
//	go run ./dev/drain -slave ID [-from 5] [-every 2s] -binary bin/local/InventoryFunction/bootstrap
//
// (make drain SLAVE=ID [FROM=5] [EVERY=2s] builds the binary and runs this.)
// The machine's description (host, rack, attributes, resources) is read
// through make run's API (FLEETCTL_ENDPOINT, else http://127.0.0.1:$PORT,
// PORT 3000 by default) and reported unchanged. A machine that is not
// draining yet is waited for (-wait-timeout): the countdown starts once it
// is decommissioned (fleetctl decommission ID). One line per report goes
// to stdout, with the state the service answers after it; the function's
// logs go to stderr only when it fails.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/internal/termtext"
)

const function = "InventoryFunction"

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(os.Stderr, "drain:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "drain:", shownError(err))
		os.Exit(1)
	}
}

// shownError is err as printed: an error may quote the service's own words
// (a client error carries its message), escaped as every line of this
// command is.
func shownError(err error) string { return termtext.Visible(err.Error()) }

// defaultEndpoint is make run's address, as fleetctl finds it.
func defaultEndpoint() string {
	if e := os.Getenv("FLEETCTL_ENDPOINT"); e != "" {
		return e
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "3000"
	}
	return "http://127.0.0.1:" + port
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("drain", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		slave    = flags.String("slave", "", "the machine's id (required)")
		from     = flags.Int("from", 5, "the running tasks of the first report; each next one reports one fewer, down to 0")
		every    = flags.Duration("every", 2*time.Second, "the time between two reports")
		waitFor  = flags.Duration("wait-timeout", 10*time.Minute, "how long to wait for the machine to start decommissioning")
		endpoint = flags.String("endpoint", defaultEndpoint(), "make run's API, where the machine is read")
		binary   = flags.String("binary", filepath.Join("bin", "local", function, "bootstrap"), "InventoryFunction's bootstrap built for this machine")
		envVars  = flags.String("env-vars", "dev/env.local.json", "environment overrides, in sam local invoke's --env-vars format; empty for none")
		motoAddr = flags.String("moto", stack.Addr(), "address of make run's emulator (EMULATOR_ADDR)")
	)
	if err := flags.Parse(args); err != nil {
		return err
	}
	switch {
	case *slave == "" || flags.NArg() > 0:
		flags.Usage()
		return fmt.Errorf("%w: -slave is required", flag.ErrHelp)
	case *from < 0:
		return fmt.Errorf("%w: -from %d: a count of tasks is 0 or more", flag.ErrHelp, *from)
	case *every < 0:
		return fmt.Errorf("%w: -every %s: not a duration of 0 or more", flag.ErrHelp, *every)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	api, err := client.New(client.Options{Endpoint: *endpoint, MaxAttempts: 1, AttemptTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	d := &drainer{api: api, id: *slave, shown: termtext.Visible(*slave), stdout: stdout, stderr: stderr}
	m, err := d.read(ctx)
	if err != nil {
		return err
	}
	if m.CurrentState.State == client.Decommissioned {
		fmt.Fprintf(stderr, "drain: %s is DECOMMISSIONED already: nothing to drain\n", d.shown)
		return nil
	}

	local, err := stack.UpWith(ctx, *motoAddr, stack.Options{Command: "make drain", Progress: stderr})
	if err != nil {
		return err
	}
	defer local.Close()
	if err := local.Moto.Ready(); err != nil {
		return err
	}
	if d.fn, err = local.Function(function, *binary, *envVars); err != nil {
		return err
	}

	if m, err = d.untilDraining(ctx, m, *waitFor); err != nil {
		return err
	}
	for n := *from; n >= 0; n-- {
		if n < *from {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(*every):
			}
		}
		if m, err = d.report(ctx, m, n); err != nil {
			return err
		}
		st := m.CurrentState.State
		fmt.Fprintf(stdout, "%s: %d running, %s\n", d.shown, n, shown(st))
		if st != client.StartingDecommission && st != client.Decommissioning && st != client.Decommissioned {
			return fmt.Errorf("%s is %s: it left the drain (activated, or reported lost?)", d.shown, shown(st))
		}
	}
	if st := m.CurrentState.State; st != client.Decommissioned {
		return fmt.Errorf("%s is %s after a report of 0 running tasks, not DECOMMISSIONED", d.shown, shown(st))
	}
	return nil
}

// drainer reports one machine through the function and reads it back
// through the API.
type drainer struct {
	api            *client.Client
	fn             lambdarun.Function
	id             string
	shown          string // id, as printed: escaped for the terminal
	stdout, stderr io.Writer
}

// shown is a state the service answered, as printed: what comes back from
// a server is escaped for the terminal, never written as it came.
func shown(st client.State) string { return termtext.Visible(string(st)) }

// read gets the machine from make run's API, saying what to do when it
// cannot.
func (d *drainer) read(ctx context.Context) (*client.Slave, error) {
	m, err := d.api.GetSlave(ctx, d.id)
	switch {
	case client.IsNotFound(err):
		return nil, fmt.Errorf("no machine %s at %s (make invoke FN=InventoryFunction EVENT=events/inventory-machine-report.json reports three)", d.shown, d.api.Endpoint())
	case client.IsUnavailable(err):
		return nil, fmt.Errorf("no answer from make run's API at %s (start make run first, or set FLEETCTL_ENDPOINT): %w", d.api.Endpoint(), err)
	}
	return m, err
}

// untilDraining waits for the machine to be decommissioned: before that, a
// report of running tasks changes nothing, and one of 0 would be spent.
func (d *drainer) untilDraining(ctx context.Context, m *client.Slave, timeout time.Duration) (*client.Slave, error) {
	deadline := time.Now().Add(timeout)
	said := false
	for {
		switch m.CurrentState.State {
		case client.StartingDecommission, client.Decommissioning:
			return m, nil
		case client.Decommissioned:
			return nil, fmt.Errorf("%s was drained meanwhile: it is DECOMMISSIONED", d.shown)
		}
		if !said {
			fmt.Fprintf(d.stderr, "drain: %s is %s: waiting for its decommission (fleetctl decommission %s)\n", d.shown, shown(m.CurrentState.State), d.shown)
			said = true
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is still %s after %s (-wait-timeout): decommission it first", d.shown, shown(m.CurrentState.State), timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		var err error
		if m, err = d.read(ctx); err != nil {
			return nil, err
		}
	}
}

// report sends one machine report of m with n running tasks, made now, and
// returns the machine as the API shows it after.
func (d *drainer) report(ctx context.Context, m *client.Slave, n int) (*client.Slave, error) {
	event, err := machineReport(time.Now(), m, n)
	if err != nil {
		return nil, err
	}
	var logs bytes.Buffer
	fn := d.fn
	fn.Logs = &logs
	res, err := fn.Invoke(ctx, event)
	if err == nil {
		var counts struct{ Machines, Invalid, Failed int }
		if err = json.Unmarshal(res.Response, &counts); err == nil && (counts.Machines != 1 || counts.Invalid+counts.Failed > 0) {
			err = fmt.Errorf("the report was not applied: %s", res.Response)
		}
	}
	if err != nil {
		d.stderr.Write(logs.Bytes())
		return nil, fmt.Errorf("%s with %d running tasks: %w", d.shown, n, err)
	}
	return d.read(ctx)
}

// machineReport is the scheduler's EventBridge event reporting m with n
// running tasks, in the shape of events/inventory-machine-report.json. Its
// time is whole seconds, as EventBridge's are.
func machineReport(at time.Time, m *client.Slave, n int) ([]byte, error) {
	entry := map[string]any{
		"id": m.ID, "host": m.Host, "rackId": m.RackID, "attributes": m.Attributes,
		"lost": false, "runningTasks": n,
	}
	if m.Resources != nil {
		entry["resources"] = m.Resources
	}
	return json.Marshal(map[string]any{
		"version": "0", "id": fmt.Sprintf("drain-%s-%d", m.ID, at.UnixNano()), "detail-type": "Machine Report", "source": "fleet.scheduler",
		"time": at.UTC().Format(time.RFC3339), "region": stack.LocalRegion, "resources": []string{},
		"detail": map[string]any{"complete": false, "machines": []any{entry}},
	})
}
