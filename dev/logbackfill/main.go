// Command logbackfill is make backfill-logs: it indexes what the local log
// buckets already hold into the task-log index, running the template's
// BackfillStateMachine (dev/backfill) on each bucket, as an operator starts
// it deployed (docs/behaviour.md "Backfill"). It needs the emulator make
// run started. It is safe to run while events arrive. Each bucket's
// finished batches are recorded in bin/dev/backfill/<bucket>.jsonl until
// its execution succeeds: interrupted and run again, it reruns only the
// batches that had not finished, as redrive does deployed.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fleetops/fleet/dev/backfill"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/dev/statemachine"
	"github.com/fleetops/fleet/shared/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "logbackfill:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	local, err := stack.UpWith(ctx, stack.Addr(), stack.Options{Command: "make backfill-logs", Progress: out})
	if err != nil {
		return err
	}
	defer local.Close()
	if local.Moto.Started {
		return fmt.Errorf("nothing runs on %s: start the local stack first (make run)", local.Moto.Endpoint)
	}
	env, err := local.Template.FunctionEnv(backfill.Function, stack.LocalName)
	if err != nil {
		return err
	}
	cfg, err := config.LoadIndexer(func(name string) string { return env[name] })
	if err != nil {
		return err
	}
	m, err := backfill.Machine(ctx, local, backfill.Clients{DynamoDB: local.DynamoDB, S3: local.S3})
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

// bucketRun backfills one bucket, resuming its journal when an earlier run
// was interrupted, and removes the journal once the execution succeeds.
func bucketRun(ctx context.Context, out io.Writer, root string, m *statemachine.Machine, bucket string) error {
	path := filepath.Join(root, "bin", "dev", "backfill", bucket+".jsonl")
	journal, err := statemachine.OpenJournal(path)
	if err != nil {
		return err
	}
	if n := journal.Len(); n > 0 {
		fmt.Fprintf(out, "logbackfill: %s: resuming the interrupted execution: %d batches done (%s)\n", bucket, n, path)
	}
	m.Journal = journal
	began := time.Now()
	totals, err := backfill.Run(ctx, m, backfill.Input(bucket, ""), func(t backfill.Totals) {
		if t.Batches%10 == 0 {
			fmt.Fprintf(out, "logbackfill: %s: %s (%.1fs)\n", bucket, t, time.Since(began).Seconds())
		}
	})
	if err != nil {
		journal.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("%s: %w after %s; run make backfill-logs again to resume", bucket, err, totals)
	}
	fmt.Fprintf(out, "logbackfill: %s: done, %s in %.1fs\n", bucket, totals, time.Since(began).Seconds())
	return journal.Remove()
}
