package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
)

// followOverlap is how far back each lookup of logs follow reaches before
// the previous one: a log that lands late (its upload took a while, or the
// service's index saw it seconds after the upload) is still in the next
// window.
const followOverlap = time.Minute

func (a *app) logsFollowCommand() *cobra.Command {
	var request, deploy, since string
	var filter logFilter
	var poll time.Duration
	var fetch bool
	cmd := &cobra.Command{
		Use:   "follow",
		Short: "Print a request's new logs as they land, until interrupted",
		Long: `Looks the request's (or deploy's) logs up every --poll, in a window that
moves with the clock, and prints the key of each log not seen before,
oldest first; with --fetch it downloads each into the cache (as logs fetch
does) and prints its local path. It starts with the logs of --since (default
10m) and runs until interrupted (exit code 130). Each lookup reaches a
minute before the previous one, so a log that the service shows a few
seconds after its upload is still printed, once.`,
		Example: `  fleetctl logs follow --request web-api
  fleetctl logs follow --request web-api --deploy v42 --file 'stderr*' --since 1h
  fleetctl logs follow --request web-api --host 'node1*' --fetch`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if request == "" {
				return usageError("name the logs: --request ID (with --deploy ID)")
			}
			if poll <= 0 {
				return usageError("--poll %s: not a positive duration", poll)
			}
			if err := filter.check(); err != nil {
				return err
			}
			if since == "" {
				since = "10m"
			}
			start, err := parseWhen("since", since, time.Now())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			var cache *cache
			if fetch {
				if cache, err = a.cache(); err != nil {
					return err
				}
			}
			return a.follow(ctx, c, cache, func(ctx context.Context, q client.LogQuery) ([]client.Log, error) {
				if deploy != "" {
					return c.GetDeployLogs(ctx, request, deploy, q)
				}
				return c.GetRequestLogs(ctx, request, q)
			}, filter, start, poll)
		},
	}
	f := cmd.Flags()
	f.StringVar(&request, "request", "", "follow this request's logs")
	f.StringVar(&deploy, "deploy", "", "only this deploy's logs")
	f.StringVar(&since, "since", "", "start with the logs from this long ago (15m, 1h30m) or this instant, as logs ls (default 10m)")
	f.DurationVar(&poll, "poll", 5*time.Second, "how often to look for new logs")
	f.BoolVar(&fetch, "fetch", false, "download each new log into the cache and print its local path")
	filter.register(f)
	return cmd
}

// follow looks logs up from start on, every poll, and prints each new one
// once, until ctx ends. A key is remembered while its span can still
// overlap the window and forgotten once it ended before the window's
// start; logs that ended before the start are dropped from every answer
// by the same rule, so that a service answering wider than asked (a whole
// month of keys) never has a forgotten log printed again.
func (a *app) follow(ctx context.Context, c *client.Client, cache *cache, lookup func(context.Context, client.LogQuery) ([]client.Log, error), filter logFilter, start time.Time, poll time.Duration) error {
	seen := map[string]int64{} // key → end of its span, forgotten once before the window
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		polled := time.Now()
		logs, err := lookup(ctx, client.LogQuery{Start: start, ListOnly: cache == nil})
		if err = a.partial(err); err != nil {
			return err
		}
		logs = slices.DeleteFunc(logs, func(l client.Log) bool {
			_, old := seen[l.Key]
			return old || spanEnd(l) < start.UnixMilli() || !filter.keeps(l)
		})
		slices.SortFunc(logs, func(x, y client.Log) int {
			if x.LastModified != y.LastModified {
				return int(x.LastModified - y.LastModified)
			}
			return strings.Compare(x.Key, y.Key)
		})
		if err := a.landed(ctx, cache, logs); err != nil {
			return err
		}
		for _, l := range logs {
			seen[l.Key] = spanEnd(l)
		}
		if moved := polled.Add(-followOverlap); moved.After(start) {
			start = moved
		}
		for k, at := range seen {
			if at < start.UnixMilli() {
				delete(seen, k)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// spanEnd is when a log's span ends, as the service reads it
// (docs/behaviour.md "Task logs"): its endtime, else its last
// modification. A log belongs to a window that starts at or before it.
func spanEnd(l client.Log) int64 {
	if l.EndTime != 0 {
		return l.EndTime
	}
	return l.LastModified
}

// landed prints the new logs' keys, or fetches them and prints their paths.
func (a *app) landed(ctx context.Context, cache *cache, logs []client.Log) error {
	if cache == nil {
		for _, l := range logs {
			fmt.Fprintln(a.stdout, visible(l.Key))
		}
		return nil
	}
	_, failed, err := cache.fetchAll(ctx, logs, 4, a.stderr, false)
	if err != nil {
		return err
	}
	for _, l := range logs {
		if i := slices.IndexFunc(failed, func(f fetchFailure) bool { return f.key == l.Key }); i >= 0 {
			fmt.Fprintf(a.stderr, "fleetctl: %s: %s\n", visible(l.Key), message(failed[i].err))
			continue
		}
		fmt.Fprintln(a.stdout, visible(cache.path(l.Key)))
	}
	return nil
}
