package slaves_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/memstore"
	"github.com/fleetops/fleet/shared/slaves"
)

// oldSlave is a slave as the old API describes it, for an import: its
// record, its history oldest first (reported, then in state by an
// operator) and its expiring change when expiring is not "".
func oldSlave(id, state, expiring string) map[string]any {
	current := map[string]any{"objectId": id, "state": state, "timestamp": seededAt + 120_000, "user": "ops@example.com", "message": "old API"}
	one := map[string]any{
		"slave": map[string]any{"id": id, "firstSeenAt": seededAt, "currentState": current, "host": "old.example.com", "rackId": "us-east-1b",
			"attributes": map[string]string{"pool": "batch"}, "resources": map[string]any{"cpus": 8}, "sequence": 12},
		"history": []any{
			map[string]any{"objectId": id, "state": "ACTIVE", "timestamp": seededAt, "message": "New machine reported"},
			current,
		},
	}
	if expiring != "" {
		one["expiring"] = map[string]any{"machineId": id, "user": "ops@example.com", "startMillis": seededAt + 120_000, "actionId": "ticket-9",
			"revertToState": expiring, "killTasksOnDecommissionTimeout": false,
			"expiringAPIRequestObject": map[string]any{"durationMillis": 3_600_000, "revertToState": expiring, "actionId": "ticket-9", "killTasksOnDecommissionTimeout": false}}
	}
	return one
}

// importBody is an import's body of slaves.
func importBody(t *testing.T, slaves ...map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"slaves": slaves})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

type importResult struct {
	ID     string `json:"id"`
	Result string `json:"result"`
	Reason string `json:"reason"`
}

// importInto sends an import as an admin, with query, and returns its
// answer; it fails unless the answer is a 200.
func importInto(t *testing.T, f *memstore.Store, query, body string) []importResult {
	t.Helper()
	rec := change(f, authAdmin, "/api/slaves/import", query, "", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("got %d %s, want 200", rec.Code, rec.Body)
	}
	var answer struct{ Results []importResult }
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
		t.Fatal(err)
	}
	return answer.Results
}

func results(rs []importResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID+" "+r.Result)
	}
	return strings.Join(out, ", ")
}

const importedID = "20261121-051400-16777343-5050-1234-S20"

// An import answers every slave's result, in the order of the request: a
// refusal or a conflict does not stop the others.
func TestAnImportAnswersEachSlavesResult(t *testing.T) {
	f := newFleet(false)
	newestFirst := oldSlave("S-newest-first", "FROZEN", "")
	h := newestFirst["history"].([]any)
	h[0], h[1] = h[1], h[0]
	notLast := oldSlave("S-not-last", "FROZEN", "")
	notLast["slave"].(map[string]any)["currentState"] = map[string]any{"objectId": "S-not-last", "state": "ACTIVE", "timestamp": seededAt + 1}
	unknown := oldSlave("S-unknown", "PAUSED", "")
	badRevert := oldSlave("S-bad-revert", "FROZEN", "DEAD")
	wrongType := oldSlave("S-wrong-type", "FROZEN", "")
	wrongType["slave"].(map[string]any)["firstSeenAt"] = "yesterday"
	byOldName := oldSlave("S-by-slaveId", "ACTIVE", "")
	rec := byOldName["slave"].(map[string]any)
	rec["slaveId"] = rec["id"]
	delete(rec, "id")
	body := importBody(t,
		oldSlave(importedID, "FROZEN", "ACTIVE"),
		oldSlave(activeID, "ACTIVE", ""), // stored with another history
		newestFirst, notLast, unknown, badRevert, wrongType,
		oldSlave("#decommissioning", "ACTIVE", ""),
		oldSlave(importedID, "FROZEN", ""), // named twice
		map[string]any{"history": []any{}},
		byOldName,
	)
	got := importInto(t, f, "", body)
	want := importedID + " imported, " + activeID + " conflict, S-newest-first refused, S-not-last refused, S-unknown refused, " +
		"S-bad-revert refused, " + " refused, #decommissioning refused, " + importedID + " refused,  refused, S-by-slaveId imported"
	if results(got) != want {
		t.Fatalf("got %s\nwant %s", results(got), want)
	}
	reasons := []string{"", "mode=replace", "oldest first", "not its last history entry", `state "PAUSED"`, "set only by the system",
		"firstSeenAt", "is not valid", "more than once", "its record", ""}
	for i, r := range got {
		if (reasons[i] == "") != (r.Reason == "") || !strings.Contains(r.Reason, reasons[i]) {
			t.Errorf("%s: got reason %q, want one with %q", r.ID, r.Reason, reasons[i])
		}
	}
	details := get(openRoutes(f), "/api/slaves/slave/"+importedID+"/details")
	var slave struct {
		Host         string `json:"host"`
		CurrentState struct{ State, Message string }
		Resources    json.RawMessage
		Sequence     int64
	}
	json.Unmarshal(details.Body.Bytes(), &slave)
	if details.Code != 200 || slave.Host != "old.example.com" || slave.CurrentState.State != "FROZEN" || string(slave.Resources) != `{"cpus":8}` || slave.Sequence == 12 {
		t.Errorf("got %d %s, want the slave as imported, at a sequence of this service's", details.Code, details.Body)
	}
	history := get(openRoutes(f), "/api/slaves/slave/"+importedID)
	if !strings.Contains(history.Body.String(), `"state":"FROZEN","timestamp":`+fmt.Sprint(seededAt+120_000)) {
		t.Errorf("got history %s, want the imported entries", history.Body)
	}
}

// openRoutes is the slave routes over f, open to every caller.
func openRoutes(f *memstore.Store) http.Handler {
	return slaves.New(f, fuzzPolicy(authOff), fuzzLimits)
}

// followed is the kinds of the changes after cursor, with their slaves.
func followed(t *testing.T, f *memstore.Store, cursor string) string {
	t.Helper()
	p := readPage(t, get(openRoutes(f), "/api/slaves/changes?since="+cursor))
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.SlaveID+" "+c.Type)
	}
	return strings.Join(out, ", ")
}

// An imported slave reaches the feed as any new slave does, added, and its
// expiring change right after it, as set; the same import again is
// unchanged and writes nothing at all.
func TestAnImportIsInTheFeedAndAgainWritesNothing(t *testing.T) {
	f := newFleet(false)
	cursor := listCursor(t, openRoutes(f))
	body := importBody(t, oldSlave(importedID, "FROZEN", "ACTIVE"))
	if got := results(importInto(t, f, "", body)); got != importedID+" imported" {
		t.Fatalf("got %s, want imported", got)
	}
	if got := followed(t, f, cursor); got != importedID+" added, "+importedID+" expiringSet" {
		t.Errorf("got changes %s, want added, then expiringSet", got)
	}
	before, cursor := fleetState(t, f)+fmt.Sprint(entries(t, f, importedID)), listCursor(t, openRoutes(f))
	for _, query := range []string{"", "?mode=replace"} {
		if got := results(importInto(t, f, query, body)); got != importedID+" unchanged" {
			t.Errorf("again%s: got %s, want unchanged", query, got)
		}
	}
	if after := fleetState(t, f) + fmt.Sprint(entries(t, f, importedID)); after != before {
		t.Errorf("the fleet changed:\n%s\nwant\n%s", after, before)
	}
	if got := followed(t, f, cursor); got != "" {
		t.Errorf("got changes %s, want none", got)
	}
}

// A slave stored with another history is left alone unless the import
// says mode=replace, which replaces its record, history and expiring
// change, seen in the feed as a deletion and an addition.
func TestAConflictIsLeftAloneUnlessReplaced(t *testing.T) {
	f := newFleet(false)
	before := fleetState(t, f)
	body := importBody(t, oldSlave(frozenID, "FROZEN", ""))
	if got := results(importInto(t, f, "", body)); got != frozenID+" conflict" {
		t.Fatalf("got %s, want conflict", got)
	}
	if fleetState(t, f) != before {
		t.Errorf("a conflict changed the fleet")
	}
	cursor := listCursor(t, openRoutes(f))
	if got := results(importInto(t, f, "?mode=replace", body)); got != frozenID+" imported" {
		t.Fatalf("got %s, want imported", got)
	}
	if got := followed(t, f, cursor); got != frozenID+" deleted, "+frozenID+" added" {
		t.Errorf("got changes %s, want deleted, then added", got)
	}
	if e := get(openRoutes(f), "/api/slaves/expiring").Body.String(); strings.Contains(e, frozenID) {
		t.Errorf("got expiring %s, want the replaced slave's record gone with it", e)
	}
	if h := entries(t, f, frozenID); len(h) != 2 || h[0].Message != "old API" {
		t.Errorf("got history %+v, want the two imported entries", h)
	}
}

// A slave imported draining joins the decommissioning set: over the limit
// it is refused with the limit's own words, unless the import says
// overrideLimit=true.
func TestAnImportKeepsTheDecommissionLimitUnlessOverridden(t *testing.T) {
	f := newFleet(true) // two draining: the limit
	body := importBody(t, oldSlave(importedID, "DECOMMISSIONING", ""), oldSlave("S-retired", "DECOMMISSIONED", ""))
	got := importInto(t, f, "", body)
	want := fmt.Sprint(machine.LimitError(2, fuzzLimits.MaxDecommissioning))
	if results(got) != importedID+" refused, S-retired imported" || !strings.HasSuffix(want, got[0].Reason) || got[0].Reason == "" {
		t.Fatalf("got %+v, want %s refused with %q, the DECOMMISSIONED slave imported", got, importedID, want)
	}
	if s, _ := f.Get(t.Context(), importedID); s != nil {
		t.Errorf("got %+v stored, want none", s)
	}
	if got := results(importInto(t, f, "?overrideLimit=true", body)); got != importedID+" imported, S-retired unchanged" {
		t.Errorf("overridden: got %s, want imported", got)
	}
	if rec := change(f, authAdmin, "/api/slaves/slave/"+activeID+"/decommission", "", "", ""); rec.Code != 400 || !strings.Contains(rec.Body.String(), "3 slaves are already decommissioning") {
		t.Errorf("a decommission after: got %d %s, want the limit's refusal counting the imported slave", rec.Code, rec.Body)
	}
}

func TestAnImportRequestThatIsNotOneIsRefusedWhole(t *testing.T) {
	many := make([]map[string]any, slaves.MaxImport+1)
	for i := range many {
		many[i] = oldSlave(fmt.Sprintf("S%d", i), "ACTIVE", "")
	}
	long := oldSlave(importedID, "ACTIVE", "")
	long["slave"].(map[string]any)["host"] = strings.Repeat("h", slaves.MaxImportBody)
	tests := []struct {
		name, query, body string
		code              int
		message           string
	}{
		{"no body", "", "", 400, "must name the slaves"},
		{"no slaves", "", `{}`, 400, "must name the slaves"},
		{"slaves that are not a list", "", `{"slaves":{}}`, 400, "slaves must be an array"},
		{"more slaves than a batch holds", "", importBody(t, many...), 400, "at most 100 slaves"},
		{"a body over the import's bound", "", importBody(t, long), 413, "larger than 4194304 bytes"},
		{"an unknown mode", "?mode=merge", importBody(t), 400, "mode must be replace"},
		{"an override that is not true or false", "?overrideLimit=yes", importBody(t), 400, "overrideLimit must be true or false"},
		{"a dry run", "?dryRun=true", importBody(t), 400, "no dry run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(false)
			before := fleetState(t, f)
			wantError(t, change(f, authAdmin, "/api/slaves/import", tt.query, "", tt.body), tt.code, tt.message)
			if fleetState(t, f) != before {
				t.Errorf("the fleet changed")
			}
		})
	}
	t.Run("a body over 64 KiB within the import's bound is read", func(t *testing.T) {
		big := oldSlave(importedID, "ACTIVE", "")
		big["slave"].(map[string]any)["attributes"] = map[string]string{"note": strings.Repeat("n", 100<<10)}
		if got := results(importInto(t, newFleet(false), "", importBody(t, big))); got != importedID+" imported" {
			t.Errorf("got %s, want imported", got)
		}
	})
	t.Run("a reader may not import", func(t *testing.T) {
		f := newFleet(false)
		if rec := change(f, authReader, "/api/slaves/import", "", "", importBody(t, oldSlave(importedID, "ACTIVE", ""))); rec.Code != 403 {
			t.Errorf("got %d %s, want 403", rec.Code, rec.Body)
		}
	})
}
