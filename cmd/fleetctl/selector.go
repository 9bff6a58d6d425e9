package main

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fleetops/fleet/client"
)

// selector is how freeze, decommission and activate pick machines without
// naming them: a state, globs over host and rack (path.Match), and
// attributes that must all be equal.
type selector struct {
	state, host, rack string
	labels            []string
}

func (s *selector) register(f *pflag.FlagSet) {
	f.StringVar(&s.state, "state", "", "select the machines in this state (active, frozen, ...)")
	f.StringVar(&s.host, "host", "", "select the machines whose host matches this glob (node-1*)")
	f.StringVar(&s.rack, "rack", "", "select the machines whose rack matches this glob")
	f.StringArrayVarP(&s.labels, "label", "l", nil, "select the machines with this attribute, key=value (repeatable: all must match)")
}

// given reports whether any selector flag was set.
func (s *selector) given() bool {
	return s.state != "" || s.host != "" || s.rack != "" || len(s.labels) > 0
}

// machineFilter is a selector read and checked.
type machineFilter struct {
	state      client.State
	host, rack string
	labels     map[string]string
}

// filter checks the selector's flags: a known state, well-formed globs,
// key=value labels.
func (s *selector) filter() (machineFilter, error) {
	f := machineFilter{host: s.host, rack: s.rack, labels: map[string]string{}}
	if s.state != "" {
		st, err := parseState(s.state)
		if err != nil {
			return f, err
		}
		f.state = st
	}
	for flag, glob := range map[string]string{"--host": s.host, "--rack": s.rack} {
		if _, err := path.Match(glob, ""); err != nil {
			return f, usageError("%s %q: %v", flag, glob, err)
		}
	}
	for _, l := range s.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return f, usageError("-l %q: want key=value", l)
		}
		if old, dup := f.labels[k]; dup && old != v {
			return f, usageError("-l %s: both %q and %q can never match", k, old, v)
		}
		f.labels[k] = v
	}
	return f, nil
}

// maxNamedIDs bounds how many machines a feed request names (id=...): a
// URL stays well under API Gateway's limits; more follow the whole feed.
const maxNamedIDs = 50

// selector is the filter as the service applies it to the list and the
// feed.
func (f machineFilter) selector() client.Selector {
	sel := client.Selector{Host: f.host, Rack: f.rack, Labels: f.labels}
	if f.state != "" {
		sel.States = []client.State{f.state}
	}
	return sel
}

// matches reports whether a machine is selected.
func (f machineFilter) matches(s client.Slave) bool {
	if f.state != "" && s.CurrentState.State != f.state {
		return false
	}
	if ok, _ := path.Match(f.host, s.Host); f.host != "" && !ok {
		return false
	}
	if ok, _ := path.Match(f.rack, s.RackID); f.rack != "" && !ok {
		return false
	}
	for k, v := range f.labels {
		if got, ok := s.Attributes[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// guard is --max-unavailable as given: a count of machines, or a
// percentage of the selection. Zero is refused: a budget of 0 allows no
// disruption (as a PodDisruptionBudget of maxUnavailable 0 blocks every
// eviction), so the change could start nothing.
type guard struct {
	n       int
	percent bool
}

const guardUsage = "--max-unavailable %q: want a count of 1 or more or a percentage from 1%% to 100%%"

// parseGuard reads --max-unavailable; empty means no guard (nil).
func parseGuard(s string) (*guard, error) {
	if s == "" {
		return nil, nil
	}
	text, percent := strings.CutSuffix(s, "%")
	v, err := strconv.Atoi(text)
	if err != nil || v < 0 || (percent && v > 100) {
		return nil, usageError(guardUsage, s)
	}
	if v == 0 {
		return nil, usageError("--max-unavailable %s: a budget of 0 allows no machine to be unavailable, so the change would start none; give 1 or more, or leave the guard out", s)
	}
	return &guard{n: v, percent: percent}, nil
}

// budget is how many machines of a selection of n may be unavailable at
// once: the count, or the percentage of n rounded down, but at least 1,
// since a percentage above 0 asks for some progress however small the
// selection (10% of 5 machines is 1). No guard allows all of them.
func (g *guard) budget(n int) int {
	switch {
	case g == nil:
		return max(n, 1)
	case g.percent:
		return max(n*g.n/100, 1)
	}
	return g.n
}

// draining reports whether a state is a decommission in progress.
func draining(s client.State) bool {
	return s == client.StartingDecommission || s == client.Decommissioning
}

// guardPlan is which machines of a selection a change starts.
type guardPlan struct {
	start []client.Slave // in the order to start them
	held  []client.Slave // not started: the guard is spent
	out   int            // selected machines unavailable before the change
	limit int            // changes in progress at once
}

// planChange applies the guard to a selection. Unavailable means out of
// ACTIVE, except for a decommission followed to its end (wait), where it
// means draining (STARTING_DECOMMISSION or DECOMMISSIONING): a
// DECOMMISSIONED machine is gone for good and no longer a disruption in
// progress, the way a PodDisruptionBudget counts disruptions under way.
//
// Without wait the guard is spent once: machines already unavailable use
// it up first, then each ACTIVE machine the change takes out of ACTIVE;
// the others are held. With wait every machine is started in turn, at most
// budget draining at once: those already draining come first (they are
// only waited for), so a new drain starts only when fewer than budget of
// the earlier ones are left.
func planChange(sel []client.Slave, target client.State, budget, jobs int, wait bool) guardPlan {
	var p guardPlan
	if wait {
		for _, s := range sel {
			if draining(s.CurrentState.State) {
				p.out++
				p.start = append(p.start, s)
			}
		}
		for _, s := range sel {
			if !draining(s.CurrentState.State) {
				p.start = append(p.start, s)
			}
		}
		p.limit = min(jobs, budget)
		return p
	}
	for _, s := range sel {
		// An id the list did not hold has no state: its change will
		// answer 404, and it takes no part of the budget.
		if st := s.CurrentState.State; st != "" && st != client.Active {
			p.out++
		}
	}
	slots := budget - p.out
	for _, s := range sel {
		takesOut := s.CurrentState.State == client.Active && target != client.Active
		switch {
		case !takesOut:
			p.start = append(p.start, s)
		case slots > 0:
			slots--
			p.start = append(p.start, s)
		default:
			p.held = append(p.held, s)
		}
	}
	p.limit = jobs
	return p
}

// describeGuard says what the guard allowed, for the summary line.
func (p guardPlan) describeGuard(budget int, wait bool) string {
	if wait {
		return fmt.Sprintf("at most %d draining at once, %d already were", budget, p.out)
	}
	return fmt.Sprintf("at most %d out of ACTIVE, %d already were", budget, p.out)
}

// checkPatterns refuses, as a usage error, a machine pattern that is not a
// valid glob (path.Match's syntax).
func checkPatterns(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return usageError("pattern %q: %v", p, err)
		}
	}
	return nil
}
