// Command logbackfill indexes what the local log buckets already hold into
// the task-log index (docs/behaviour.md "Task-log index"), a page of keys
// at a time, as IndexerFunction would from their events. It needs the
// emulator `make run` started. It is safe to run while events arrive, and
// to stop and resume: each page prints the key to resume after (-after).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/logindex"
	"github.com/fleetops/fleet/shared/logstore"
)

func main() {
	after := flag.String("after", "", "resume after this key (of the first bucket)")
	page := flag.Int("page", 1000, "keys per step")
	flag.Parse()
	if err := run(context.Background(), *after, *page); err != nil {
		fmt.Fprintln(os.Stderr, "logbackfill:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, after string, page int) error {
	local, err := stack.Up(ctx, stack.Addr())
	if err != nil {
		return err
	}
	defer local.Close()
	if local.Moto.Started {
		return fmt.Errorf("nothing runs on %s: start the local stack first (make run)", local.Moto.Endpoint)
	}
	env, err := local.Template.FunctionEnv("IndexerFunction", stack.LocalName)
	if err != nil {
		return err
	}
	cfg, err := config.LoadIndexer(func(name string) string { return env[name] })
	if err != nil {
		return err
	}
	store := logstore.New(local.S3, s3.NewPresignClient(local.S3))
	x := logindex.NewIndexer(store, logindex.NewTable(local.DynamoDB, cfg.Table), cfg.Format, cfg.Buckets,
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	began := time.Now()
	for _, bucket := range cfg.Buckets {
		steps := 0
		for done := false; !done; steps++ {
			if after, done, err = x.Backfill(ctx, store, bucket, after, page); err != nil {
				return fmt.Errorf("%w (resume with -after %q)", err, after)
			}
			fmt.Fprintf(os.Stderr, "logbackfill: %s: %d pages, after %q (%.1fs)\n", bucket, steps+1, after, time.Since(began).Seconds())
		}
		after = ""
	}
	return nil
}
