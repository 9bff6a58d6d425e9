// Command invoke runs one event through one function of template.yaml on this
// machine, against the local emulator, the way sam local invoke does:
//
//	go run ./dev/invoke -function SlavesFunction -event events/slaves-list.json \
//	    -binary bin/local/SlavesFunction/bootstrap
//
// (make invoke FN=SlavesFunction EVENT=events/slaves-list.json builds the
// binary for this machine, Linux or macOS, and runs this.) The function gets
// the environment the template gives it, with -parameter-overrides in place
// of the parameters' defaults and tables named after their logical ids; a variable the function declares
// takes the value of this process's environment when set there, and the
// -env-vars file (sam local invoke's format) wins over both, as with SAM.
// Its AWS settings always point at the emulator at -moto, in the emulator's
// one region, whatever the shell's AWS variables say; an emulator that
// listens there is used however long it takes to answer (a busy one is
// slow), and one is started only if nothing listens there, and then keeps
// its data only as long as this command runs. The template's tables and
// buckets, and the log buckets, are created there when missing, as make run
// does.
//
// The response is the only thing on stdout. The function's logs go to
// stderr between START and END lines, then a REPORT line with its duration,
// billed duration, memory size, peak memory and init duration. A function
// error (or an event the function does not handle) is printed to stderr and
// exits with status 1; a usage error exits with status 2.
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
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
)

// errUsage marks a mistake in how the command was called.
var errUsage = errors.New("usage")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var ferr *lambdarun.FunctionError
	switch {
	case err == nil:
		return
	case errors.As(err, &ferr):
		body := ferr.Raw
		if len(body) == 0 {
			body, _ = json.Marshal(ferr)
		}
		fmt.Fprintf(os.Stderr, "invoke: %v\n%s\n", ferr, pretty(body))
		os.Exit(1)
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "invoke:", strings.TrimPrefix(err.Error(), "usage: "))
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("invoke", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		function = flags.String("function", "", "logical id of the function in the template (required)")
		event    = flags.String("event", "", "file holding the event, - for stdin (required)")
		binary   = flags.String("binary", "", "bootstrap binary built for this machine (default bin/local/<function>/bootstrap)")
		template = flags.String("template", stack.TemplateFile, "SAM template")
		envVars  = flags.String("env-vars", "dev/env.local.json", "environment overrides, in sam local invoke's --env-vars format; empty for none")
		params   = flags.String("parameter-overrides", "", `template parameter values, as sam's --parameter-overrides: "LogUrlTtl=2h MaxDecommissioningSlaves=0"`)
		motoAddr = flags.String("moto", stack.Addr(), "address of the emulator (EMULATOR_ADDR); started there when nothing listens there")
	)
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *function == "" || *event == "" || flags.NArg() > 0 {
		flags.Usage()
		return fmt.Errorf("%w: -function and -event are required", errUsage)
	}

	tpl, err := stack.LoadTemplate(*template)
	if err != nil {
		return err
	}
	if fns := tpl.Functions(); !slices.Contains(fns, *function) {
		return fmt.Errorf("%w: %s has no function %q; its functions are %s", errUsage, *template, *function, strings.Join(fns, ", "))
	}
	overrides, err := stack.ParseParameterOverrides(*params)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if tpl, err = tpl.WithParameters(overrides); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	payload, err := readEvent(*event)
	if err != nil {
		return err
	}
	env, err := tpl.InvokeEnv(*function, os.LookupEnv, *envVars)
	if err != nil {
		return err
	}
	cfg, err := tpl.FunctionConfig(*function)
	if err != nil {
		return err
	}
	if *binary == "" {
		*binary = filepath.Join("bin", "local", *function, "bootstrap")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	moto, err := stack.StartMotoWith(ctx, *motoAddr, stack.Options{Command: "make invoke", Progress: stderr})
	if err != nil {
		return err
	}
	defer moto.Stop()
	if moto.Started {
		fmt.Fprintf(stderr, "invoke: started moto at %s for this invocation (its data goes when it ends; keep one running with make run)\n", moto.Endpoint)
	}
	if err := tpl.CreateTables(ctx, stack.DynamoDBClient(moto.Endpoint), stack.LocalName); err != nil {
		return fmt.Errorf("create tables at %s: %w", moto.Endpoint, err)
	}
	buckets, err := tpl.LocalBuckets()
	if err == nil {
		err = stack.CreateBuckets(ctx, stack.LocalS3Client(moto.Endpoint), buckets...)
	}
	if err != nil {
		return fmt.Errorf("create buckets at %s: %w", moto.Endpoint, err)
	}
	if err := moto.Ready(); err != nil {
		return err
	}
	aws, _ := stack.LocalAWS(moto.Endpoint)
	for k, v := range aws {
		env[k] = v
	}
	stack.LocalDeadlines(env, os.LookupEnv)

	res, err := lambdarun.Function{
		Binary:      *binary,
		Name:        *function,
		Env:         env,
		MemorySize:  cfg.MemorySize,
		Timeout:     cfg.Timeout,
		Logs:        stderr,
		BeforeEvent: func(id string) { fmt.Fprintf(stderr, "START RequestId: %s Version: $LATEST\n", id) },
	}.Invoke(ctx, payload)
	if res.RequestID != "" && res.Init > 0 {
		fmt.Fprintf(stderr, "END RequestId: %s\n%s\n", res.RequestID, res.Report(cfg.MemorySize))
	}
	if errors.Is(err, syscall.ENOEXEC) {
		return fmt.Errorf("%w: %s is not a program of this machine (%s/%s); make invoke builds it for this one, sam build for Lambda", err, *binary, runtime.GOOS, runtime.GOARCH)
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", pretty(res.Response))
	return err
}

func readEvent(path string) ([]byte, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read event: %w", err)
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("event %s is not JSON", path)
	}
	return data, nil
}

// pretty indents JSON and leaves anything else as it is.
func pretty(b []byte) []byte {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return b
	}
	return out.Bytes()
}
