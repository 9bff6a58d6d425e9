package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// historyLimit is the longest history the service answers: a diff
// compares histories whole.
const historyLimit = 10000

// diffOptions are the flags of fleetctl diff.
type diffOptions struct {
	old, new                 string
	sample, logSample        int
	seed                     string
	tasks, requests, deploys []string
	maxDiffs, concurrency    int
	settle                   time.Duration
	output                   string
}

func (a *app) diffCommand() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff --old SOURCE --new SOURCE",
		Short: "Ask two APIs the same questions and print where they answer differently",
		Long: `Asks two APIs the same questions and prints where their answers differ,
field by field: shadow reads before clients move from one API to the other
(the old scheduler's and this service, or two deployments). A SOURCE is an
http(s) URL, asked with the authentication in effect, or the name of a
profile of the config file, asked with the profile's own endpoint and
authentication.

The questions:
  - the list of slaves (GET /api/slaves/) and each of its seven state
    filters (?state=), records matched by id;
  - each slave's details and history (?limit=10000), histories entry by
    entry, newest first; --sample N compares N slaves only, the same ones
    on every run with the same --seed (drawn by a hash of seed and id);
  - the expiring changes, matched by machineId;
  - the log lookups of --task, --request and --deploy REQUEST/DEPLOY, and
    with --log-sample N those of N tasks drawn from the first page of a
    search of them on the old API; asked without presigned URLs (list=true)
    and matched by key.

Answers are compared as JSON, not as the client's types, so that a field
only one side sends is seen. Numbers compare by value (16 and 16.0 are one
number). Ignored, because they necessarily differ between two deployments:
a slave's sequence (this service's position in its own change feed; the
old scheduler has none, and two deployments number apart) and the
presigned log URLs (getUrl, downloadUrl). Everything else is compared.

One line per difference, in a stable order (question, then id, then
field), at most --max-diffs per question, then a summary line:

  slave S9: only in old
  list state=FROZEN: S3 only in new
  slave S1 details: currentState.user: old "a@x" new "b@x"
  history S1[0].message: old "kernel upgrade" new (absent)
  logs task T: K: size: old 5120 new 5121

Text from either API is shown with control characters escaped (\x1b, \n);
-o json prints one JSON document whose differences carry both values
exactly.

Each question is asked of both APIs at the same moment. The lists, each a
read of the whole fleet, are asked one after another; then --concurrency
questions at once, so each API serves at most that many reads at once
(details and history of a slave are one question). The fleet may
move while it is read: a slave changed between two reads differs. --settle
2s asks every question whose answers differed once more after that wait,
and reports the second answers. A read that fails on one side after the
client's retries is named on stderr and the rest goes on; the list failing
stops the diff, as the slaves to read come from it.

Exit codes: 0 the same, 1 different (as diff(1); logs grep's "found
nothing" too), and fleetctl's codes for failures (2 usage, 4 not found,
5 auth, 6 unavailable, 7 other): a failed read wins over differences.`,
		Example: `  fleetctl diff --old https://scheduler.example.com --new prod
  fleetctl diff --old legacy --new prod --sample 200 --seed week-48 --settle 2s
  fleetctl diff --old legacy --new prod --request web-api --log-sample 20
  fleetctl diff --old legacy --new prod -o json | jq '.differences[] | select(.question == "history")'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return a.diff(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.old, "old", "", "the API moved from: an http(s) URL (with the authentication in effect) or a profile of the config file")
	f.StringVar(&o.new, "new", "", "the API moved to: a URL or a profile")
	f.IntVar(&o.sample, "sample", 0, "compare the details and history of N slaves, the same N on every run with one --seed (default every slave)")
	f.StringVar(&o.seed, "seed", "", "what --sample and --log-sample draw with: another seed, another sample")
	f.StringArrayVar(&o.tasks, "task", nil, "compare this task's log lookup (repeatable)")
	f.StringArrayVar(&o.requests, "request", nil, "compare this request's log lookup (repeatable)")
	f.StringArrayVar(&o.deploys, "deploy", nil, "compare this deploy's log lookup, given as REQUEST/DEPLOY (repeatable)")
	f.IntVar(&o.logSample, "log-sample", 0, "also compare the lookups of N tasks drawn from the first page of a search of --task, --request and --deploy on the old API")
	f.IntVar(&o.maxDiffs, "max-diffs", 100, "print at most N differences per question, then how many more (0: all)")
	f.IntVar(&o.concurrency, "concurrency", 8, "questions asked at once, each of both APIs at the same moment")
	f.DurationVar(&o.settle, "settle", 0, "ask the questions whose answers differ once more after this wait (2s), and report the second answers")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o diffOptions) check() error {
	switch {
	case o.old == "" || o.new == "":
		return usageError("name both APIs: --old SOURCE --new SOURCE (a URL or a profile)")
	case o.output != "text" && o.output != "json":
		return usageError("output %q is none of text, json", o.output)
	case o.sample < 0 || o.logSample < 0 || o.maxDiffs < 0:
		return usageError("--sample, --log-sample and --max-diffs are counts, 0 or more")
	case o.concurrency < 1:
		return usageError("--concurrency %d: at least 1", o.concurrency)
	case o.settle < 0:
		return usageError("--settle %s: a wait, 0 or more", o.settle)
	case o.logSample > 0 && len(o.tasks)+len(o.requests)+len(o.deploys) == 0:
		return usageError("--log-sample draws tasks from a search of --task, --request or --deploy: name one")
	}
	for _, d := range o.deploys {
		if r, dep, ok := strings.Cut(d, "/"); !ok || r == "" || dep == "" {
			return usageError("--deploy %q is not REQUEST/DEPLOY", d)
		}
	}
	return nil
}

// differ asks the two APIs the same questions.
type differ struct {
	old, new *client.Client
	settle   time.Duration
	maxDiffs int
	// concurrency bounds the questions asked at once after the lists.
	concurrency int
}

// question is one thing asked of both APIs: it answers the differences
// and the failed reads of one asking.
type question func(ctx context.Context) outcome

// outcome is what asking a question found.
type outcome struct {
	diffs    []difference
	more     map[string]int // differences beyond --max-diffs, by question
	failures []failure
	shared   []string // a list's: the ids on both sides, sorted
	records  int      // the expiring changes': the machines with one on either side
}

// difference is one place where the APIs answered differently: in the
// answer to question, the record id (a slave, a machine, a log key; "" for
// the answer as a whole), at the delta's path.
type difference struct {
	question, id string
	delta
}

// failure is a read that failed on one side, after the client's retries.
type failure struct {
	question, id, side string
	err                error
}

func (f failure) line() string {
	return subject(f.question, f.id) + ": " + f.side + ": " + describe(f.err)
}

// subject names the record a line is about: "slave S1 details",
// "history S1", "expiring S1", "list state=FROZEN: S3", "logs task T: K",
// or the question alone for its whole answer.
func subject(question, id string) string {
	q, id := termtext.Visible(question), termtext.Visible(id)
	switch {
	case id == "":
		return q
	case question == "details":
		return "slave " + id + " details"
	case question == "history" || question == "expiring":
		return q + " " + id
	}
	return q + ": " + id
}

// line is the difference for a terminal.
func (d difference) line() string {
	s := subject(d.question, d.id)
	if d.path == "" && (d.old == absent) != (d.new == absent) {
		side := "old"
		if d.old == absent {
			side = "new"
		}
		switch {
		case d.question == "list" && d.id != "":
			return "slave " + termtext.Visible(d.id) + ": only in " + side
		case strings.HasPrefix(d.question, "list ") || strings.HasPrefix(d.question, "logs "):
			return s + " only in " + side
		}
		return s + ": only in " + side
	}
	p := termtext.Visible(d.path)
	if p != "" && !strings.HasPrefix(p, "[") {
		p = ": " + p
	}
	return s + p + ": old " + shown(d.old) + " new " + shown(d.new)
}

// reply is one API's answer to a read, decoded for comparison, or why
// there is none.
type reply struct {
	value any
	err   error
}

// read is one read of an API, its answer as the service sent it.
type read func(context.Context, *client.Client) (json.RawMessage, error)

// both makes a read of the two APIs at the same moment, so that a moving
// fleet has as little time as possible to move between them.
func (d *differ) both(ctx context.Context, r read) (old, new reply) {
	get := func(c *client.Client) reply {
		raw, err := r(ctx, c)
		if err != nil {
			return reply{err: err}
		}
		v, err := decodeJSON(raw)
		return reply{v, err}
	}
	done := make(chan struct{})
	go func() {
		old = get(d.old)
		close(done)
	}()
	new = get(d.new)
	<-done
	return old, new
}

// readFailed records the sides whose read failed and says whether one did.
func (o *outcome) readFailed(question, id string, old, new reply) bool {
	if old.err != nil {
		o.failures = append(o.failures, failure{question, id, "old", old.err})
	}
	if new.err != nil {
		o.failures = append(o.failures, failure{question, id, "new", new.err})
	}
	return old.err != nil || new.err != nil
}

func (o *outcome) add(question, id string, deltas []delta) {
	for _, d := range deltas {
		o.diffs = append(o.diffs, difference{question, id, d})
	}
}

// trimmed keeps the first limit differences of each question (all for
// 0) and counts the others, so that a diff holds no more than it prints.
func (o outcome) trimmed(limit int) outcome {
	if limit == 0 {
		return o
	}
	kept := map[string]int{}
	var diffs []difference
	for _, d := range o.diffs {
		if kept[d.question] < limit {
			kept[d.question]++
			diffs = append(diffs, d)
			continue
		}
		if o.more == nil {
			o.more = map[string]int{}
		}
		o.more[d.question]++
	}
	o.diffs = diffs
	return o
}

// list is the question of the list of slaves, of one state unless state
// is empty.
func (d *differ) list(state string) question {
	name := "list"
	if state != "" {
		name = "list state=" + state
	}
	return func(ctx context.Context) outcome {
		old, new := d.both(ctx, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			return c.ListSlavesRaw(ctx, state)
		})
		var out outcome
		if out.readFailed(name, "", old, new) {
			return out
		}
		out.diffs, out.shared, _ = compareRecords(name, "id", old.value, new.value, "sequence")
		return out
	}
}

// slave is the question of one slave's details and history. A slave one
// side no longer knows (404) is only on the other.
func (d *differ) slave(id string) question {
	return func(ctx context.Context) outcome {
		var out outcome
		old, new := d.both(ctx, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			return c.GetSlaveRaw(ctx, id)
		})
		old, new = gone(old), gone(new)
		if !out.readFailed("details", id, old, new) {
			out.add("details", id, compareJSON(old.value, new.value, "sequence"))
		}
		old, new = d.both(ctx, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			return c.GetSlaveHistoryRaw(ctx, id, historyLimit)
		})
		if !out.readFailed("history", id, old, new) {
			out.add("history", id, compareJSON(old.value, new.value))
		}
		return out
	}
}

// gone reads a 404 as a slave that is not there.
func gone(r reply) reply {
	if client.IsNotFound(r.err) {
		return reply{value: absent}
	}
	return r
}

func (d *differ) expiring(ctx context.Context) outcome {
	old, new := d.both(ctx, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
		return c.ListExpiringRaw(ctx)
	})
	var out outcome
	if out.readFailed("expiring", "", old, new) {
		return out
	}
	out.diffs, _, out.records = compareRecords("expiring", "machineId", old.value, new.value)
	return out
}

// lookup is one log lookup: its question and its read.
type lookup struct {
	name string
	read read
}

func (d *differ) logs(l lookup) question {
	return func(ctx context.Context) outcome {
		old, new := d.both(ctx, l.read)
		var out outcome
		if out.readFailed(l.name, "", old, new) {
			return out
		}
		out.diffs, _, _ = compareRecords(l.name, "key", old.value, new.value, "getUrl", "downloadUrl")
		return out
	}
}

// lookups are the log lookups of the command line, each once, then with
// --log-sample those of tasks drawn from a search of them on the old API.
// Every lookup asks for no presigned URLs.
func (d *differ) lookups(ctx context.Context, o diffOptions) ([]lookup, outcome) {
	noURLs := client.LogQuery{ListOnly: true}
	var out []lookup
	seen := map[string]bool{}
	add := func(name string, r read) {
		if !seen[name] {
			seen[name] = true
			out = append(out, lookup{name, r})
		}
	}
	task := func(id string) {
		add("logs task "+id, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			return c.GetTaskLogsRaw(ctx, id, noURLs)
		})
	}
	for _, id := range o.tasks {
		task(id)
	}
	for _, r := range o.requests {
		add("logs request "+r, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			return c.GetRequestLogsRaw(ctx, r, noURLs)
		})
	}
	for _, rd := range o.deploys {
		r, dep, _ := strings.Cut(rd, "/")
		add("logs deploy "+rd, func(ctx context.Context, c *client.Client) (json.RawMessage, error) {
			return c.GetDeployLogsRaw(ctx, r, dep, noURLs)
		})
	}
	if o.logSample == 0 {
		return out, outcome{}
	}
	page, err := d.old.SearchLogs(ctx, o.search())
	if err != nil {
		return out, outcome{failures: []failure{{"logs search", "", "old", err}}}
	}
	var tasks []string
	for _, l := range page.Results {
		// Under the default key format a key names its task; a key
		// that does not is no task to draw.
		if m := fileName.FindStringSubmatch(path.Base(l.Key)); m != nil {
			tasks = append(tasks, m[1])
		}
	}
	slices.Sort(tasks)
	tasks = slices.Compact(tasks)
	for _, id := range sample(tasks, o.logSample, o.seed) {
		task(id)
	}
	return out, outcome{}
}

// search is the search --log-sample draws tasks from: the command line's
// tasks, requests and deploys, the largest first page, without URLs.
func (o diffOptions) search() client.SearchRequest {
	req := client.SearchRequest{TaskIDs: o.tasks, ListOnly: true, MaxPerPage: 1000}
	if len(o.requests)+len(o.deploys) > 0 {
		req.RequestsAndDeploys = map[string][]string{}
	}
	for _, rd := range o.deploys {
		r, dep, _ := strings.Cut(rd, "/")
		req.RequestsAndDeploys[r] = append(req.RequestsAndDeploys[r], dep)
	}
	for _, r := range o.requests {
		req.RequestsAndDeploys[r] = []string{} // the whole request
	}
	return req
}

// compareRecords compares two answers that are arrays of records with a
// distinct string field key (the list's ids, the expiring changes'
// machineId, the logs' key), records matched by it: a record one side
// lacks is one difference, those on both are compared field by field,
// in key order. It returns the differences, the keys on both sides and
// the number of keys. Answers that are not such arrays (two records with
// one key, say) are compared entry by entry, each entry as a record.
func compareRecords(question, key string, old, new any, ignore ...string) (diffs []difference, shared []string, keys int) {
	o, okOld := byKey(old, key)
	n, okNew := byKey(new, key)
	if !okOld || !okNew {
		return compareEntries(question, old, new, ignore...), nil, 0
	}
	all := keysOfBoth(o, n)
	var out outcome
	for _, k := range all {
		ov, nv := valueOr(o, k), valueOr(n, k)
		if ov != absent && nv != absent {
			shared = append(shared, k)
		}
		out.add(question, k, compareJSON(ov, nv, ignore...))
	}
	return out.diffs, shared, len(all)
}

// compareEntries compares two arrays entry by entry, leaving out the
// paths of ignore within each entry; anything else as one value.
func compareEntries(question string, old, new any, ignore ...string) []difference {
	var out outcome
	o, okOld := old.([]any)
	n, okNew := new.([]any)
	if !okOld || !okNew {
		out.add(question, "", compareJSON(old, new))
		return out.diffs
	}
	for i := range max(len(o), len(n)) {
		deltas := compareJSON(entryOr(o, i), entryOr(n, i), ignore...)
		for j, d := range deltas {
			deltas[j].path = under("["+strconv.Itoa(i)+"]", d.path)
		}
		out.add(question, "", deltas)
	}
	return out.diffs
}

// byKey indexes an array of objects by their string field key; false when
// the value is no such array or two of its records share a key.
func byKey(v any, key string) (map[string]any, bool) {
	records, ok := v.([]any)
	if !ok {
		return nil, false
	}
	m := make(map[string]any, len(records))
	for _, r := range records {
		obj, ok := r.(map[string]any)
		if !ok {
			return nil, false
		}
		k, ok := obj[key].(string)
		if _, dup := m[k]; !ok || dup {
			return nil, false
		}
		m[k] = obj
	}
	return m, true
}

// askAll asks every question, limit at once, and once more after --settle
// those whose answers differed, keeping the second outcome.
func (d *differ) askAll(ctx context.Context, qs []question, limit int) []outcome {
	out := make([]outcome, len(qs))
	every := make([]int, len(qs))
	for i := range qs {
		every[i] = i
	}
	d.ask(ctx, qs, every, out, limit)
	if d.settle == 0 {
		return out
	}
	var differed []int
	for i, o := range out {
		if len(o.diffs) > 0 {
			differed = append(differed, i)
		}
	}
	if len(differed) == 0 || wait(ctx, d.settle) != nil {
		return out
	}
	d.ask(ctx, qs, differed, out, limit)
	return out
}

// ask asks the questions of qs at indices into out, limit at once.
func (d *differ) ask(ctx context.Context, qs []question, indices []int, out []outcome, limit int) {
	var g errgroup.Group
	g.SetLimit(limit)
	for _, i := range indices {
		g.Go(func() error {
			out[i] = qs[i](ctx).trimmed(d.maxDiffs)
			return nil
		})
	}
	g.Wait()
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// diff runs fleetctl diff: the lists first, as the slaves to read come
// from the full list, then every other question, --concurrency at once.
func (a *app) diff(ctx context.Context, o diffOptions) error {
	d := &differ{concurrency: o.concurrency, settle: o.settle, maxDiffs: o.maxDiffs}
	var err error
	var oldAt, newAt string
	if d.old, oldAt, err = a.remote(ctx, o.old); err != nil {
		return err
	}
	if d.new, newAt, err = a.remote(ctx, o.new); err != nil {
		return err
	}
	// Each list reads the whole fleet: they are asked one at a time,
	// the full list first, so that no API serves 16 of them at once.
	lists := []question{d.list("")}
	r := &diffReport{max: o.maxDiffs, diffs: map[string][]difference{}, more: map[string]int{}, lists: 1 + len(client.States)}
	r.order = []string{"list"}
	for _, st := range client.States {
		lists = append(lists, d.list(string(st)))
		r.order = append(r.order, "list state="+string(st))
	}
	listed := d.askAll(ctx, lists, 1)
	full := listed[0]
	if len(full.failures) > 0 {
		f := full.failures[0]
		return exitError{code: exitCode(f.err), msg: f.line()}
	}
	lookups, searched := d.lookups(ctx, o)
	r.lookups = len(lookups)

	var qs []question
	ids := sample(full.shared, o.sample, o.seed)
	r.slaves, r.listed = len(ids), len(full.shared)
	for _, id := range ids {
		qs = append(qs, d.slave(id))
	}
	r.order = append(r.order, "details", "history", "expiring")
	qs = append(qs, d.expiring)
	for _, l := range lookups {
		qs = append(qs, d.logs(l))
		r.order = append(r.order, l.name)
	}
	for _, out := range listed {
		r.add(out)
	}
	r.add(searched)
	for _, out := range d.askAll(ctx, qs, d.concurrency) {
		r.add(out)
	}

	if o.output == "json" {
		err = writeJSON(a.stdout, r.document(oldAt, newAt))
	} else {
		err = r.write(a.stdout)
	}
	if err != nil {
		return err
	}
	for _, f := range r.failures {
		fmt.Fprintln(a.stderr, "fleetctl: "+termtext.Visible(f.line()))
	}
	switch {
	case len(r.failures) > 0:
		return exitError{code: exitCode(r.failures[0].err)}
	case r.total > 0:
		return exitError{code: exitDifferent}
	}
	return nil
}

// diffReport gathers the outcomes of a diff, in the order of its questions.
type diffReport struct {
	max      int
	order    []string                // the questions as printed
	diffs    map[string][]difference // at most max a question
	more     map[string]int          // the differences beyond them
	total    int
	failures []failure
	// what was compared
	slaves, listed, lists, expiring, lookups int
}

func (r *diffReport) add(o outcome) {
	for _, d := range o.diffs {
		r.total++
		if r.max > 0 && len(r.diffs[d.question]) >= r.max {
			r.more[d.question]++
			continue
		}
		r.diffs[d.question] = append(r.diffs[d.question], d)
	}
	for q, n := range o.more {
		r.more[q] += n
		r.total += n
	}
	r.failures = append(r.failures, o.failures...)
	r.expiring += o.records
}

// write prints a line per difference and the summary.
func (r *diffReport) write(w io.Writer) error {
	var b strings.Builder
	for _, q := range r.order {
		for _, d := range r.diffs[q] {
			b.WriteString(d.line() + "\n")
		}
		if n := r.more[q]; n > 0 {
			fmt.Fprintf(&b, "%s: … and %s more\n", termtext.Visible(q), thousands(n))
		}
	}
	b.WriteString(r.summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// summary is the last line: what was compared, and what was found.
func (r *diffReport) summary() string {
	slaves := counted(r.slaves, "slave", "slaves")
	if r.slaves < r.listed {
		slaves = thousands(r.slaves) + " of " + counted(r.listed, "slave", "slaves")
	}
	s := fmt.Sprintf("compared %s (details, history), %s, %s, %s: %s", slaves, counted(r.lists, "list", "lists"),
		counted(r.expiring, "expiring change", "expiring changes"), counted(r.lookups, "log lookup", "log lookups"),
		counted(r.total, "difference", "differences"))
	if len(r.failures) > 0 {
		s += ", " + counted(len(r.failures), "failed read", "failed reads")
	}
	return s
}

// document is the report as -o json prints it.
func (r *diffReport) document(oldAt, newAt string) any {
	type differenceJSON struct {
		Question string          `json:"question"`
		ID       string          `json:"id,omitempty"`
		Path     string          `json:"path,omitempty"`
		Old      json.RawMessage `json:"old,omitempty"` // absent: the old side has no such record or field
		New      json.RawMessage `json:"new,omitempty"`
	}
	type failureJSON struct {
		Question string `json:"question"`
		ID       string `json:"id,omitempty"`
		Side     string `json:"side"`
		Error    string `json:"error"`
	}
	type compared struct {
		Slaves          int `json:"slaves"`
		ListedSlaves    int `json:"listedSlaves"`
		Lists           int `json:"lists"`
		ExpiringChanges int `json:"expiringChanges"`
		LogLookups      int `json:"logLookups"`
	}
	doc := struct {
		Old         string           `json:"old"`
		New         string           `json:"new"`
		Compared    compared         `json:"compared"`
		Total       int              `json:"total"` // differences, those beyond --max-diffs included
		Differences []differenceJSON `json:"differences"`
		More        map[string]int   `json:"more,omitempty"` // by question, beyond --max-diffs
		Failures    []failureJSON    `json:"failures"`
	}{Old: oldAt, New: newAt, Compared: compared{r.slaves, r.listed, r.lists, r.expiring, r.lookups}, Total: r.total,
		Differences: []differenceJSON{}, Failures: []failureJSON{}}
	for _, q := range r.order {
		for _, d := range r.diffs[q] {
			doc.Differences = append(doc.Differences, differenceJSON{d.question, d.id, d.path, exactJSON(d.old), exactJSON(d.new)})
		}
	}
	if len(r.more) > 0 {
		doc.More = r.more
	}
	for _, f := range r.failures {
		doc.Failures = append(doc.Failures, failureJSON{f.question, f.id, f.side, describe(f.err)})
	}
	return doc
}

// counted is n and the noun for it: 1 slave, 1,000 slaves.
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
