package main

import (
	"testing"

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
