package slaves

import (
	"net/url"
	"strings"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// selectorOf reads the selectors of the list and the change feed
// (docs/behaviour.md "Selectors"): state (repeatable, read leniently, an
// empty one is no filter), host and rack (globs), label (key=value,
// repeatable, all must hold) and id (repeatable). It returns fault.Invalid
// for a state, glob or label it cannot read.
func selectorOf(q url.Values) (machine.Selector, error) {
	var sel machine.Selector
	for _, v := range q["state"] {
		if v == "" {
			continue
		}
		st, err := machine.ParseQuery(v)
		if err != nil {
			return sel, err
		}
		sel.States = append(sel.States, st)
	}
	for name, glob := range map[string]*string{"host": &sel.Host, "rack": &sel.Rack} {
		*glob = q.Get(name)
		if !machine.ValidGlob(*glob) {
			return sel, fault.Invalid("query param %s must be a glob (path.Match: *, ?, [a-z]), got %q", name, *glob)
		}
	}
	for _, l := range q["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return sel, fault.Invalid("query param label must be key=value, got %q", l)
		}
		if old, dup := sel.Labels[k]; dup && old != v {
			return sel, fault.Invalid("query param label names %s twice (%q and %q): no slave can match", k, old, v)
		}
		if sel.Labels == nil {
			sel.Labels = map[string]string{}
		}
		sel.Labels[k] = v
	}
	for _, id := range q["id"] {
		if id != "" {
			sel.IDs = append(sel.IDs, id)
		}
	}
	return sel, nil
}
