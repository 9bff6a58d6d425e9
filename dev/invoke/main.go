// Command invoke runs one event through one function of template.yaml on this
// machine, against local DynamoDB, and prints the function's response:
//
//	go run ./dev/invoke -function SlavesFunction -event events/slaves-list.json \
//	    -binary bin/local/SlavesFunction/bootstrap
//
// (make invoke FN=SlavesFunction EVENT=events/slaves-list.json builds the
// binary and runs this.) The function gets the environment the template gives
// it, with tables named after their logical ids, overridden by the -env-vars
// file (sam local invoke's format), and AWS settings pointing at the emulator
// at -moto, which is started if nothing answers there and keeps its data only
// as long as this command runs. The response goes to stdout, the function's
// logs and timings to stderr; a function error exits with status 1.
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

	"github.com/fleetops/fleet/dev/lambdarun"
	"github.com/fleetops/fleet/dev/stack"
)

func main() {
	if err := run(); err != nil {
		var ferr *lambdarun.FunctionError
		if errors.As(err, &ferr) {
			body := ferr.Raw
			if len(body) == 0 {
				body, _ = json.Marshal(ferr)
			}
			fmt.Fprintf(os.Stderr, "function error: %s\n", pretty(body))
		} else {
			fmt.Fprintln(os.Stderr, "invoke:", err)
		}
		os.Exit(1)
	}
}

func run() error {
	var (
		function = flag.String("function", "", "logical id of the function in the template (required)")
		event    = flag.String("event", "", "file holding the event, - for stdin (required)")
		binary   = flag.String("binary", "", "bootstrap binary built for this machine (default bin/local/<function>/bootstrap)")
		template = flag.String("template", stack.TemplateFile, "SAM template")
		envVars  = flag.String("env-vars", "dev/env.local.json", "environment overrides, in sam local invoke's --env-vars format; empty for none")
		motoAddr = flag.String("moto", "127.0.0.1:4566", "address of the DynamoDB emulator; started there when nothing answers")
	)
	flag.Parse()
	if *function == "" || *event == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("-function and -event are required")
	}
	if *binary == "" {
		*binary = filepath.Join("bin", "local", *function, "bootstrap")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	payload, err := readEvent(*event)
	if err != nil {
		return err
	}
	tpl, err := stack.LoadTemplate(*template)
	if err != nil {
		return err
	}
	env, err := tpl.FunctionEnv(*function, stack.LocalName)
	if err != nil {
		return err
	}
	if *envVars != "" {
		if err := overlayEnvVars(env, *envVars, *function); err != nil {
			return err
		}
	}
	cfg, err := tpl.FunctionConfig(*function)
	if err != nil {
		return err
	}

	moto, err := stack.StartMoto(ctx, *motoAddr)
	if err != nil {
		return err
	}
	defer moto.Stop()
	if moto.Started {
		fmt.Fprintf(os.Stderr, "invoke: started moto at %s for this invocation (its data goes when it ends; keep one running with make run)\n", moto.Endpoint)
	}
	if err := tpl.CreateTables(ctx, stack.DynamoDBClient(moto.Endpoint), stack.LocalName); err != nil {
		return fmt.Errorf("create tables at %s: %w", moto.Endpoint, err)
	}
	aws, _ := stack.LocalAWS(moto.Endpoint)
	for k, v := range aws {
		env[k] = v
	}

	res, err := lambdarun.Function{
		Binary:     *binary,
		Name:       *function,
		Env:        env,
		MemorySize: cfg.MemorySize,
		Timeout:    cfg.Timeout,
		Logs:       os.Stderr,
	}.Invoke(ctx, payload)
	if res.Total > 0 {
		fmt.Fprintf(os.Stderr, "invoke: %s request %s: init %v, handler %v\n", *function, res.RequestID, res.Init, res.Handler())
	}
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", pretty(res.Response))
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

// overlayEnvVars applies a sam local --env-vars file to env: the "Parameters"
// object applies to every function, the object named after the function wins
// over it. As with sam local, only variables the template declares for the
// function are overridden.
func overlayEnvVars(env map[string]string, path, function string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("env vars: %w", err)
	}
	var file map[string]map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("env vars %s: %w", path, err)
	}
	for _, section := range []string{"Parameters", function} {
		for k, v := range file[section] {
			if _, declared := env[k]; !declared {
				continue
			}
			switch v := v.(type) {
			case string:
				env[k] = v
			case float64, bool:
				env[k] = fmt.Sprint(v)
			default:
				return fmt.Errorf("env vars %s: %s.%s is not a string", path, section, k)
			}
		}
	}
	return nil
}

// pretty indents JSON and leaves anything else as it is.
func pretty(b []byte) []byte {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return b
	}
	return out.Bytes()
}
