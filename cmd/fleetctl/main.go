// Command fleetctl manages the fleet's machines and fetches and searches
// its task logs from the terminal, over the API of openapi.yaml (through
// the client package). Its exit codes let scripts tell outcomes apart:
//
//	0  done
//	1  logs grep found nothing
//	2  usage: a bad flag, argument, state or duration
//	3  refused: the service answered 400, 409 or 413
//	4  not found: 404
//	5  auth: 401 or 403
//	6  unavailable: 429, 503, 504, or no answer at all
//	7  any other failure
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
)

// Exit codes; the package comment lists them.
const (
	exitOK          = 0
	exitNoMatch     = 1
	exitUsage       = 2
	exitRefused     = 3
	exitNotFound    = 4
	exitAuth        = 5
	exitUnavailable = 6
	exitFailure     = 7
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app is what every command shares: the streams and the settings in
// effect, read once the flags are parsed.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	flags          globalFlags
	settings       *settings
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ex exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(stderr, "fleetctl: "+ex.msg)
		}
		return ex.code
	}
	fmt.Fprintln(stderr, "fleetctl: "+message(err))
	return exitCode(err)
}

// exitError ends a command with a code, and a message unless it was
// already printed.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// usageError is a mistake on the command line.
func usageError(format string, args ...any) error {
	return exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// exitCode classifies an error for scripts.
func exitCode(err error) int {
	var ex exitError
	switch {
	case errors.As(err, &ex):
		return ex.code
	case client.IsUnavailable(err):
		return exitUnavailable
	case client.IsAuth(err):
		return exitAuth
	case client.IsNotFound(err):
		return exitNotFound
	}
	switch client.StatusOf(err) {
	case 400, 409, 413:
		return exitRefused
	}
	return exitFailure
}

// message words an error as one line: an API error as its status class
// and the service's message.
func message(err error) string {
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		what := map[int]string{400: "refused", 409: "refused", 413: "refused", 401: "not authenticated", 403: "not allowed",
			404: "not found", 429: "throttled", 503: "unavailable", 504: "timed out"}[apiErr.Status]
		if what == "" {
			what = "failed"
		}
		return fmt.Sprintf("%s (%d): %s", what, apiErr.Status, apiErr.Message)
	}
	var terr *client.TransportError
	if errors.As(err, &terr) {
		return fmt.Sprintf("unavailable: %v", terr.Err)
	}
	return err.Error()
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetctl",
		Short: "Manage the fleet's machines and fetch and search its task logs",
		Long: `fleetctl manages the fleet's machines (list, show, freeze, decommission,
activate) and fetches, prints and searches task logs through the fleet API.

Settings come from flags, then FLEETCTL_* environment variables, then the
profile of the config file (fleetctl config shows what is in effect).

Exit codes: 0 done, 1 logs grep found nothing, 2 usage, 3 refused (400/409),
4 not found, 5 auth (401/403), 6 unavailable (503, timeout, no answer),
7 other failure.`,
		Example: `  fleetctl list --state frozen
  fleetctl freeze node-17 -m "kernel upgrade" --for 2h
  fleetctl logs grep --request web-api --since 7d -i timeout`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			s, err := resolve(a.flags, cmd.Flags(), os.Getenv)
			if err != nil {
				return err
			}
			a.settings = s
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError("%v (see %s --help)", err, cmd.CommandPath())
	})
	a.flags.register(root)
	root.AddCommand(
		a.listCommand(), a.showCommand(),
		a.changeCommand("freeze"), a.changeCommand("decommission"), a.changeCommand("activate"),
		a.expiringCommand(), a.makePermanentCommand(), a.deleteCommand(), a.purgeDeadCommand(),
		a.logsCommand(), a.configCommand(),
	)
	return root
}

// args checks a command's positional arguments as a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError("%s: %v (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())
		}
		return nil
	}
}
