package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// selection is which logs a logs command works on.
type selection struct {
	tasks, requests, deploys []string
	since, until             string
	filter                   logFilter
}

func (s *selection) register(f *pflag.FlagSet) {
	f.StringArrayVar(&s.tasks, "task", nil, "logs of this task id (repeatable)")
	f.StringArrayVar(&s.requests, "request", nil, "logs of this request's tasks (repeatable)")
	f.StringArrayVar(&s.deploys, "deploy", nil, "with one --request: only this deploy's tasks (repeatable)")
	f.StringVar(&s.since, "since", "", "from this long ago (15m, 1h30m, 7d) or this instant (2026-11-24T08:00:00+01:00; without a zone, local time; a date alone is local midnight); default the service's (30 days for requests)")
	f.StringVar(&s.until, "until", "", "up to this long ago or this instant (exclusive); default now")
	s.filter.register(f)
}

// parseWhen reads --since and --until: a duration before now, or a date
// (local midnight), a local date and time, or an RFC 3339 instant. The
// instant is sent as it is, to the millisecond: the service keeps exactly
// the logs of the window.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := parseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageError("--%s %q is neither a duration (15m, 1h30m, 7d) nor a time (2026-11-21, 2026-11-21T08:00, 2026-11-21T08:00:00Z)", flag, s)
}

// request is the search the selection names.
func (s *selection) request(now time.Time) (client.SearchRequest, error) {
	var req client.SearchRequest
	if len(s.tasks) == 0 && len(s.requests) == 0 {
		return req, usageError("name the logs: --task ID, or --request ID (with --deploy ID)")
	}
	if len(s.deploys) > 0 && len(s.requests) != 1 {
		return req, usageError("--deploy needs exactly one --request")
	}
	req.TaskIDs = s.tasks
	if len(s.requests) > 0 {
		req.RequestsAndDeploys = map[string][]string{}
		for _, r := range s.requests {
			req.RequestsAndDeploys[r] = append([]string{}, s.deploys...)
		}
	}
	start, err := parseWhen("since", s.since, now)
	if err != nil {
		return req, err
	}
	end, err := parseWhen("until", s.until, now)
	if err != nil {
		return req, err
	}
	if !start.IsZero() {
		req.Start = start.UnixMilli()
	}
	if !end.IsZero() {
		req.End = end.UnixMilli()
	}
	if req.Start != 0 && req.End != 0 && req.Start >= req.End {
		return req, usageError("--since %s is not before --until %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return req, nil
}

// find returns the selected logs, oldest first (ties by key), so that cat
// and grep read them in the order they were written.
func (a *app) find(ctx context.Context, s *selection) ([]client.Log, error) {
	if err := s.filter.check(); err != nil {
		return nil, err
	}
	req, err := s.request(time.Now())
	if err != nil {
		return nil, err
	}
	c, err := a.client(ctx)
	if err != nil {
		return nil, err
	}
	logs, err := c.SearchAllLogs(ctx, req)
	if err != nil {
		return nil, err
	}
	logs = slices.DeleteFunc(logs, func(l client.Log) bool { return !s.filter.keeps(l) })
	slices.SortFunc(logs, func(x, y client.Log) int {
		if x.LastModified != y.LastModified {
			return int(x.LastModified - y.LastModified)
		}
		return strings.Compare(x.Key, y.Key)
	})
	return logs, nil
}

func (a *app) logsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "List, fetch, print and search task logs",
		Long: `Task logs are found by task, request, or request and deploy, in a window
(--since, --until), and kept by file name and task host (--file, --host
globs). They are downloaded through the presigned links the
API answers with: fleetctl never needs S3 credentials.

The window is exact, to the millisecond, however narrow: a log is in it
when its span overlaps it, the span running from its starttime (else the
time in its key, else its last modification) to its endtime (else its last
modification). A log that ran across --since is in; one that starts at
--until is not.`,
		Example: `  fleetctl logs ls --request web-api --since 1h
  fleetctl logs ls --request web-api --since 2026-11-24T08:00:00+01:00 --until 2026-11-24T10:00:00+01:00
  fleetctl logs fetch --request web-api --since 7d -j 8
  fleetctl logs grep --request web-api --since 15m -i 'timeout'`,
	}
	cmd.Args = func(cmd *cobra.Command, argv []string) error {
		if len(argv) > 0 {
			return unknownCommand(cmd, argv[0])
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	cmd.AddCommand(a.logsLsCommand(), a.logsFetchCommand(), a.logsCatCommand(), a.logsGrepCommand(), a.logsFollowCommand())
	return cmd
}

func (a *app) logsLsCommand() *cobra.Command {
	var sel selection
	var output string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the matching logs, oldest first",
		Long: `Lists the matching logs, oldest first: a table of modification time, size
and key (control characters in a key shown escaped), or with -o json the
logs as the API answers them, presigned links included.`,
		Example: `  fleetctl logs ls --task web-api-v42-1793491200000-0-node17-us_east_1a
  fleetctl logs ls --request web-api --since 90m
  fleetctl logs ls --request web-api --deploy v42 --since 2026-11-24T08:00 --until 2026-11-24T10:00
  fleetctl logs ls --request web-api --since 7d -o json | jq -r '.[].key'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				output = "json"
			}
			if output != "table" && output != "json" {
				return usageError("output %q is none of table, json", output)
			}
			logs, err := a.find(cmd.Context(), &sel)
			if err != nil {
				return err
			}
			if output == "json" {
				if logs == nil {
					logs = []client.Log{}
				}
				return writeJSON(a.stdout, logs)
			}
			rows := [][]string{{"MODIFIED", "SIZE", "KEY"}}
			var total int64
			for _, l := range logs {
				rows = append(rows, []string{when(l.LastModified), bytesHuman(l.Size), l.Key})
				total += l.Size
			}
			writeTable(a.stdout, visibleRows(rows), nil)
			if isTerminal(a.stdout) {
				fmt.Fprintf(a.stdout, "%d logs, %s\n", len(logs), bytesHuman(total))
			}
			return nil
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (the logs with their presigned links)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the same as -o json")
	cmd.Flags().MarkHidden("json")
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *app) logsFetchCommand() *cobra.Command {
	var sel selection
	var jobs int
	var printPaths, print0 bool
	cmd := &cobra.Command{
		Use:   "fetch",
		Short: "Download the matching logs into the cache directory, in parallel",
		Long: `Downloads every matching log into the cache directory (--cache-dir), under
the endpoint's host and the log's key. Logs already complete there are
skipped; partial downloads resume where they stopped. On a terminal it shows
one progress bar per file and a total; otherwise it is silent.

Each key maps to its own path inside the directory: a key segment that is
empty, ".", "..", starts with a dot, or holds bytes other than lower-case
letters, digits and -_.,+=@ is escaped (%2E, %0A); one with upper-case
letters or too long for a file name gets a hash appended (%~...).

A log that cannot be fetched is named on stderr, one line each, and the
others are still fetched; the exit code is then 8.`,
		Example: `  fleetctl logs fetch --request web-api --since 7d
  fleetctl logs fetch --task web-api-v42-1793491200000-0-node17-us_east_1a -j 16
  fleetctl logs fetch --request web-api --since 1h30m --print0 | xargs -0 zgrep -l panic`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobs < 1 {
				return usageError("-j %d: at least 1", jobs)
			}
			logs, err := a.find(cmd.Context(), &sel)
			if err != nil {
				return err
			}
			cache, err := a.cache()
			if err != nil {
				return err
			}
			// The same key in two buckets is one file of the cache:
			// fetched once.
			seen := map[string]bool{}
			logs = slices.DeleteFunc(logs, func(l client.Log) bool {
				dup := seen[l.Key]
				seen[l.Key] = true
				return dup
			})
			progress := isTerminal(a.stderr)
			stats, failed, err := cache.fetchAll(cmd.Context(), logs, jobs, a.stderr, progress)
			if err != nil {
				return err
			}
			if progress {
				fmt.Fprintf(a.stderr, "%d logs in %s: %d fetched (%s), %d already there\n", len(logs), termtext.Visible(displayPath(cache.dir)), stats.fetched, bytesHuman(stats.bytes), stats.cached)
			}
			if printPaths || print0 {
				for _, l := range logs {
					if slices.ContainsFunc(failed, func(f fetchFailure) bool { return f.key == l.Key }) {
						continue
					}
					if print0 {
						fmt.Fprint(a.stdout, cache.path(l.Key)+"\x00")
					} else {
						fmt.Fprintln(a.stdout, termtext.Visible(cache.path(l.Key)))
					}
				}
			}
			return a.failed("fetched", len(logs), failed)
		},
	}
	sel.register(cmd.Flags())
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 8, "downloads at once")
	cmd.Flags().BoolVar(&printPaths, "print", false, "print the local path of every log fetched, one a line (control characters escaped)")
	cmd.Flags().BoolVar(&print0, "print0", false, "print the local path of every log fetched, each ended by a NUL byte (for xargs -0)")
	cmd.MarkFlagsMutuallyExclusive("print", "print0")
	return cmd
}

func (a *app) logsCatCommand() *cobra.Command {
	var sel selection
	cmd := &cobra.Command{
		Use:   "cat",
		Short: "Write the matching logs to stdout, oldest first, gunzipping .gz",
		Example: `  fleetctl logs cat --task web-api-v42-1793491200000-0-node17-us_east_1a
  fleetctl logs cat --request web-api --since 15m | less
  fleetctl logs cat --request web-api --since 2026-11-24T09:00:00Z --until 2026-11-24T09:30:00Z`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			logs, err := a.find(cmd.Context(), &sel)
			if err != nil {
				return err
			}
			cache, err := a.cache()
			if err != nil {
				return err
			}
			var failed []fetchFailure
			for _, l := range logs {
				if err := cache.copyTo(cmd.Context(), a.stdout, l); err != nil {
					if cmd.Context().Err() != nil {
						return err
					}
					failed = append(failed, fetchFailure{l.Key, err})
				}
			}
			return a.failed("printed", len(logs), failed)
		},
	}
	sel.register(cmd.Flags())
	return cmd
}

func (a *app) logsGrepCommand() *cobra.Command {
	var sel selection
	var o grepOptions
	var jobs, around int
	cmd := &cobra.Command{
		Use:   "grep PATTERN",
		Short: "Search the matching logs in parallel; prints key:line:text",
		Long: `Searches every matching log (from the cache when it is complete there,
streamed through its presigned link otherwise), several at once, gunzipping
.gz, and prints key:line:text for each line that matches, in the order of
logs ls. With -A, -B or -C, lines of context are printed as key-line-text
and groups apart are separated by a -- line, as grep does. PATTERN is a regular expression (Go syntax, as grep -E), or a
fixed string with -F. Exit code 1 when no line matched, as grep.`,
		Example: `  fleetctl logs grep --request web-api --since 1h 'status=5[0-9][0-9]'
  fleetctl logs grep --task web-api-v42-1793491200000-0-node17-us_east_1a -i -c timeout
  fleetctl logs grep --request web-api -l -F 'OutOfMemoryError'`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if jobs < 0 {
				return usageError("-j %d: at least 1", jobs)
			}
			if o.before < 0 || o.after < 0 || around < 0 {
				return usageError("-A, -B, -C: a number of lines, 0 or more")
			}
			if !cmd.Flags().Changed("before-context") {
				o.before = around
			}
			if !cmd.Flags().Changed("after-context") {
				o.after = around
			}
			m, err := newMatcher(argv[0], o)
			if err != nil {
				return usageError("pattern %q: %v", argv[0], err)
			}
			logs, err := a.find(cmd.Context(), &sel)
			if err != nil {
				return err
			}
			cache, err := a.cache()
			if err != nil {
				return err
			}
			found, failed, err := grepAll(cmd.Context(), cache, logs, m, o, jobs, a.stdout)
			if err != nil {
				return err
			}
			if err := a.failed("searched", len(logs), failed); err != nil {
				return err
			}
			if !found {
				return exitError{code: exitNoMatch}
			}
			return nil
		},
	}
	sel.register(cmd.Flags())
	f := cmd.Flags()
	f.BoolVarP(&o.ignoreCase, "ignore-case", "i", false, "ignore case")
	f.BoolVarP(&o.invert, "invert-match", "v", false, "select the lines that do not match")
	f.BoolVarP(&o.count, "count", "c", false, "print key:count of selected lines per log")
	f.BoolVarP(&o.filesOnly, "files-with-matches", "l", false, "print only the keys of logs with a selected line")
	f.BoolVarP(&o.fixed, "fixed-strings", "F", false, "PATTERN is a fixed string")
	f.IntVarP(&o.after, "after-context", "A", 0, "print this many lines after each selected line (key-line-text), -- between groups")
	f.IntVarP(&o.before, "before-context", "B", 0, "print this many lines before each selected line")
	f.IntVarP(&around, "context", "C", 0, "print this many lines before and after each selected line")
	f.IntVarP(&jobs, "jobs", "j", 0, "logs searched at once (default: the number of CPUs, at least 4)")
	return cmd
}

// failed reports the logs that could not be done, one line each with its
// key, and ends with exit code 8 when there were any.
func (a *app) failed(done string, total int, failed []fetchFailure) error {
	if len(failed) == 0 {
		return nil
	}
	for _, f := range failed {
		fmt.Fprintf(a.stderr, "fleetctl: %s: %s\n", termtext.Visible(f.key), message(f.err))
	}
	return exitError{code: exitSomeLogs, msg: fmt.Sprintf("%d of %d logs could not be %s", len(failed), total, done)}
}

// cache returns the log cache of the endpoint in effect.
func (a *app) cache() (*cache, error) {
	u, err := url.Parse(a.settings.endpoint)
	if err != nil || u.Host == "" {
		return nil, usageError("endpoint %q is not a URL", a.settings.endpoint)
	}
	dir := filepath.Join(a.settings.cacheDir, strings.ReplaceAll(u.Host, ":", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return newCache(dir, a.settings.timeout), nil
}
