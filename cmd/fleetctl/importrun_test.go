package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/shared/machine"
)

// These run fleetctl import in process, from the recorded old scheduler
// (oldscheduler_test.go) into the slave routes over the in-memory store.
// import_integration_test.go runs the built binary into the whole API.

const oldID = "20161121-051400-16777343-5050-4242-"

// theDropped are the summary's lines for the fields of the recorded
// answers that the import does not carry.
const theDropped = `dropped: expiring.typeName on 2 expiring changes
dropped: history[].previousState on 2 entries
dropped: slave.currentState.previousState on 2 slaves
dropped: slave.resources on 1 slave
dropped: slave.runningTasks on 1 slave
dropped: slave.typeName on 8 slaves
`

// importsDir is where the checkpoints of the in-process runs go.
func importsDir() string {
	return filepath.Join(os.Getenv("XDG_CACHE_HOME"), "fleetctl", "imports")
}

func checkpoints(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(importsDir())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// sortedLines is s's lines, sorted: batches sent at once end in any order.
func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return lines
}

func TestAnImportIsUnchangedWhenRunAgainAndADryRunComparesReads(t *testing.T) {
	src := newOldScheduler(t)
	p := newInProcess(t, defaultLimits, nil)

	r := p.run("import", "--from", src.URL, "--batch", "3")
	if r.code != exitOK || r.stdout != "8 slaves: 8 imported, 0 unchanged, 0 conflicts, 0 refused\n"+theDropped {
		t.Fatalf("got %d\n%s\nwant 0 and every slave imported, the fields not carried named\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	want := []string{
		"batch 1/3: 3 slaves: 3 imported, 0 unchanged, 0 conflicts, 0 refused",
		"batch 2/3: 3 slaves: 3 imported, 0 unchanged, 0 conflicts, 0 refused",
		"batch 3/3: 2 slaves: 2 imported, 0 unchanged, 0 conflicts, 0 refused",
	}
	if got := sortedLines(r.stderr); !slices.Equal(got, want) {
		t.Errorf("got stderr\n%s\nwant a line per batch", r.stderr)
	}
	if got := checkpoints(t); got != nil {
		t.Errorf("got checkpoints %v, want none left by an import with nothing left to do", got)
	}
	if got := p.state(t, oldID+"S4"); got != machine.Decommissioned {
		t.Errorf("got S4 %s, want DECOMMISSIONED as the old scheduler had it", got)
	}

	r = p.run("import", "--from", src.URL)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "8 slaves: 0 imported, 8 unchanged, 0 conflicts, 0 refused\n") {
		t.Errorf("got %d\n%s\nwant every slave unchanged the second time", r.code, r.stdout)
	}

	if r := p.run("freeze", oldID+"S1", "-m", "changed here"); r.code != exitOK {
		t.Fatalf("freeze: %d %s", r.code, r.stderr)
	}
	r = p.run("import", "--from", src.URL, "--dry-run")
	if r.code != exitRefused || !strings.HasPrefix(r.stdout, "dry run, comparing reads (nothing written): 8 slaves: 0 would be imported, 7 unchanged, 1 conflict, 0 refused\n") ||
		!strings.Contains(r.stdout, "\nconflict: "+oldID+"S1: currentState: ACTIVE since 2016-11-21 ") ||
		!strings.Contains(r.stdout, "; history: 3 entries at the source, 4 at the destination\n") {
		t.Errorf("got %d\n%s\nwant S1 in conflict, its differences named", r.code, r.stdout)
	}
	r = p.run("import", "--from", src.URL, "--dry-run", "--mode", "replace")
	if r.code != exitOK || !strings.Contains(r.stdout, "1 would be imported, 7 unchanged, 0 conflicts") ||
		!strings.Contains(r.stdout, "\nwould-import: "+oldID+"S1: replaces what the destination holds: currentState: ") {
		t.Errorf("got %d\n%s\nwant S1 to be replaced", r.code, r.stdout)
	}
	if got := p.state(t, oldID+"S1"); got != machine.Frozen {
		t.Errorf("got S1 %s after dry runs, want it as it was (FROZEN)", got)
	}

	r = p.run("import", "--from", src.URL, "-o", "json")
	var rep importReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if r.code != exitRefused || rep.Counts["conflict"] != 1 || rep.Counts["unchanged"] != 7 || len(rep.Results) != 8 ||
		rep.Results[0] != (importOutcome{ID: oldID + "S1", Result: "conflict", Reason: "Slave " + oldID + "S1 exists with another record, history or expiring change; import it with mode=replace to replace it"}) ||
		len(rep.Dropped) != 6 || rep.Dropped[5] != (droppedField{Field: "slave.typeName", Count: 8, Of: "slaves"}) {
		t.Errorf("got %d %+v, want S1 in conflict and the rest unchanged", r.code, rep)
	}

	r = p.run("import", "--from", src.URL, "--mode", "replace")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "8 slaves: 1 imported, 7 unchanged, 0 conflicts, 0 refused\n") {
		t.Errorf("got %d\n%s\nwant S1 replaced", r.code, r.stdout)
	}
	if got := p.state(t, oldID+"S1"); got != machine.Active {
		t.Errorf("got S1 %s, want ACTIVE again, as the source has it", got)
	}
}

// failingImports answers 503 to every import that holds the slave id while
// failing is set, counting them in attempts, and passes every other request
// on to the service at target.
func failingImports(t *testing.T, target, id string, failing *atomic.Bool, attempts *atomic.Int32) *httptest.Server {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if failing.Load() && r.URL.Path == "/api/slaves/import" && bytes.Contains(body, []byte(`"`+id+`"`)) {
			attempts.Add(1)
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"code":503,"message":"DynamoDB is busy, try again"}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAFailedBatchIsSentAgainThenReportedAndTheRestGoesOnAndResumes(t *testing.T) {
	src := newOldScheduler(t)
	p := newInProcess(t, defaultLimits, nil)
	var failing atomic.Bool
	var attempts atomic.Int32
	failing.Store(true)
	flaky := failingImports(t, p.url, oldID+"S1", &failing, &attempts)
	t.Setenv("FLEETCTL_ENDPOINT", flaky.URL)

	r := p.run("import", "--from", src.URL, "--batch", "3", "--concurrency", "1")
	if r.code != exitUnavailable {
		t.Errorf("got exit code %d, want %d", r.code, exitUnavailable)
	}
	if !strings.HasPrefix(r.stdout, "8 slaves: 5 imported, 0 unchanged, 0 conflicts, 0 refused, 3 failed\n") ||
		!strings.Contains(r.stdout, "\nfailed: "+oldID+"S1: batch 1: unavailable (503): DynamoDB is busy, try again\n") ||
		!strings.Contains(r.stdout, "\nfailed: "+oldID+"S3: batch 1: ") {
		t.Errorf("got stdout\n%s\nwant the batch's three slaves named as failed, the others imported", r.stdout)
	}
	if got := attempts.Load(); got != batchAttempts*4 {
		t.Errorf("got %d attempts, want %d batch attempts of the client's 4", got, batchAttempts)
	}
	for _, w := range []string{"fleetctl: batch 1: sending again in ", "(attempt 2 of 3)", "(attempt 3 of 3)",
		"batch 1/3: 3 slaves: failed: unavailable (503)", "batch 3/3: 2 slaves: 2 imported"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("got stderr\n%s\nwant it to say %q", r.stderr, w)
		}
	}
	if !strings.Contains(r.stderr, "import: 5 of 8 slaves done, in the checkpoint ") {
		t.Errorf("got stderr\n%s\nwant the checkpoint kept", r.stderr)
	}
	if got := checkpoints(t); len(got) != 1 {
		t.Fatalf("got checkpoints %v, want one", got)
	}

	failing.Store(false)
	r = p.run("import", "--from", src.URL, "--batch", "3")
	if r.code != exitOK || r.stdout != "8 slaves: 3 imported, 0 unchanged, 0 conflicts, 0 refused (and 5 imported before, skipped)\n"+
		"dropped: expiring.typeName on 1 expiring change\ndropped: history[].previousState on 1 entry\ndropped: slave.currentState.previousState on 1 slave\ndropped: slave.resources on 1 slave\ndropped: slave.typeName on 3 slaves\n" {
		t.Errorf("got %d\n%s\nwant the three left imported", r.code, r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "resuming: 5 of 8 slaves already imported (--restart imports them again)\n") {
		t.Errorf("got stderr\n%s\nwant the resume said", r.stderr)
	}
	if got := checkpoints(t); got != nil {
		t.Errorf("got checkpoints %v, want it removed", got)
	}
	r = p.run("import", "--from", src.URL, "--restart")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "8 slaves: 0 imported, 8 unchanged") {
		t.Errorf("got %d\n%s\nwant every slave read and unchanged", r.code, r.stdout)
	}
}

func TestASlaveThatMovesWhileItIsReadIsReadAgainOnce(t *testing.T) {
	src := newOldScheduler(t)
	p := newInProcess(t, defaultLimits, nil)
	list, ids, history, _ := oldSchedulerAnswers(t)
	frozen := client.StateUpdate{ObjectID: ids[0], State: client.Frozen, Timestamp: 1479800000000, User: "ops@example.com"}
	// S1 was frozen after the list was read: its history has an entry
	// newer than the listed current state, and its details say so.
	src.Change("/api/slaves/slave/"+ids[0], append([]any{frozen}, rawAll(history[ids[0]])...))
	var details map[string]any
	if err := json.Unmarshal(list[0], &details); err != nil {
		t.Fatal(err)
	}
	details["currentState"] = frozen
	src.Change("/api/slaves/slave/"+ids[0]+"/details", details)
	// S2 keeps moving: its details are those listed, its history always
	// newer.
	src.Change("/api/slaves/slave/"+ids[1], append([]any{frozen}, rawAll(history[ids[1]])...))

	r := p.run("import", "--from", src.URL)
	if r.code != exitRefused || !strings.HasPrefix(r.stdout, "8 slaves: 7 imported, 0 unchanged, 0 conflicts, 0 refused, 1 moved during the read\n") ||
		!strings.Contains(r.stdout, "\nmoved: "+ids[1]+": its current state (FROZEN) was not its newest history entry, read twice: ") {
		t.Errorf("got %d\n%s\nwant S2 moved during the read, S1 read again and imported", r.code, r.stdout)
	}
	if got := p.state(t, ids[0]); got != machine.Frozen {
		t.Errorf("got S1 %s, want FROZEN as read the second time", got)
	}
	if got := checkpoints(t); len(got) != 1 {
		t.Errorf("got checkpoints %v, want it kept for the slave left", got)
	}
}

func rawAll(h []json.RawMessage) []any {
	var out []any
	for _, e := range h {
		out = append(out, e)
	}
	return out
}

func TestImportRefusesFlagsThatDoNotGoTogether(t *testing.T) {
	p := newInProcess(t, defaultLimits, nil)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"import"}, "import needs --from"},
		{[]string{"import", "--from", "http://old.example.com", "--batch", "101"}, "--batch 101: from 1 to 100"},
		{[]string{"import", "--from", "http://old.example.com", "--batch", "0"}, "--batch 0: from 1 to 100"},
		{[]string{"import", "--from", "http://old.example.com", "--concurrency", "0"}, "--concurrency 0: at least 1"},
		{[]string{"import", "--from", "http://old.example.com", "--mode", "merge"}, `--mode "merge": the only mode is replace`},
		{[]string{"import", "--from", "http://old.example.com", "-o", "yaml"}, `output "yaml" is none of text, json`},
		{[]string{"import", "--from", p.url}, "is the destination itself"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := p.run(tt.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("got %d %q, want %d saying %q", r.code, r.stderr, exitUsage, tt.want)
			}
		})
	}
}
