package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

const (
	// maxBatch is the most slaves one import request may hold.
	maxBatch = 100
	// maxBatchBytes bounds the JSON of one import request, below the
	// route's 4 MiB so that the envelope and a long history still fit.
	maxBatchBytes = 3584 << 10
	// batchAttempts is how often a batch is sent before it is reported
	// as failed; the client retries each attempt's 429 and 5xx itself.
	batchAttempts = 3
	// batchWait is the least time one attempt of a batch waits for its
	// answer (--timeout when longer): more than a deployed import route
	// takes (20 s) and API Gateway allows (29 s).
	batchWait = time.Minute
	// defaultRack is the rack the service gives a slave that names none.
	defaultRack = "DEFAULT"
)

// The results of one slave, beside the route's imported, unchanged,
// conflict and refused.
const (
	resultMoved       = "moved"        // changed at the source while it was read
	resultFailed      = "failed"       // its read or its batch failed
	resultWouldImport = "would-import" // --dry-run
)

// importFlags are the flags of import.
type importFlags struct {
	from, mode, output             string
	overrideLimit, dryRun, restart bool
	batch, concurrency             int
}

func (a *app) importCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "import --from SOURCE",
		Short: "Import a fleet, its histories and expiring changes, from another API",
		Long: `Imports every slave of another API into the one in effect, with its whole
history and its expiring change: from the old scheduler, or from another
deployment of this service, which speaks the same API. SOURCE is an http(s)
URL, spoken to with the authentication in effect, or the name of a profile
of the config file, with its own endpoint and authentication.

The source is read as the old API describes it: the slaves (GET
/api/slaves/), each one's history (GET /api/slaves/slave/{id}?limit=10000)
and the expiring changes (GET /api/slaves/expiring). Every field of those
answers that the import does not carry (a slave's typeName, say, which only
the old scheduler has) is named in the summary, with how many records held
it; only a slave's sequence, this service's own, goes unnamed. A slave whose
newest history entry is not its current state changed while it was read: it
is read again, and if it moved again it is left out, "moved during the
read" (import again). A history over 10,000 entries is not sent, as the
service refuses it; one of exactly 10,000 may have been cut by the read and
is named.

Slaves are sent --batch at a time (at most 100, and about 3.5 MB: a slave
with a long history makes a smaller batch), --concurrency batches at once,
as the source is read --concurrency slaves at once. A batch waits a minute
for its answer (--timeout when longer); one that fails is sent up to 3
times, with a growing wait, then reported with its slaves;
the others go on. The service answers each slave imported,
unchanged (stored so already), conflict (stored otherwise; --mode replace
replaces it) or refused, with its reason. Entries keep their times, users
and messages; an expiring change keeps its due time (startMillis and
durationMillis as read), and one already past due is applied by the
destination's next expiry run. The service's decommission limit applies to
slaves imported into STARTING_DECOMMISSION or DECOMMISSIONING; with
--override-limit they are imported regardless, and until enough of them
finish, every decommission is refused.

On a terminal a status line shows the progress, otherwise a line per batch
(on stderr); then a summary names each conflict and refusal with its
reason. -o json prints the summary and each slave's result as JSON.

An interrupted import resumes: after each batch, the slaves answered
imported or unchanged are written to a checkpoint (in "imports" beside the
--cache-dir directory, named by a hash of the two endpoints), and the same
command with the same source and destination skips them. --restart reads
and sends everything again. The checkpoint goes when every slave was
answered. Losing it costs only time: a slave stored so already is answered
unchanged. A slave skipped on resume is not read again, so a change at the
source since then needs --restart.

--dry-run writes nothing. The import has no dry run, so fleetctl compares
reads: the destination's list, then the history of each slave it holds and
its expiring change, with what the import would send. Each slave would be
imported, is unchanged, or is in conflict (the differences named). A slave
the service would refuse shows as would-import: only the import decides.

Exit codes: 0 every slave imported or unchanged; 3 a slave in conflict,
refused or moved during the read; 6 the source or the destination
unavailable (a read or a batch that failed, named; other failures have
their usual codes); 130 interrupted, the checkpoint written.`,
		Example: `  fleetctl import --from https://scheduler.example.com --dry-run
  fleetctl import --from old-scheduler --batch 50 --concurrency 2
  fleetctl --profile prod import --from staging --mode replace
  fleetctl import --from https://scheduler.example.com -o json | jq '.results[] | select(.result == "conflict")'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.importFleet(cmd.Context(), f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "the API to import from: an http(s) URL (with the authentication in effect) or a profile of the config file")
	fs.StringVar(&f.mode, "mode", "", "replace: a slave stored otherwise is replaced, not left in conflict")
	fs.BoolVar(&f.overrideLimit, "override-limit", false, "import slaves into STARTING_DECOMMISSION or DECOMMISSIONING even over the service's decommission limit")
	fs.IntVar(&f.batch, "batch", maxBatch, "slaves sent in one request (at most 100)")
	fs.IntVar(&f.concurrency, "concurrency", 4, "requests at once, to the source and to the destination")
	fs.BoolVar(&f.dryRun, "dry-run", false, "compare the source with the destination's reads, write nothing")
	fs.BoolVar(&f.restart, "restart", false, "ignore the checkpoint of an interrupted import: read and send everything")
	fs.StringVarP(&f.output, "output", "o", "text", "text or json")
	cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]string{"replace"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// check refuses flags that do not go together.
func (f importFlags) check() error {
	switch {
	case f.from == "":
		return usageError("import needs --from, the API to import from (see fleetctl import --help)")
	case f.mode != "" && f.mode != "replace":
		return usageError("--mode %q: the only mode is replace", f.mode)
	case f.batch < 1 || f.batch > maxBatch:
		return usageError("--batch %d: from 1 to %d", f.batch, maxBatch)
	case f.concurrency < 1:
		return usageError("--concurrency %d: at least 1", f.concurrency)
	case f.output != "text" && f.output != "json":
		return usageError("output %q is none of text, json", f.output)
	}
	return nil
}

// importOutcome is what became of one slave.
type importOutcome struct {
	ID     string `json:"id"`
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
}

// prepared is a slave read from the source, ready to be sent.
type prepared struct {
	pos  int // in the source's list
	imp  client.ImportedSlave
	size int // bytes of its JSON
}

// importRun is one run of import: its two APIs, and what it has done.
type importRun struct {
	a        *app
	f        importFlags
	src, dst *client.Client
	opts     client.ImportOptions
	expiring map[string]json.RawMessage // the source's expiring records, by machine
	cp       *checkpoint                // nil for a dry run

	// The destination as a dry run compares with.
	there         map[string]client.Slave
	thereExpiring map[string]client.Expiring

	mu       sync.Mutex
	outcomes map[int]importOutcome // by position in the source's list
	counts   map[string]int        // by result
	dropped  droppedTally
	notes    []string
	failure  error // the first read or batch that failed
	todo     int   // slaves this run is to answer
	batches  int   // batches made so far
	bar      bool  // the status line is on screen
}

// importFleet runs fleetctl import: read the source's list and expiring
// changes, then window by window read each slave's history and send (or,
// for a dry run, compare) --batch slaves a request, --concurrency at once.
// A window of --batch times --concurrency slaves keeps both sides busy,
// the next read while one is sent, and the memory held to two windows'
// histories, whatever the fleet's size.
func (a *app) importFleet(ctx context.Context, f importFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	// A batch is answered when its last slave is written: within the
	// route's 20 s deployed, longer on a slow store. An attempt given up
	// sooner is sent again while the first still writes, and both wait on
	// each other.
	attempt := max(a.settings.timeout, batchWait)
	dst, err := a.clientWith(ctx, client.Options{AttemptTimeout: attempt, CallTimeout: 2 * attempt, OnRetry: a.retrying})
	if err != nil {
		return err
	}
	src, from, err := a.remote(ctx, f.from)
	if err != nil {
		return err
	}
	if strings.TrimSuffix(from, "/") == strings.TrimSuffix(a.settings.endpoint, "/") {
		return usageError("--from %s is the destination itself", f.from)
	}
	r := &importRun{a: a, f: f, src: src, dst: dst, opts: client.ImportOptions{Replace: f.mode == "replace", OverrideLimit: f.overrideLimit},
		outcomes: map[int]importOutcome{}, counts: map[string]int{}, dropped: droppedTally{}}
	listed, err := elements(src.ListSlavesRaw(ctx, ""))
	if err != nil {
		return sideError("source", err)
	}
	exp, err := elements(src.ListExpiringRaw(ctx))
	if err != nil {
		return sideError("source", err)
	}
	r.expiring = byMachine(exp)
	ids := make([]string, len(listed))
	for i, raw := range listed {
		ids[i] = slaveID(raw)
	}
	listedIDs := map[string]bool{}
	for _, id := range ids {
		listedIDs[id] = true
	}
	for _, id := range sortedKeys(r.expiring) {
		if !listedIDs[id] {
			r.notes = append(r.notes, fmt.Sprintf("the expiring change of %s is not imported: the source lists no such slave", id))
		}
	}

	var pending []int
	if f.dryRun {
		if err := r.readDestination(ctx); err != nil {
			return err
		}
		pending = indexes(len(listed))
	} else {
		if r.cp, err = openCheckpoint(a.settings.cacheDir, from, a.settings.endpoint, f.restart); err != nil {
			return err
		}
		for i, id := range ids {
			if id == "" || !r.cp.has(id) {
				pending = append(pending, i)
			}
		}
		if done := len(listed) - len(pending); done > 0 {
			fmt.Fprintf(a.stderr, "resuming: %s of %s slaves already imported (--restart imports them again)\n", thousands(done), thousands(len(listed)))
		}
	}
	r.todo = len(pending)

	// A window is read from the source while the one before is sent to the
	// destination, so that both sides work at once; at most two windows'
	// histories are held.
	window := f.batch * f.concurrency
	readAhead := func(start int) chan []prepared {
		c := make(chan []prepared, 1)
		go func() { c <- r.read(ctx, listed, ids, pending[start:min(start+window, len(pending))]) }()
		return c
	}
	var ahead chan []prepared
	if len(pending) > 0 {
		ahead = readAhead(0)
	}
	for start := 0; start < len(pending) && ctx.Err() == nil; start += window {
		end := min(start+window, len(pending))
		ready := <-ahead
		ahead = nil
		if end < len(pending) {
			ahead = readAhead(end)
		}
		if f.dryRun {
			r.compare(ctx, ready)
		} else {
			r.send(ctx, ready, len(pending)-end)
		}
	}
	if ahead != nil {
		<-ahead // interrupted: what it read is left to do
	}
	r.clearBar()
	return r.finish(ctx, len(listed), len(listed)-len(pending))
}

// readDestination reads what a dry run compares with: the destination's
// slaves and expiring changes.
func (r *importRun) readDestination(ctx context.Context) error {
	slaves, err := r.dst.ListSlaves(ctx, "")
	if err != nil {
		return sideError("destination", err)
	}
	exp, err := r.dst.ListExpiring(ctx)
	if err != nil {
		return sideError("destination", err)
	}
	r.there, r.thereExpiring = map[string]client.Slave{}, map[string]client.Expiring{}
	for _, s := range slaves {
		r.there[s.ID] = s
	}
	for _, e := range exp {
		r.thereExpiring[e.MachineID] = e
	}
	return nil
}

// read reads the history of the slaves at positions, --concurrency at once,
// and returns those ready to be sent, in their order. The others get their
// outcome here.
func (r *importRun) read(ctx context.Context, listed []json.RawMessage, ids []string, positions []int) []prepared {
	ready := make([]*prepared, len(positions))
	var g errgroup.Group
	g.SetLimit(r.f.concurrency)
	for i, pos := range positions {
		g.Go(func() error {
			p, out := r.readSlave(ctx, listed[pos], ids[pos])
			if ctx.Err() != nil {
				return nil // interrupted: left to do
			}
			if out != nil {
				r.record(pos, *out)
				return nil
			}
			p.pos = pos
			ready[i] = &p
			return nil
		})
	}
	g.Wait()
	var out []prepared
	for _, p := range ready {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// readSlave reads one listed slave's history and builds its import. A
// slave that moved between the reads is read once more, record, history
// and expiring change; one that cannot be sent gets its outcome instead.
func (r *importRun) readSlave(ctx context.Context, raw json.RawMessage, id string) (prepared, *importOutcome) {
	switch {
	case !isObject(raw):
		return prepared{}, &importOutcome{ID: id, Result: "refused", Reason: "not sent: the source's record is not a JSON object"}
	case id == "":
		return prepared{}, &importOutcome{Result: "refused", Reason: "not sent: the source's record names no id"}
	}
	imp, dropped, err := r.build(ctx, raw, id, r.expiring[id])
	if err == nil && moved(imp) {
		var exp []json.RawMessage
		if raw, err = r.src.GetSlaveRaw(ctx, id); err == nil {
			exp, err = elements(r.src.ListExpiringRaw(ctx))
		}
		if client.IsNotFound(err) {
			return prepared{}, &importOutcome{ID: id, Result: resultMoved, Reason: "deleted at the source while it was read"}
		}
		if err == nil {
			imp, dropped, err = r.build(ctx, raw, id, byMachine(exp)[id])
		}
		if err == nil && moved(imp) {
			return prepared{}, &importOutcome{ID: id, Result: resultMoved,
				Reason: fmt.Sprintf("its current state (%s) was not its newest history entry, read twice: it changed at the source while it was read; import again", imp.Slave.CurrentState.State)}
		}
	}
	if err != nil {
		r.fail(err)
		return prepared{}, &importOutcome{ID: id, Result: resultFailed, Reason: "source: " + describe(err)}
	}
	switch n := len(imp.History); {
	case n > maxImportHistory:
		return prepared{}, &importOutcome{ID: id, Result: "refused",
			Reason: fmt.Sprintf("not sent: its history has %s entries, over the %s an import may hold", thousands(n), thousands(maxImportHistory))}
	case n == maxImportHistory:
		r.note(fmt.Sprintf("%s: its history has %s entries, the most one read answers: older entries, if the source holds any, are not imported", id, thousands(n)))
	}
	r.mu.Lock()
	r.dropped.add(dropped)
	r.mu.Unlock()
	return prepared{imp: imp, size: len(mustJSON(imp)) + 1}, nil
}

// build reads the history of the slave raw describes and builds its
// import (fromSource).
func (r *importRun) build(ctx context.Context, raw json.RawMessage, id string, expiring json.RawMessage) (client.ImportedSlave, []string, error) {
	history, err := elements(r.src.GetSlaveHistoryRaw(ctx, id, maxImportHistory))
	if err != nil {
		return client.ImportedSlave{}, nil, err
	}
	return fromSource(raw, history, expiring)
}

// makeBatches cuts slaves into batches, in their order, of at most n slaves
// and maxBytes of JSON each; a slave larger than maxBytes goes alone.
func makeBatches(slaves []prepared, n, maxBytes int) [][]prepared {
	var out [][]prepared
	var cur []prepared
	size := 0
	for _, s := range slaves {
		if len(cur) == n || (len(cur) > 0 && size+s.size > maxBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, s)
		size += s.size
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// send imports ready in batches, --concurrency at once; left is how many
// slaves later windows hold, for the count of batches.
func (r *importRun) send(ctx context.Context, ready []prepared, left int) {
	batches := makeBatches(ready, r.f.batch, maxBatchBytes)
	first := r.batches + 1
	r.batches += len(batches)
	total := r.batches + (left+r.f.batch-1)/r.f.batch
	var g errgroup.Group
	g.SetLimit(r.f.concurrency)
	for i, b := range batches {
		g.Go(func() error {
			r.sendBatch(ctx, first+i, total, b)
			return nil
		})
	}
	g.Wait()
}

// sendBatch imports one batch, records each slave's result, and writes the
// checkpoint.
func (r *importRun) sendBatch(ctx context.Context, n, total int, b []prepared) {
	slaves := make([]client.ImportedSlave, len(b))
	for i, p := range b {
		slaves[i] = p.imp
	}
	results, err := r.importBatch(ctx, n, slaves)
	if ctx.Err() != nil {
		return // interrupted: the batch is left to do
	}
	if err == nil && len(results) != len(b) {
		err = fmt.Errorf("the destination answered %d results for %d slaves", len(results), len(b))
	}
	if err != nil {
		r.fail(err)
		for _, p := range b {
			r.record(p.pos, importOutcome{ID: p.imp.Slave.ID, Result: resultFailed, Reason: fmt.Sprintf("batch %d: %s", n, describe(err))})
		}
		r.batchLine(fmt.Sprintf("batch %d/%d: %d slaves: failed: %s", n, total, len(b), message(err)))
		return
	}
	counts := map[string]int{}
	var done []string
	for i, res := range results {
		p := b[i]
		counts[res.Result]++
		r.record(p.pos, importOutcome{ID: p.imp.Slave.ID, Result: res.Result, Reason: res.Reason})
		if res.Result == "imported" || res.Result == "unchanged" {
			done = append(done, p.imp.Slave.ID)
		}
	}
	if err := r.cp.add(done); err != nil {
		r.note(fmt.Sprintf("%v: an interrupted import will send these slaves again", err))
	}
	r.batchLine(fmt.Sprintf("batch %d/%d: %d slaves: %s", n, total, len(b), resultCounts(counts, false)))
}

// importBatch sends one batch, again after a failure that a later attempt
// may not meet (unavailable, 5xx), up to batchAttempts times.
func (r *importRun) importBatch(ctx context.Context, n int, slaves []client.ImportedSlave) ([]client.ImportResult, error) {
	for attempt := 1; ; attempt++ {
		results, err := r.dst.Import(ctx, slaves, r.opts)
		if err == nil || attempt == batchAttempts || ctx.Err() != nil || !(client.IsUnavailable(err) || client.StatusOf(err) >= 500) {
			return results, err
		}
		wait := time.Second << (attempt - 1)
		wait = wait/2 + rand.N(wait/2)
		r.say(fmt.Sprintf("fleetctl: batch %d: sending again in %s (attempt %d of %d): %s", n, wait.Round(100*time.Millisecond), attempt+1, batchAttempts, message(err)))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// compare classifies the slaves of a dry run by the destination's reads:
// would-import, unchanged, or conflict with the differences named.
func (r *importRun) compare(ctx context.Context, ready []prepared) {
	var g errgroup.Group
	g.SetLimit(r.f.concurrency)
	for _, p := range ready {
		id := p.imp.Slave.ID
		there, ok := r.there[id]
		if !ok {
			r.record(p.pos, importOutcome{ID: id, Result: resultWouldImport})
			continue
		}
		g.Go(func() error {
			history, err := r.dst.GetSlaveHistory(ctx, id, maxImportHistory)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				r.fail(err)
				r.record(p.pos, importOutcome{ID: id, Result: resultFailed, Reason: "destination: " + describe(err)})
				return nil
			}
			slices.Reverse(history)
			var exp *client.Expiring
			if e, ok := r.thereExpiring[id]; ok {
				exp = &e
			} else if e := p.imp.Expiring; e != nil && e.DueAt() < time.Now().UnixMilli() {
				// The destination lists no change past due: it may have
				// applied it, or no longer list it. Only the import can
				// tell.
				exp = e
				r.note(fmt.Sprintf("%s: its expiring change fell due at %s and the destination lists none: not compared", id, when(e.DueAt())))
			}
			diff := differences(p.imp, there, history, exp)
			switch {
			case len(diff) == 0:
				r.record(p.pos, importOutcome{ID: id, Result: "unchanged"})
			case r.opts.Replace:
				r.record(p.pos, importOutcome{ID: id, Result: resultWouldImport, Reason: "replaces what the destination holds: " + strings.Join(diff, "; ")})
			default:
				r.record(p.pos, importOutcome{ID: id, Result: "conflict", Reason: strings.Join(diff, "; ")})
			}
			return nil
		})
	}
	g.Wait()
}

// differences names what the destination holds of a slave otherwise than
// its import would store it (docs/behaviour.md "Import": the rack DEFAULT
// when the import names none, a running-task count only while the slave
// drains, attributes never absent); nil when nothing differs. history is
// oldest first.
func differences(imp client.ImportedSlave, there client.Slave, history []client.StateUpdate, expiring *client.Expiring) []string {
	s := imp.Slave
	if s.RackID == "" {
		s.RackID = defaultRack
	}
	var diff []string
	field := func(name string, same bool, here, there any) {
		if !same {
			diff = append(diff, fmt.Sprintf("%s: %v at the source, %v at the destination", name, here, there))
		}
	}
	field("firstSeenAt", s.FirstSeenAt == there.FirstSeenAt, when(s.FirstSeenAt), when(there.FirstSeenAt))
	field("currentState", s.CurrentState == there.CurrentState, stateText(s.CurrentState), stateText(there.CurrentState))
	field("host", s.Host == there.Host, s.Host, there.Host)
	field("rackId", s.RackID == there.RackID, s.RackID, there.RackID)
	field("attributes", maps.Equal(s.Attributes, there.Attributes), jsonText(s.Attributes), jsonText(there.Attributes))
	field("resources", sameJSON(s.Resources, there.Resources), jsonText(s.Resources), jsonText(there.Resources))
	field("runningTasks", reflect.DeepEqual(s.RunningTasks, there.RunningTasks), countText(s.RunningTasks), countText(there.RunningTasks))
	if !slices.Equal(imp.History, history) {
		diff = append(diff, fmt.Sprintf("history: %d entries at the source, %d at the destination", len(imp.History), len(history)))
	}
	if !reflect.DeepEqual(imp.Expiring, expiring) {
		diff = append(diff, fmt.Sprintf("expiring: %s at the source, %s at the destination", expiringText(imp.Expiring), expiringText(expiring)))
	}
	return diff
}

func stateText(u client.StateUpdate) string {
	return fmt.Sprintf("%s since %s", u.State, when(u.Timestamp))
}

func jsonText(v any) string { return short(string(mustJSON(v)), 60) }

func countText(n *int) string {
	if n == nil {
		return "none"
	}
	return fmt.Sprint(*n)
}

func expiringText(e *client.Expiring) string {
	if e == nil {
		return "none"
	}
	return fmt.Sprintf("%s at %s", e.RevertToState, when(e.DueAt()))
}

// sameJSON reports whether a and b are the same JSON, however their
// numbers are written.
func sameJSON(a, b any) bool {
	var x, y any
	json.Unmarshal(mustJSON(a), &x)
	json.Unmarshal(mustJSON(b), &y)
	return reflect.DeepEqual(x, y)
}

// record keeps the outcome of the slave at pos and shows the progress.
func (r *importRun) record(pos int, out importOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[pos] = out
	r.counts[out.Result]++
	r.drawBar()
}

// fail keeps the first failure, for the exit code.
func (r *importRun) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = err
	}
}

// note keeps a line for the summary.
func (r *importRun) note(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, line)
}

// batchLine prints a batch's line on stderr, off a terminal: on one, the
// status line says it.
func (r *importRun) batchLine(line string) {
	if !r.terminal() {
		r.say(line)
	}
}

// say prints a line on stderr, above the status line on a terminal.
func (r *importRun) say(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearLocked()
	fmt.Fprintln(r.a.stderr, line)
	r.drawBar()
}

func (r *importRun) terminal() bool { return isTerminal(r.a.stderr) }

// drawBar draws the status line on a terminal: a bar of the slaves this
// run has answered, and their results so far.
func (r *importRun) drawBar() {
	if !r.terminal() || r.todo == 0 {
		return
	}
	done := len(r.outcomes)
	const width = 20
	filled := done * width / r.todo
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	line := fmt.Sprintf("[%s] %s/%s slaves: %s", bar, thousands(done), thousands(r.todo), resultCounts(r.counts, r.f.dryRun))
	r.clearLocked()
	// A line wider than the terminal would wrap, and only its last row
	// would be cleared.
	if cols := columns(r.a.stderr) - 1; len(line) > cols {
		line = line[:cols] // ASCII only: no rune is cut
	}
	io.WriteString(r.a.stderr, line)
	r.bar = true
}

// columns is the width of the terminal w, 80 when it cannot be told.
func columns(w any) int {
	if f, ok := w.(*os.File); ok {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 1 {
			return cols
		}
	}
	return 80
}

func (r *importRun) clearBar() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clearLocked()
}

func (r *importRun) clearLocked() {
	if r.bar {
		io.WriteString(r.a.stderr, "\r\x1b[K")
		r.bar = false
	}
}

// resultCounts words the counts of a batch or a run: "98 imported, 2
// unchanged, 0 conflicts, 0 refused", with the other results when there
// are any.
func resultCounts(counts map[string]int, dryRun bool) string {
	parts := []string{thousands(counts["imported"]) + " imported"}
	if dryRun {
		parts = []string{thousands(counts[resultWouldImport]) + " would be imported"}
	}
	parts = append(parts, thousands(counts["unchanged"])+" unchanged", plural(counts["conflict"], "conflict"), thousands(counts["refused"])+" refused")
	if n := counts[resultMoved]; n > 0 {
		parts = append(parts, thousands(n)+" moved during the read")
	}
	if n := counts[resultFailed]; n > 0 {
		parts = append(parts, thousands(n)+" failed")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(n) + " " + noun + "s"
}

// importReport is the summary of an import, as -o json prints it.
type importReport struct {
	DryRun          bool            `json:"dryRun"`
	Slaves          int             `json:"slaves"`          // listed by the source
	AlreadyImported int             `json:"alreadyImported"` // skipped, as the checkpoint says
	Counts          map[string]int  `json:"counts"`          // by result
	Dropped         []droppedField  `json:"dropped"`
	Notes           []string        `json:"notes"`
	Results         []importOutcome `json:"results"` // in the source's order
}

// finish prints the summary, keeps or removes the checkpoint, and returns
// the run's exit.
func (r *importRun) finish(ctx context.Context, listed, skipped int) error {
	rep := importReport{DryRun: r.f.dryRun, Slaves: listed, AlreadyImported: skipped, Counts: map[string]int{},
		Dropped: r.dropped.fields(), Notes: slices.Sorted(slices.Values(r.notes)), Results: []importOutcome{}}
	for _, res := range []string{"imported", "unchanged", "conflict", "refused", resultMoved, resultFailed} {
		rep.Counts[res] = r.counts[res]
	}
	if r.f.dryRun {
		delete(rep.Counts, "imported")
		rep.Counts[resultWouldImport] = r.counts[resultWouldImport]
	}
	for _, pos := range slices.Sorted(maps.Keys(r.outcomes)) {
		rep.Results = append(rep.Results, r.outcomes[pos])
	}
	if r.f.output == "json" {
		writeJSON(r.a.stdout, rep)
	} else {
		r.printSummary(rep)
	}

	interrupted := ctx.Err() != nil
	if r.cp != nil && !interrupted && r.failure == nil && r.counts[resultMoved] == 0 {
		if err := r.cp.remove(); err != nil {
			fmt.Fprintln(r.a.stderr, "fleetctl: "+message(err))
		}
	} else if r.cp != nil && r.cp.count() > 0 {
		fmt.Fprintf(r.a.stderr, "import: %s of %s slaves done, in the checkpoint %s: the same command resumes\n",
			thousands(r.cp.count()), thousands(listed), displayPath(r.cp.path))
	}
	switch {
	case interrupted:
		return context.Cause(ctx)
	case r.failure != nil:
		return exitError{code: exitCode(r.failure)}
	case r.counts["conflict"]+r.counts["refused"]+r.counts[resultMoved] > 0:
		return exitError{code: exitRefused}
	}
	return nil
}

// printSummary prints the summary for people: the counts, the fields not
// carried, the notes, and every slave not imported with its reason.
func (r *importRun) printSummary(rep importReport) {
	w := r.a.stdout
	line := thousands(rep.Slaves) + " slaves: " + resultCounts(r.counts, r.f.dryRun)
	if rep.DryRun {
		line = "dry run, comparing reads (nothing written): " + line
	}
	if rep.AlreadyImported > 0 {
		line += fmt.Sprintf(" (and %s imported before, skipped)", thousands(rep.AlreadyImported))
	}
	fmt.Fprintln(w, line)
	for _, d := range rep.Dropped {
		fmt.Fprintln(w, "dropped: "+termtext.Visible(d.String()))
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note: "+termtext.Visible(n))
	}
	for _, o := range rep.Results {
		if o.Result == "imported" || o.Result == "unchanged" || (o.Result == resultWouldImport && o.Reason == "") {
			continue
		}
		fmt.Fprintf(w, "%s: %s: %s\n", o.Result, termtext.Visible(orDash(o.ID)), termtext.Visible(o.Reason))
	}
}

// sideError says which API an error came from, keeping its exit code.
func sideError(side string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return exitError{code: exitCode(err), msg: side + ": " + describe(err)}
}

// slaveID is the id a listed slave's JSON names: id, or the old
// scheduler's slaveId.
func slaveID(raw json.RawMessage) string {
	var s struct {
		ID      string `json:"id"`
		SlaveID string `json:"slaveId"`
	}
	decodeLoosely(raw, &s)
	if s.ID != "" {
		return s.ID
	}
	return s.SlaveID
}

// byMachine indexes the source's expiring records by the machine they
// name.
func byMachine(records []json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, raw := range records {
		var e struct {
			MachineID string `json:"machineId"`
		}
		decodeLoosely(raw, &e)
		out[e.MachineID] = raw
	}
	return out
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// elements are the elements of the JSON array a raw read answered, each as
// it came, every field kept.
func elements(raw json.RawMessage, err error) ([]json.RawMessage, error) {
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("the source's answer is not a JSON array: %w", err)
	}
	return out, nil
}
