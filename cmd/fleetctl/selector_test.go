package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetops/fleet/client"
)

func TestSelectorsMatchStateHostRackAndEveryLabel(t *testing.T) {
	m := client.Slave{ID: "m1", Host: "node-17.example.com", RackID: "us-east-1a",
		CurrentState: client.StateUpdate{State: client.Active}, Attributes: map[string]string{"type": "m5", "zone": "a"}}
	for _, tc := range []struct {
		name string
		sel  selector
		want bool
	}{
		{"nothing selects everything", selector{}, true},
		{"the state, in any spelling", selector{state: "active"}, true},
		{"another state", selector{state: "frozen"}, false},
		{"a host glob", selector{host: "node-1*"}, true},
		{"a host glob that misses", selector{host: "node-2*"}, false},
		{"a rack glob", selector{rack: "us-east-1?"}, true},
		{"every label present", selector{labels: []string{"type=m5", "zone=a"}}, true},
		{"one label differing", selector{labels: []string{"type=m5", "zone=b"}}, false},
		{"a label the machine lacks", selector{labels: []string{"gpu="}}, false},
		{"all together", selector{state: "ACTIVE", host: "node-*", rack: "us-*", labels: []string{"type=m5"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.sel.filter()
			if err != nil {
				t.Fatal(err)
			}
			if got := f.matches(m); got != tc.want {
				t.Errorf("got %t, want %t", got, tc.want)
			}
		})
	}
	for _, bad := range []selector{{state: "sleepy"}, {host: "["}, {rack: "a[b"}, {labels: []string{"type"}}, {labels: []string{"=x"}}, {labels: []string{"a=1", "a=2"}}} {
		if _, err := bad.filter(); exitCode(err) != exitUsage {
			t.Errorf("selector %+v: got %v, want a usage error", bad, err)
		}
	}
}

func TestTheGuardRoundsPercentagesDownAndAllowsAtLeastOne(t *testing.T) {
	for _, tc := range []struct {
		flag string
		n    int
		want int
	}{
		{"", 20, 20}, {"", 0, 1}, {"3", 20, 3}, {"50", 20, 50}, {"1", 0, 1},
		{"10%", 20, 2}, {"10%", 19, 1}, {"25%", 7, 1}, {"1%", 20, 1}, {"100%", 20, 20}, {"99%", 20, 19},
	} {
		g, err := parseGuard(tc.flag)
		if got := g.budget(tc.n); err != nil || got != tc.want {
			t.Errorf("--max-unavailable %q of %d: got %d, %v, want %d", tc.flag, tc.n, got, err, tc.want)
		}
	}
	for _, bad := range []string{"-1", "x", "101%", "5.5%", "%", "-0%"} {
		if _, err := parseGuard(bad); exitCode(err) != exitUsage {
			t.Errorf("--max-unavailable %q: got %v, want a usage error", bad, err)
		}
	}
}

// A budget of 0 allows no disruption: it is refused, never taken for 1.
func TestAGuardOfZeroIsRefused(t *testing.T) {
	for _, zero := range []string{"0", "0%", "00"} {
		_, err := parseGuard(zero)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "a budget of 0 allows no machine to be unavailable") {
			t.Errorf("--max-unavailable %s: got %v, want a usage error that says a budget of 0 allows nothing", zero, err)
		}
	}
}

func TestTheGuardCountsMachinesAlreadyOutFirst(t *testing.T) {
	in := func(st client.State, ids ...string) []client.Slave {
		var out []client.Slave
		for _, id := range ids {
			out = append(out, client.Slave{ID: id, CurrentState: client.StateUpdate{State: st}})
		}
		return out
	}
	ids := func(ss []client.Slave) []string { return slaveIDs(ss) }
	sel := slices.Concat(in(client.Active, "a1", "a2", "a3", "a4"), in(client.Frozen, "f1"), in(client.Decommissioning, "d1"))

	t.Run("a freeze starts what the budget leaves after those already out", func(t *testing.T) {
		p := planChange(sel, client.Frozen, 4, 8, false)
		if got := ids(p.start); !slices.Equal(got, []string{"a1", "a2", "f1", "d1"}) || p.out != 2 {
			t.Errorf("got start %v, %d out, want a1 a2 (2 slots left) and f1 d1 (no slot taken), 2 out", got, p.out)
		}
		if got := ids(p.held); !slices.Equal(got, []string{"a3", "a4"}) {
			t.Errorf("got held %v, want a3 a4", got)
		}
	})
	t.Run("a budget already spent starts no ACTIVE machine", func(t *testing.T) {
		p := planChange(sel, client.StartingDecommission, 2, 8, false)
		if len(p.held) != 4 {
			t.Errorf("got held %v, want the 4 ACTIVE machines", ids(p.held))
		}
	})
	t.Run("an unknown id takes no part of the budget", func(t *testing.T) {
		p := planChange(append(in(client.Active, "a1", "a2"), client.Slave{ID: "nope"}), client.Frozen, 2, 8, false)
		if p.out != 0 || len(p.held) != 0 {
			t.Errorf("got %d out, held %v, want 0 out and a1 a2 started", p.out, ids(p.held))
		}
	})
	t.Run("activating takes no machine out", func(t *testing.T) {
		p := planChange(sel, client.Active, 1, 8, false)
		if len(p.held) != 0 || len(p.start) != 6 {
			t.Errorf("got start %v held %v, want all started", ids(p.start), ids(p.held))
		}
	})
	t.Run("a drain waited for starts the machines already draining first, budget at once", func(t *testing.T) {
		p := planChange(sel, client.StartingDecommission, 3, 8, true)
		if got := ids(p.start); got[0] != "d1" || len(got) != 6 || p.limit != 3 || p.out != 1 {
			t.Errorf("got start %v limit %d out %d, want d1 first, all 6, 3 at once, 1 out", got, p.limit, p.out)
		}
		if p := planChange(sel, client.StartingDecommission, 3, 2, true); p.limit != 2 {
			t.Errorf("got limit %d, want -j 2 to bound it", p.limit)
		}
	})
}

func TestLogFiltersMatchFileNameAndTaskHost(t *testing.T) {
	key := "web-api/2026/11/web-api-v42-1793491200000-0-node17-us_east_1a_3-1793491260000-stdout.gz"
	for _, tc := range []struct {
		f    logFilter
		want bool
	}{
		{logFilter{}, true},
		{logFilter{file: "stdout*"}, true},
		{logFilter{file: "*.gz"}, true},
		{logFilter{file: "stderr*"}, false},
		{logFilter{host: "node1*"}, true},
		{logFilter{host: "node2*"}, false},
		{logFilter{file: "stdout.gz", host: "node17"}, true},
	} {
		if got := tc.f.keeps(client.Log{Key: key}); got != tc.want {
			t.Errorf("%+v: got %t, want %t", tc.f, got, tc.want)
		}
	}
	if (logFilter{host: "*"}).keeps(client.Log{Key: "other/format/stdout.log"}) {
		t.Error("a key without a task id matched --host")
	}
	if !(logFilter{file: "stdout.log"}).keeps(client.Log{Key: "other/format/stdout.log"}) {
		t.Error("a key of another format did not match --file on its last segment")
	}
}

// withTasks is s with n running tasks, as the service shows a draining slave.
func withTasks(s client.Slave, n int) client.Slave {
	s.RunningTasks = &n
	return s
}

func TestProgressShowsEachStateAndTaskCountOnceAndAStatusLineOnATerminal(t *testing.T) {
	at := func(st client.State) client.Slave {
		return client.Slave{CurrentState: client.StateUpdate{State: st, Timestamp: 1}}
	}
	var plain, term bytes.Buffer
	for _, tc := range []struct {
		w        *bytes.Buffer
		terminal bool
	}{{&plain, false}, {&term, true}} {
		p := newProgress(tc.w, tc.terminal, client.Decommissioned)
		p.saw("m\x1b1", at(client.StartingDecommission))
		p.saw("m\x1b1", at(client.StartingDecommission))
		p.saw("m\x1b1", at(client.Decommissioning))
		p.saw("m\x1b1", withTasks(at(client.Decommissioning), 3))
		p.saw("m\x1b1", withTasks(at(client.Decommissioning), 3))
		p.saw("m\x1b1", withTasks(at(client.Decommissioning), 1))
		p.done()
	}
	lines := "m\\x1b1: STARTING_DECOMMISSION since " + when(1) + " (no report since the decommission)\n" +
		"m\\x1b1: DECOMMISSIONING since " + when(1) + " (last report: tasks still running)\n" +
		"m\\x1b1: DECOMMISSIONING since " + when(1) + " (3 tasks running)\n" +
		"m\\x1b1: DECOMMISSIONING since " + when(1) + " (1 task running)\n"
	if plain.String() != lines {
		t.Errorf("off a terminal: got %q, want %q", plain.String(), lines)
	}
	status := regexp.MustCompile(`\r\x1b\[K`).ReplaceAllString(term.String(), "|")
	want := "m\\x1b1: STARTING_DECOMMISSION since " + when(1) + " (no report since the decommission)\n" +
		"waiting for DECOMMISSIONED: 1 STARTING_DECOMMISSION, 0s|waiting for DECOMMISSIONED: 1 STARTING_DECOMMISSION, 0s|" +
		"m\\x1b1: DECOMMISSIONING since " + when(1) + " (last report: tasks still running)\n" +
		"waiting for DECOMMISSIONED: 1 DECOMMISSIONING, 0s|" +
		"m\\x1b1: DECOMMISSIONING since " + when(1) + " (3 tasks running)\n" +
		"waiting for DECOMMISSIONED: 1 DECOMMISSIONING, 3 tasks running, 0s|waiting for DECOMMISSIONED: 1 DECOMMISSIONING, 3 tasks running, 0s|" +
		"m\\x1b1: DECOMMISSIONING since " + when(1) + " (1 task running)\n" +
		"waiting for DECOMMISSIONED: 1 DECOMMISSIONING, 1 task running, 0s|"
	if status != want {
		t.Errorf("on a terminal: got %q, want %q", status, want)
	}
}
