//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apitest"
)

// These import from the recorded old scheduler (oldscheduler_test.go,
// served by a real HTTP server) into the API over the local stack, with
// the built binary.

func TestImportFromTheOldSchedulerCarriesEachSlaveWholeAndNamesWhatItDrops(t *testing.T) {
	settleDrains(t)
	_, ids, _, _ := oldSchedulerAnswers(t)
	forget(t, ids)
	src := newOldScheduler(t)
	cache := filepath.Join(t.TempDir(), "logs")
	env := []string{"FLEETCTL_CACHE_DIR=" + cache}
	cursor := feedNow(t)

	r := fleetctl(t, apitest.None, env, "import", "--from", src.URL).want(t, 0)
	if r.stdout != "8 slaves: 8 imported, 0 unchanged, 0 conflicts, 0 refused\n"+theDropped {
		t.Errorf("got stdout\n%s\nwant every slave imported and the fields not carried named", r.stdout)
	}
	if r.stderr != "batch 1/1: 8 slaves: 8 imported, 0 unchanged, 0 conflicts, 0 refused\n" {
		t.Errorf("got stderr\n%s\nwant the batch's line", r.stderr)
	}
	checkImported(t, cursor)
	noCheckpoint(t, cache)

	r = fleetctl(t, apitest.None, env, "import", "--from", src.URL).want(t, 0)
	if r.stdout != "8 slaves: 0 imported, 8 unchanged, 0 conflicts, 0 refused\n"+theDropped {
		t.Errorf("got stdout\n%s\nwant every slave unchanged", r.stdout)
	}

	// A slave changed at the destination since is a conflict, named, and
	// left alone unless replaced.
	fleetctl(t, apitest.None, nil, "freeze", ids[0], "-m", "changed \x1b[31mhere").want(t, 0)
	r = fleetctl(t, apitest.None, env, "import", "--from", src.URL).want(t, exitRefused)
	if !strings.HasPrefix(r.stdout, "8 slaves: 0 imported, 7 unchanged, 1 conflict, 0 refused\n") ||
		!strings.Contains(r.stdout, "\nconflict: "+ids[0]+": Slave "+ids[0]+" exists with another record, history or expiring change; ") {
		t.Errorf("got stdout\n%s\nwant S1 in conflict, with the service's reason", r.stdout)
	}
	fleetctl(t, apitest.None, env, "import", "--from", src.URL, "--mode", "replace").want(t, 0)
	if got := stateOf(t, ids[0]); got != client.Active {
		t.Errorf("got S1 %s, want ACTIVE as the source has it, replaced", got)
	}
}

func TestAnInterruptedImportResumesWhereItStopped(t *testing.T) {
	settleDrains(t)
	_, ids, _, _ := oldSchedulerAnswers(t)
	forget(t, ids)
	src := newOldScheduler(t)
	src.Hold(4) // the fifth slave's history read waits: the import stops after two batches of two
	cache := filepath.Join(t.TempDir(), "logs")
	env := []string{"FLEETCTL_CACHE_DIR=" + cache}
	cursor := feedNow(t)

	run := start(t, env, "import", "--from", src.URL, "--batch", "2", "--concurrency", "1")
	eventually(t, "two batches imported", func() bool { return strings.Contains(run.stderr.String(), "batch 2/4: ") })
	run.cmd.Process.Signal(syscall.SIGINT)
	r := run.result(t).want(t, 130)
	if !strings.HasPrefix(r.stdout, "8 slaves: 4 imported, 0 unchanged, 0 conflicts, 0 refused\n") {
		t.Errorf("got stdout\n%s\nwant the four slaves imported before the interrupt", r.stdout)
	}
	if !strings.Contains(r.stderr, "\nimport: 4 of 8 slaves done, in the checkpoint ") || !strings.HasSuffix(r.stderr, "\nfleetctl: interrupted (interrupt)\n") {
		t.Errorf("got stderr\n%s\nwant the checkpoint named, then the interrupt", r.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(cache), "imports", "*.json"))
	if len(files) != 1 {
		t.Fatalf("got checkpoints %v, want one", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var cp checkpointFile
	if err := json.Unmarshal(raw, &cp); err != nil || !slices.Equal(cp.Done, ids[:4]) {
		t.Errorf("got checkpoint %s (%v), want the first four slaves done", raw, err)
	}

	src.Release()
	r = fleetctl(t, apitest.None, env, "import", "--from", src.URL, "--batch", "2", "--concurrency", "1").want(t, 0)
	if !strings.HasPrefix(r.stderr, "resuming: 4 of 8 slaves already imported (--restart imports them again)\n") {
		t.Errorf("got stderr\n%s\nwant the resume said", r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "8 slaves: 4 imported, 0 unchanged, 0 conflicts, 0 refused (and 4 imported before, skipped)\n") {
		t.Errorf("got stdout\n%s\nwant the four left imported", r.stdout)
	}
	checkImported(t, cursor)
	noCheckpoint(t, cache)
}

// forget deletes the slaves from the local stack, where an earlier test
// may have imported them.
func forget(t *testing.T, ids []string) {
	t.Helper()
	for _, id := range ids {
		if err := api(t).DeleteSlave(context.Background(), id); err != nil && !client.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// feedNow is the change feed's cursor now.
func feedNow(t *testing.T) string {
	t.Helper()
	ch, err := api(t).FollowChanges(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return ch.Cursor
}

func noCheckpoint(t *testing.T, cache string) {
	t.Helper()
	if files, _ := filepath.Glob(filepath.Join(filepath.Dir(cache), "imports", "*")); files != nil {
		t.Errorf("got %v, want no checkpoint left by an import with nothing left to do", files)
	}
}

// checkImported checks that the local stack holds the recorded slaves as
// the old scheduler answered them, less the fields the import names as
// dropped: each one's details and history read back, and its expiring
// change as the import stored it, read from the change feed after cursor
// (both recorded changes fell due in 2016, long enough ago that the
// expiring list no longer shows them: the next expiry run applies them).
func checkImported(t *testing.T, cursor string) {
	t.Helper()
	list, ids, history, expiring := oldSchedulerAnswers(t)
	ctx := context.Background()
	for i, id := range ids {
		var want client.Slave
		decodeRecorded(t, list[i], &want, "resources")
		want.ID = id // the old scheduler's slaveId
		if want.RackID == "" {
			want.RackID = "DEFAULT" // as the service stores a slave without one
		}
		if want.Attributes == nil {
			want.Attributes = map[string]string{}
		}
		if !draining(want.CurrentState.State) {
			want.RunningTasks = nil // kept only while a slave drains
		}
		got, err := api(t).GetSlave(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got.Sequence = 0
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: got details\n%+v\nwant\n%+v", id, *got, want)
		}

		var wantHistory []client.StateUpdate
		for _, raw := range history[id] {
			var u client.StateUpdate
			decodeRecorded(t, raw, &u)
			wantHistory = append(wantHistory, u)
		}
		gotHistory, err := api(t).GetSlaveHistory(ctx, id, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotHistory, wantHistory) {
			t.Errorf("%s: got history\n%+v\nwant\n%+v", id, gotHistory, wantHistory)
		}
	}

	want := map[string]client.Expiring{}
	for _, raw := range expiring {
		var e client.Expiring
		decodeRecorded(t, raw, &e)
		if e.Request.RevertToState == "" {
			e.Request.RevertToState = e.RevertToState // the service takes the record's
		}
		want[e.MachineID] = e
	}
	got := map[string]client.Expiring{}
	eventually(t, "the imported expiring changes in the feed", func() bool {
		ch, err := api(t).FollowChanges(ctx, cursor, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Changes {
			if _, ok := want[c.SlaveID]; ok && c.Type == "expiringSet" {
				got[c.SlaveID] = *c.Expiring
			}
		}
		cursor = ch.Cursor
		return len(got) == len(want)
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got expiring changes\n%+v\nwant\n%+v", got, want)
	}
}

// decodeRecorded decodes a recorded answer as a client reads it: fields
// the client does not know are left out, and a field of the given names
// whose shape is not the client's is left empty (the old scheduler's
// resources as a list).
func decodeRecorded(t *testing.T, raw json.RawMessage, v any, reshaped ...string) {
	t.Helper()
	err := json.Unmarshal(raw, v)
	var typeErr *json.UnmarshalTypeError
	if err != nil && !(errors.As(err, &typeErr) && slices.Contains(reshaped, typeErr.Field)) {
		t.Fatalf("%s: %v", raw, err)
	}
}
