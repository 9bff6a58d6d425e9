package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/client"
)

func slaveIn(id, host string, st client.State) *client.Slave {
	return &client.Slave{ID: id, Host: host, CurrentState: client.StateUpdate{State: st}}
}

func stateChange(id string, from, to client.State) client.SlaveChange {
	return client.SlaveChange{SlaveID: id, Type: "stateChanged", PreviousState: from, Slave: slaveIn(id, id+".example.com", to)}
}

func TestAWatchPrintsTheChangesThatTouchItsSelection(t *testing.T) {
	active := machineFilter{state: client.Active}
	for _, tc := range []struct {
		name    string
		listed  []string // nil: started from --since, no list
		changes []client.SlaveChange
		want    []bool
	}{
		{"a selected machine leaving and coming back is printed both times", []string{"n1"},
			[]client.SlaveChange{stateChange("n1", client.Active, client.Frozen), stateChange("n1", client.Frozen, client.Active)}, []bool{true, true}},
		{"a machine that left the selection is no longer printed", []string{"n1"},
			[]client.SlaveChange{stateChange("n1", client.Active, client.Frozen), stateChange("n1", client.Frozen, client.Dead)}, []bool{true, false}},
		{"a machine outside the selection that stays outside is not printed", []string{"n1"},
			[]client.SlaveChange{stateChange("n2", client.Frozen, client.Dead)}, []bool{false}},
		{"a machine deleted from the selection is printed, one deleted outside it is not", []string{"n1"},
			[]client.SlaveChange{{SlaveID: "n1", Type: "deleted"}, {SlaveID: "n2", Type: "deleted"}}, []bool{true, false}},
		{"after --since a state change's previous state says it left the selection", nil,
			[]client.SlaveChange{stateChange("n1", client.Active, client.Frozen), {SlaveID: "n1", Type: "deleted"}}, []bool{true, false}},
		{"after --since a description of a machine outside is not printed", nil,
			[]client.SlaveChange{{SlaveID: "n3", Type: "descriptionChanged", Slave: slaveIn("n3", "h", client.Frozen)}}, []bool{false}},
		{"after --since a machine that enters and is deleted is printed both times", nil,
			[]client.SlaveChange{stateChange("n4", client.Frozen, client.Active), {SlaveID: "n4", Type: "deleted"}}, []bool{true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{f: active, selected: map[string]bool{}}
			if tc.listed != nil {
				w.listed = true
				for _, id := range tc.listed {
					w.selected[id] = true
				}
			}
			for i, ch := range tc.changes {
				if got := w.concerns(ch); got != tc.want[i] {
					t.Errorf("change %d (%s %s): got printed %v, want %v", i, ch.SlaveID, ch.Type, got, tc.want[i])
				}
			}
		})
	}
}

// columnStarts are the offsets at which a watch line's cells start: cells
// are separated by two spaces or more and hold at most single ones.
func columnStarts(line string) []int {
	var starts []int
	for _, m := range regexp.MustCompile(`\S+(?: \S+)*`).FindAllStringIndex(line, -1) {
		starts = append(starts, m[0])
	}
	return starts
}

// wantFixedColumns checks that the lines' first six cells (time to user)
// start at the same offsets in every line.
func wantFixedColumns(t *testing.T, lines []string) {
	t.Helper()
	var first []int
	for _, l := range lines {
		starts := columnStarts(l)
		if len(starts) < 6 {
			t.Fatalf("line %q: got %d cells, want time, id, change, state, previous and user", l, len(starts))
		}
		if first == nil {
			first = starts[:6]
			continue
		}
		if !slices.Equal(starts[:6], first) {
			t.Errorf("columns shifted: got cells at %v in\n%s\nwant them at %v as in\n%s", starts[:6], l, first, lines[0])
		}
	}
}

func TestAWatchsColumnsNeverShift(t *testing.T) {
	var out bytes.Buffer
	w := &watcher{a: &app{stdout: &out}, widths: initialWidths()}
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC).UnixMilli()
	by := func(user string, st client.State) *client.StateUpdate {
		return &client.StateUpdate{State: st, User: user, Timestamp: at}
	}
	for _, ch := range []client.SlaveChange{
		{Timestamp: at, SlaveID: "n1", Type: "added", Slave: slaveIn("n1", "h", client.Active)},
		{Timestamp: at, SlaveID: "n1", Type: "stateChanged", PreviousState: client.Active, Update: by("ops", client.StartingDecommission)},
		{Timestamp: at, SlaveID: "n1", Type: "stateChanged", PreviousState: client.StartingDecommission, Update: by("ops", client.Decommissioning)},
		{Timestamp: at, SlaveID: "n1", Type: "descriptionChanged", Slave: slaveIn("n1", "h", client.Decommissioning)},
		{Timestamp: at, SlaveID: "n1", Type: "stateChanged", PreviousState: client.MissingOnStartup, Update: by("ops", client.Dead)},
		{Timestamp: at, SlaveID: "n1", Type: "deleted"},
	} {
		w.print(ch, nil)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want 6:\n%s", len(lines), out.String())
	}
	wantFixedColumns(t, lines)
}
