// Command report sends a machine report in its large form through the local
// stack, the way a scheduler sends one to a deployed stack (docs/reports.md, "Sending
// a large report"): it uploads the file to the template's ReportsBucket under
// reports/, then runs ReportStateMachine (dev/statemachine) on the "Object
// Created" event S3 would have sent through EventBridge
// (events/inventory-report-object.json is one), each of its steps an
// invocation of the real InventoryFunction binary:
//
//	go run ./dev/report -file reports/fleet.json.gz -binary bin/local/InventoryFunction/bootstrap
//
// (make report FILE=reports/fleet.json.gz builds the binary and runs this.)
// The file is a report in the JSON or JSON Lines form (docs/behaviour.md
// "Machine reports"), gzip-compressed or not. The emulator is the one make
// run uses, started for this command when nothing answers there (its data
// then goes when the command ends). The function runs as make invoke runs
// it, its parts one at a time (-parallel): the emulator answers one request
// at a time, and the 8 parts at once that ReportStateMachine runs deployed
// only made each wait for the others, past its timeout. The execution's
// output goes to stdout; a line per step to stderr (rewritten in place on
// a terminal); the function's logs and a REPORT line per invocation to a
// file under bin/dev/report-logs, which stderr names.
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
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/inventory"

	"golang.org/x/term"
)

const (
	function     = "InventoryFunction"
	stateMachine = "ReportStateMachine"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("report", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		file     = flags.String("file", "", "the report: JSON or JSON Lines (.jsonl), gzip-compressed or not (required)")
		binary   = flags.String("binary", filepath.Join("bin", "local", function, "bootstrap"), "InventoryFunction's bootstrap built for this machine")
		envVars  = flags.String("env-vars", "dev/env.local.json", "environment overrides, in sam local invoke's --env-vars format; empty for none")
		motoAddr = flags.String("moto", stack.Addr(), "address of the emulator (EMULATOR_ADDR); started there when nothing answers")
		parallel = flags.Int("parallel", 1, "parts applied at once (8 deployed); the local emulator answers one request at a time")
	)
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *file == "" || flags.NArg() > 0 || *parallel < 1 {
		flags.Usage()
		return fmt.Errorf("%w: -file is required, and -parallel at least 1", flag.ErrHelp)
	}
	body, err := os.ReadFile(*file)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	local, err := stack.UpWith(ctx, *motoAddr, stack.Options{Command: "make report", Progress: stderr})
	if err != nil {
		return err
	}
	defer local.Close()
	if err := local.Moto.Ready(); err != nil {
		return err
	}
	fn, err := local.Function(function, *binary, *envVars)
	if err != nil {
		return err
	}
	env := fn.Env

	// Named by when it was sent, as a scheduler would, and keeping the
	// file's extension, which says its form.
	now := time.Now().UTC()
	key := inventory.ReportsPrefix + now.Format("20060102T150405.000Z") + "-" + filepath.Base(*file)
	_, err = local.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(env["REPORTS_BUCKET"]), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		return fmt.Errorf("upload %s: %w", *file, err)
	}
	fmt.Fprintf(stderr, "report: uploaded %s (%d bytes) to s3://%s/%s\n", *file, len(body), env["REPORTS_BUCKET"], key)

	event, err := objectCreated(now, env["REPORTS_BUCKET"], key, len(body))
	if err != nil {
		return err
	}
	def, err := statemachine.Load(local.Template, stateMachine)
	if err != nil {
		return err
	}
	logPath := filepath.Join(local.Root, "bin", "dev", "report-logs", strings.TrimPrefix(key, inventory.ReportsPrefix)+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logs.Close()
	fmt.Fprintf(stderr, "report: %s's logs and REPORT lines: %s\n", function, logPath)

	prog := newProgress(stderr, isTerminal(stderr))
	fn.Logs = logs
	m := &statemachine.Machine{Definition: def, MaxConcurrency: *parallel,
		Invoke: func(ctx context.Context, name string, payload json.RawMessage) (json.RawMessage, error) {
			if name != function {
				return nil, fmt.Errorf("%s invokes %s, which make report does not run", stateMachine, name)
			}
			step := stepOf(payload)
			prog.start(step)
			res, err := fn.Invoke(ctx, payload)
			if res.RequestID != "" {
				fmt.Fprintf(logs, "%s\n", res.Report(fn.MemorySize))
			}
			switch {
			case err == nil:
				prog.done(step, res.Response)
			case ctx.Err() == nil:
				prog.failed()
			}
			return res.Response, err
		},
		Read: func(ctx context.Context, bucket, key string) ([]byte, error) {
			out, err := local.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				return nil, err
			}
			defer out.Body.Close()
			return io.ReadAll(out.Body)
		},
	}
	out, err := m.Run(ctx, event)
	prog.close()
	again := fmt.Sprintf("make report FILE=%s again applies the rest (a report is idempotent)", *file)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted after %s; %s", prog.summary(), again)
	case err != nil:
		first, _, _ := strings.Cut(err.Error(), "\n")
		return fmt.Errorf("failed after %s: %s (the rest in %s); %s", prog.summary(), first, logPath, again)
	}
	fmt.Fprintf(stderr, "report: %s done in %s, %d invocations of %s\n", stateMachine, time.Since(now).Round(100*time.Millisecond), m.Invocations.Load(), function)
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

// isTerminal reports whether w is a terminal, where a line can be
// rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// objectCreated is the event S3 sends EventBridge for a new object, in the
// shape of events/inventory-report-object.json.
func objectCreated(at time.Time, bucket, key string, size int) ([]byte, error) {
	type named struct {
		Name string `json:"name"`
	}
	type object struct {
		Key  string `json:"key"`
		Size int    `json:"size"`
	}
	return json.Marshal(map[string]any{
		"version": "0", "detail-type": inventory.ObjectCreated, "source": "aws.s3",
		"time": at.Format(time.RFC3339), "region": stack.LocalRegion, "resources": []string{"arn:aws:s3:::" + bucket},
		"detail": map[string]any{"version": "0", "bucket": named{bucket}, "object": object{key, size}, "reason": "PutObject"},
	})
}
