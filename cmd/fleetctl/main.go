// Command fleetctl manages the fleet's machines and fetches and searches
// its task logs from the terminal, over the API of openapi.yaml (through
// the client package). Its exit codes let scripts tell outcomes apart:
//
//	0  done
//	1  logs grep found nothing; diff found differences
//	2  usage: a bad flag, argument, state or duration
//	3  refused: the service answered 400, 409, 412 or 413; import: a
//	   slave in conflict, refused, or moved during the read
//	4  not found: 404
//	5  auth: 401 or 403
//	6  unavailable: 429, 503, 504, or no answer at all
//	7  any other failure, and an endpoint that is not the fleet API
//	8  logs fetch, cat or grep: some logs failed (each named on stderr),
//	   every other one was done
//	9  wait, decommission --wait: a machine was not there by --wait-timeout
//	10 wait, decommission --wait: a machine went elsewhere (activated,
//	   DEAD, deleted) instead of reaching the state waited for
//	11 freeze, decommission, activate: --max-unavailable held machines
//	   back, not started (each named on stderr); the others were done
//	130  interrupted (SIGINT; 143 for SIGTERM); import resumes from its
//	   checkpoint
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// Exit codes; the package comment lists them.
const (
	exitOK          = 0
	exitNoMatch     = 1
	exitDifferent   = 1 // diff's, sharing 1 with grep's as diff(1) and grep(1) do
	exitUsage       = 2
	exitRefused     = 3
	exitNotFound    = 4
	exitAuth        = 5
	exitUnavailable = 6
	exitFailure     = 7
	exitSomeLogs    = 8
	exitWaitTimeout = 9
	exitElsewhere   = 10
	exitHeld        = 11
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		cancel(signalError{sig.(syscall.Signal)})
		// A second signal ends at once.
		<-signals
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// signalError is the cause of a run cancelled by a signal.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "interrupted (" + e.sig.String() + ")" }

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
	var sig signalError
	if errors.As(context.Cause(ctx), &sig) {
		// Whatever the command was doing, it stopped for the signal:
		// one line, and the shell's code for it.
		fmt.Fprintln(stderr, "fleetctl: "+sig.Error())
		return 128 + int(sig.sig)
	}
	if err == nil {
		return exitOK
	}
	// cobra's, with its suggestions on further lines: said in one.
	err = asUnknownCommand(root, err)
	var ex exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(stderr, "fleetctl: "+termtext.Visible(ex.msg))
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
	case 400, 409, 412, 413:
		return exitRefused
	}
	return exitFailure
}

// message words an error as one line, rendered visible: an API error as
// its status class and the service's message.
func message(err error) string {
	return termtext.Visible(describe(err))
}

func describe(err error) string {
	var apiErr *client.Error
	var notAPI *client.NotAPIError
	if errors.As(err, &notAPI) {
		return fmt.Sprintf("not the fleet API: the endpoint answered %d with %s (check --endpoint)", notAPI.Status, orDash(notAPI.ContentType))
	}
	if errors.As(err, &apiErr) {
		what := map[int]string{400: "refused", 409: "refused", 412: "moved since read", 413: "refused", 401: "not authenticated", 403: "not allowed",
			404: "not found", 429: "throttled", 503: "unavailable", 504: "timed out"}[apiErr.Status]
		if what == "" {
			what = "failed"
		}
		return fmt.Sprintf("%s (%d): %s", what, apiErr.Status, apiErr.Message)
	}
	var terr *client.TransportError
	if errors.As(err, &terr) {
		var ue *url.Error
		if errors.Is(terr.Err, context.DeadlineExceeded) && errors.As(terr.Err, &ue) {
			return fmt.Sprintf("unavailable: %s: no answer from %s in time (--timeout)", terr.Operation, ue.URL)
		}
		return fmt.Sprintf("unavailable: %v", terr.Err)
	}
	return client.Redact(err).Error()
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetctl",
		Short: "Manage the fleet's machines and fetch and search its task logs",
		Long: `fleetctl manages the fleet's machines (list, show, watch, freeze,
decommission, activate, import from the old scheduler) and fetches, prints
and searches task logs through the fleet API. diff compares the answers of
two APIs before clients move from one to the other.

Settings come from flags, then FLEETCTL_* environment variables, then the
profile of the config file (fleetctl config shows what is in effect).

Exit codes: 0 done, 1 logs grep found nothing or diff found differences, 2
usage, 3 refused (400/409/412/413; import: a slave in conflict, refused or
moved during the read), 4 not found (404), 5 auth (401/403), 6 unavailable
(429/503/504, timeout, no answer), 7 other failure (an endpoint that is not
the fleet API too), 8 some logs failed (logs fetch, cat, grep: each named on
stderr), 9 a wait timed out, 10 a machine waited for went elsewhere
(activated, DEAD, deleted), 11 --max-unavailable held machines back, 130
interrupted (143 for SIGTERM; import resumes from its checkpoint).

Text from the service (messages, hosts, log keys) is shown with control
characters escaped (\x1b, \n); -o json is exact.`,
		Example: `  fleetctl list --state frozen
  fleetctl freeze node-17 -m "kernel upgrade" --for 2h
  fleetctl logs grep --request web-api --since 7d -i timeout`,
		Version:       buildVersion(),
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
		a.waitCommand(), a.watchCommand(), a.expiringCommand(), a.makePermanentCommand(), a.deleteCommand(), a.purgeDeadCommand(),
		a.importCommand(), a.diffCommand(), a.logsCommand(), a.configCommand(), a.versionCommand(),
	)
	root.InitDefaultHelpCmd()
	nameSuggestions(root)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  fleetctl help logs fetch"
		case "completion":
			c.Long = strings.TrimSpace(c.Long) + `

Besides commands, flags and states, it completes the machine ids of the
commands that take them (show, freeze, decommission, activate, wait,
delete; make-permanent offers the machines with an expiring change), read
from the API with the settings in effect in one call of at most 2 s: a slow
or unreachable endpoint completes nothing rather than hold the shell.`
			c.Example = "  fleetctl completion bash > ~/.local/share/bash-completion/completions/fleetctl\n  fleetctl completion zsh > \"${fpath[1]}/_fleetctl\"\n  fleetctl completion fish > ~/.config/fish/completions/fleetctl.fish"
			for _, shell := range c.Commands() {
				shell.Example = map[string]string{
					"bash":       "  fleetctl completion bash > ~/.local/share/bash-completion/completions/fleetctl",
					"zsh":        "  fleetctl completion zsh > \"${fpath[1]}/_fleetctl\"",
					"fish":       "  fleetctl completion fish > ~/.config/fish/completions/fleetctl.fish",
					"powershell": "  fleetctl completion powershell > fleetctl.ps1",
				}[shell.Name()]
			}
		}
	}
	return root
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print fleetctl's version",
		Example: "  fleetctl version",
		Args:    args(cobra.NoArgs),
		// No settings are needed, so a broken config file does not
		// hide the version.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(a.stdout, "fleetctl "+buildVersion())
			return nil
		},
	}
}

// args checks a command's positional arguments as a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			if strings.HasPrefix(err.Error(), "unknown command ") && len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return usageError("%s: %v (see %s --help)", cmd.CommandPath(), err, cmd.CommandPath())
		}
		return nil
	}
}
