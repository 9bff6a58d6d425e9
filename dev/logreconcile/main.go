// Command logreconcile is make reconcile-logs: it makes the task-log index
// equal to what the local log buckets hold, running the template's
// ReconcileStateMachine (dev/reconcile) on each bucket, as the daily
// schedule or an operator starts it deployed (docs/behaviour.md
// "Reconciliation"). It needs the emulator make run started. It is safe to
// run while events arrive. Each bucket's finished batches are recorded in
// bin/dev/reconcile/<bucket>.jsonl until its execution succeeds:
// interrupted and run again, it reruns only the batches that had not
// finished, as redrive does deployed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fleetops/fleet/dev/reconcile"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "logreconcile:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	local, err := stack.UpWith(ctx, stack.Addr(), stack.Options{Command: "make reconcile-logs", Progress: out})
	if err != nil {
		return err
	}
	defer local.Close()
	if local.Moto.Started {
		return fmt.Errorf("nothing runs on %s: start the local stack first (make run)", local.Moto.Endpoint)
	}
	env, err := local.Template.FunctionEnv(reconcile.Function, stack.LocalName)
	if err != nil {
		return err
	}
	cfg, err := config.LoadIndexer(func(name string) string { return env[name] })
	if err != nil {
		return err
	}
	m, err := reconcile.Machine(ctx, local, reconcile.Clients{DynamoDB: local.DynamoDB, S3: local.S3})
	if err != nil {
		return err
	}
	for _, bucket := range cfg.Buckets {
		if err := bucketRun(ctx, out, local.Root, m, bucket); err != nil {
			return err
		}
	}
	return nil
}

// bucketRun reconciles one bucket, resuming its journal when an earlier
// run was interrupted, and removes the journal once the execution
// succeeds. It prints what the execution says it fixed.
func bucketRun(ctx context.Context, out io.Writer, root string, m *statemachine.Machine, bucket string) error {
	path := filepath.Join(root, "bin", "dev", "reconcile", bucket+".jsonl")
	journal, err := statemachine.OpenJournal(path)
	if err != nil {
		return err
	}
	if n := journal.Len(); n > 0 {
		fmt.Fprintf(out, "logreconcile: %s: resuming the interrupted execution: %d batches done (%s)\n", bucket, n, path)
	}
	m.Journal = journal
	began := time.Now()
	runs, totals, err := reconcile.Run(ctx, m, reconcile.Input(bucket, ""), func(t reconcile.Totals) {
		if t.Batches%10 == 0 {
			fmt.Fprintf(out, "logreconcile: %s: %s (%.1fs)\n", bucket, t, time.Since(began).Seconds())
		}
	})
	if err != nil {
		journal.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("%s: %w after %s; run make reconcile-logs again to resume", bucket, err, totals)
	}
	output, _ := json.Marshal(runs[0])
	fmt.Fprintf(out, "logreconcile: %s: done, %s in %.1fs\nlogreconcile: %s: output %s\n", bucket, totals, time.Since(began).Seconds(), bucket, output)
	return journal.Remove()
}
