package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/client"
)

func TestTheOldSchedulersAnswersAreImportedWithEveryFieldNotCarriedNamed(t *testing.T) {
	list, ids, history, expiring := oldSchedulerAnswers(t)
	byID := byMachine(expiring)
	tally := droppedTally{}
	imports := map[string]client.ImportedSlave{}
	for i, raw := range list {
		imp, dropped, err := fromSource(raw, history[ids[i]], byID[ids[i]])
		if err != nil {
			t.Fatalf("%s: %v", ids[i], err)
		}
		tally.add(dropped)
		imports[ids[i]] = imp
	}
	var got []string
	for _, d := range tally.fields() {
		got = append(got, d.String())
	}
	want := []string{
		"expiring.typeName on 2 expiring changes",
		"history[].previousState on 2 entries",
		"slave.currentState.previousState on 2 slaves",
		"slave.resources on 1 slave",
		"slave.runningTasks on 1 slave",
		"slave.typeName on 8 slaves",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got dropped\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	const p = "20161121-051400-16777343-5050-4242-"
	s1 := imports[p+"S1"]
	if s1.Slave.ID != p+"S1" {
		t.Errorf("got id %q, want the old scheduler's slaveId", s1.Slave.ID)
	}
	var states []client.State
	for _, u := range s1.History {
		states = append(states, u.State)
	}
	if want := []client.State{client.Active, client.MissingOnStartup, client.Active}; !slices.Equal(states, want) {
		t.Errorf("got history %v, want %v, oldest first", states, want)
	}
	if s1.History[2] != s1.Slave.CurrentState || moved(s1) {
		t.Errorf("got newest entry %+v, want the current state %+v", s1.History[2], s1.Slave.CurrentState)
	}
	if got := string(mustJSON(s1.Slave.Resources)); got != `{"cpus":16,"diskMegaBytes":400000,"memoryMegaBytes":63000,"numPorts":200}` {
		t.Errorf("got resources %s, want them as written", got)
	}
	if got := string(mustJSON(imports[p+"S7"].Slave.Resources)); got != `{"cpus":16,"memoryMegaBytes":63000.5}` {
		t.Errorf("got resources %s, want 63000.5 as written", got)
	}
	if imports[p+"S3"].Slave.Resources != nil || imports[p+"S3"].Slave.RackID != "" {
		t.Errorf("got %+v, want no resources (a list is not this service's shape) and no rack", imports[p+"S3"].Slave)
	}
	if n := imports[p+"S5"].Slave.RunningTasks; n == nil || *n != 3 {
		t.Errorf("got runningTasks %v, want 3 kept for a draining slave", n)
	}
	if imports[p+"S6"].Slave.RunningTasks != nil {
		t.Error("got runningTasks for an active slave, want it dropped")
	}
	e := imports[p+"S2"].Expiring
	if e == nil || e.StartMillis != 1479808000000 || e.Request.DurationMillis != 604800000 || e.Request.RevertToState != client.Active {
		t.Errorf("got expiring %+v, want its start and duration as read, the request's revert state the record's", e)
	}
	if imports[p+"S1"].Expiring != nil {
		t.Error("got an expiring change for S1, which has none")
	}
}

func TestAHistoryIsTakenOldestFirst(t *testing.T) {
	at := func(ts ...int64) []client.StateUpdate {
		var h []client.StateUpdate
		for _, t := range ts {
			h = append(h, client.StateUpdate{Timestamp: t})
		}
		return h
	}
	for _, tt := range []struct {
		name     string
		in, want []client.StateUpdate
	}{
		{"newest first, as the API answers, is reversed", at(3, 2, 1), at(1, 2, 3)},
		{"entries of the same time keep their order, reversed", at(2, 2, 1), at(1, 2, 2)},
		{"an answer already oldest first is kept", at(1, 2, 3), at(1, 2, 3)},
		{"one entry is itself", at(5), at(5)},
		{"none is none", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := oldestFirst(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestASlaveMovedWhenItsNewestEntryIsNotItsCurrentState(t *testing.T) {
	cur := client.StateUpdate{ObjectID: "s", State: client.Frozen, Timestamp: 20}
	older := client.StateUpdate{ObjectID: "s", State: client.Active, Timestamp: 10}
	if moved(client.ImportedSlave{Slave: client.Slave{CurrentState: cur}, History: []client.StateUpdate{older, cur}}) {
		t.Error("got moved, want a history ending at the current state to be as read")
	}
	if !moved(client.ImportedSlave{Slave: client.Slave{CurrentState: cur}, History: []client.StateUpdate{older}}) {
		t.Error("got not moved, want a history read before the last change to have moved")
	}
}

func TestFieldsNotCarried(t *testing.T) {
	for _, tt := range []struct {
		name, raw, sent string
		want            []string
	}{
		{"a field the types lack is named", `{"a":1,"typeName":"Slave"}`, `{"a":1}`, []string{"x.typeName"}},
		{"nested fields are named by their path", `{"s":{"state":"ACTIVE","foo":true}}`, `{"s":{"state":"ACTIVE"}}`, []string{"x.s.foo"}},
		{"null, empty strings, objects and lists carry nothing", `{"a":null,"b":"","c":{},"d":[]}`, `{}`, nil},
		{"a number is the same however written", `{"n":1e3}`, `{"n":1000}`, nil},
		{"a value of another shape is named", `{"resources":[{"name":"cpus"}]}`, `{}`, []string{"x.resources"}},
		{"a value changed is named", `{"host":5}`, `{"host":""}`, []string{"x.host"}},
		{"a field the import adds is no loss", `{}`, `{"rackId":""}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			notCarried("x", decodeAny([]byte(tt.raw)), decodeAny([]byte(tt.sent)), func(p string) { got = append(got, p) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestARecordThatIsNotAnObjectIsNotImported(t *testing.T) {
	if _, _, err := fromSource(json.RawMessage(`"S1"`), nil, nil); err == nil {
		t.Error("got no error for a record that is a string")
	}
}

func TestTheSlavesSequenceIsIgnoredAndAMatchingSlaveIdIsCarried(t *testing.T) {
	raw := json.RawMessage(`{"id":"S1","slaveId":"S1","sequence":42,"host":"h","rackId":"r","attributes":{},"firstSeenAt":1,
		"currentState":{"objectId":"S1","state":"ACTIVE","timestamp":1}}`)
	_, dropped, err := fromSource(raw, []json.RawMessage{json.RawMessage(`{"objectId":"S1","state":"ACTIVE","timestamp":1}`)}, nil)
	if err != nil || dropped != nil {
		t.Errorf("got %q, %v, want nothing dropped", dropped, err)
	}
	raw = json.RawMessage(`{"id":"S1","slaveId":"S2","firstSeenAt":1,"currentState":{"objectId":"S1","state":"ACTIVE","timestamp":1}}`)
	if _, dropped, _ := fromSource(raw, nil, nil); !slices.Equal(dropped, []string{"slave.slaveId"}) {
		t.Errorf("got %q, want a slaveId other than the id named", dropped)
	}
}

func TestBatchesAreBoundByCountAndBytes(t *testing.T) {
	sized := func(sizes ...int) []prepared {
		var out []prepared
		for i, s := range sizes {
			out = append(out, prepared{pos: i, size: s})
		}
		return out
	}
	shape := func(bs [][]prepared) [][]int {
		var out [][]int
		for _, b := range bs {
			var pos []int
			for _, p := range b {
				pos = append(pos, p.pos)
			}
			out = append(out, pos)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		in    []prepared
		n     int
		bytes int
		want  [][]int
	}{
		{"by count", sized(1, 1, 1, 1, 1), 2, 100, [][]int{{0, 1}, {2, 3}, {4}}},
		{"by bytes: a long history makes a smaller batch", sized(40, 40, 40, 10, 10), 100, 100, [][]int{{0, 1}, {2, 3, 4}}},
		{"exactly the bound fits", sized(50, 50, 1), 100, 100, [][]int{{0, 1}, {2}}},
		{"a slave larger than the bound goes alone", sized(10, 500, 10), 100, 100, [][]int{{0}, {1}, {2}}},
		{"nothing makes no batch", nil, 100, 100, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := shape(makeBatches(tt.in, tt.n, tt.bytes))
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if !slices.Equal(got[i], tt.want[i]) {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestACheckpointResumesTheSameImportOnly(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "fleetctl", "logs")
	const src, dst = "https://old.example.com", "https://new.example.com/prod"
	c, err := openCheckpoint(cache, src, dst, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(cache), "imports"); filepath.Dir(c.path) != want {
		t.Errorf("got checkpoint in %s, want in %s, beside the logs cache", filepath.Dir(c.path), want)
	}
	if err := c.add([]string{"S1", "../../etc/passwd"}); err != nil {
		t.Fatal(err)
	}
	if err := c.add([]string{"S2"}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(c.path))
	if len(entries) != 1 || entries[0].Name() != filepath.Base(c.path) {
		t.Errorf("got %v in the imports directory, want the checkpoint alone (no temporary file left)", entries)
	}

	again, err := openCheckpoint(cache, src, dst, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"S1", "S2", "../../etc/passwd"} {
		if !again.has(id) {
			t.Errorf("got %s not done, want it read back", id)
		}
	}
	if again.has("S3") || again.count() != 3 {
		t.Errorf("got %d done, want 3", again.count())
	}
	if fresh, _ := openCheckpoint(cache, src, dst, true); fresh.count() != 0 {
		t.Error("got a checkpoint read with --restart, want it ignored")
	}
	other, _ := openCheckpoint(cache, "https://elsewhere.example.com", dst, false)
	if other.path == c.path || other.count() != 0 {
		t.Error("got the checkpoint of another source, want one per source and destination")
	}

	os.WriteFile(c.path, []byte(`{"source":"https://else.example.com","destination":"x","done":["S9"]}`), 0o600)
	if _, err := openCheckpoint(cache, src, dst, false); err == nil {
		t.Error("got a checkpoint of another import read, want an error")
	}
	if err := c.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.path); !os.IsNotExist(err) {
		t.Errorf("got %v, want the checkpoint removed", err)
	}
	if err := c.remove(); err != nil {
		t.Errorf("got %v removing it twice, want nothing to do", err)
	}
}

func TestACheckpointKeepsNoPassword(t *testing.T) {
	c, err := openCheckpoint(t.TempDir(), "https://ops:s3cret@old.example.com", "http://127.0.0.1:3000", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.add([]string{"S1"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(c.path)
	if strings.Contains(string(raw), "s3cret") {
		t.Errorf("got %s, with the password", raw)
	}
}

func TestCountsAreWrittenWithThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d): got %q, want %q", n, got, want)
		}
	}
}
