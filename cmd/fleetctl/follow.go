package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// followOverlap is how far back each lookup of logs follow reaches before
// the previous one: a log that the service's index sees a few seconds after
// its upload is still among those that landed since the next lookup's
// start.
const followOverlap = time.Minute

// defaultFollowSince is how far back logs follow starts without --since.
const defaultFollowSince = "10m"

func (a *app) logsFollowCommand() *cobra.Command {
	var request, deploy, since string
	var filter logFilter
	var poll time.Duration
	var fetch bool
	cmd := &cobra.Command{
		Use:   "follow",
		Short: "Print a request's new logs as they land, until interrupted",
		Long: `Asks for the request's (or deploy's) logs that landed since the previous
ask, every --poll, and prints the key of each log not seen before, oldest
first; with --fetch it downloads each into the cache (as logs fetch does)
and prints its local path. A log is followed by when it landed (its upload),
not by its span, so a late upload is printed too, once, however long ago
its span ended. It starts with the logs that landed since --since (default
10m: a follow started just after a deploy shows the deploy's first logs;
--since 1s shows only new ones), says on stderr which window that is, and
runs until interrupted (exit code 130). Each ask reaches a minute
before the previous one, so a log that the service shows a few seconds
after its upload is still printed, once.`,
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
			window := "--since " + since
			if since == "" {
				since, window = defaultFollowSince, "the last "+defaultFollowSince+", --since's default"
			}
			start, err := parseWhen("since", since, time.Now())
			if err != nil {
				return err
			}
			what := "request " + request
			if deploy != "" {
				what += " deploy " + deploy
			}
			// Said first, on stderr: what the first keys printed are, so
			// that a screen of older logs is not taken for new ones.
			fmt.Fprintf(a.stderr, "fleetctl: following the logs of %s: first those that landed since %s (%s), then each new one as it lands\n",
				termtext.Visible(what), when(start.UnixMilli()), termtext.Visible(window))
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
	f.StringVar(&since, "since", "", "start with the logs that landed this long ago (15m, 1h30m; 1s: only new ones) or since this instant, as logs ls (default 10m)")
	f.DurationVar(&poll, "poll", 5*time.Second, "how often to look for new logs")
	f.BoolVar(&fetch, "fetch", false, "download each new log into the cache and print its local path")
	filter.register(f)
	return cmd
}

// follow asks for the logs that landed since start, every poll, and prints
// each new one once, until ctx ends. Each ask reaches followOverlap before
// the previous one; a landing (a key and its last modification) is
// remembered while it is within the asks' reach and forgotten after, when
// no ask can answer it again. A log written again is a new landing.
func (a *app) follow(ctx context.Context, c *client.Client, cache *cache, lookup func(context.Context, client.LogQuery) ([]client.Log, error), filter logFilter, start time.Time, poll time.Duration) error {
	type landing struct {
		key      string
		modified int64
	}
	seen := map[landing]bool{}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		polled := time.Now()
		logs, err := lookup(ctx, client.LogQuery{LandedSince: start, ListOnly: cache == nil})
		if err != nil {
			return err
		}
		logs = slices.DeleteFunc(logs, func(l client.Log) bool {
			return seen[landing{l.Key, l.LastModified}] || l.LastModified < start.UnixMilli() || !filter.keeps(l)
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
			seen[landing{l.Key, l.LastModified}] = true
		}
		if moved := polled.Add(-followOverlap); moved.After(start) {
			start = moved
		}
		for l := range seen {
			if l.modified < start.UnixMilli() {
				delete(seen, l)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// landed prints the new logs' keys, or fetches them and prints their paths.
func (a *app) landed(ctx context.Context, cache *cache, logs []client.Log) error {
	if cache == nil {
		for _, l := range logs {
			fmt.Fprintln(a.stdout, termtext.Visible(l.Key))
		}
		return nil
	}
	_, failed, err := cache.fetchAll(ctx, logs, 4, a.stderr, false)
	if err != nil {
		return err
	}
	for _, l := range logs {
		if i := slices.IndexFunc(failed, func(f fetchFailure) bool { return f.key == l.Key }); i >= 0 {
			fmt.Fprintf(a.stderr, "fleetctl: %s: %s\n", termtext.Visible(l.Key), message(failed[i].err))
			continue
		}
		fmt.Fprintln(a.stdout, termtext.Visible(cache.path(l.Key)))
	}
	return nil
}
