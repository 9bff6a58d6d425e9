package machine

import (
	"path"
	"slices"
)

// Selector picks slaves, the same way for the list, the change feed and
// fleetctl (docs/behaviour.md "Selectors"): a slave is picked when its
// state is one of States, its host and rack match the globs Host and Rack
// (path.Match), every label of Labels is one of its attributes with that
// value, and its id is one of IDs. An empty part picks every slave, so the
// zero Selector picks all.
type Selector struct {
	States     []State
	Host, Rack string
	Labels     map[string]string
	IDs        []string
}

// All reports whether the selector picks every slave.
func (s Selector) All() bool {
	return len(s.States) == 0 && s.Host == "" && s.Rack == "" && len(s.Labels) == 0 && len(s.IDs) == 0
}

// Matches reports whether the selector picks sl.
func (s Selector) Matches(sl Slave) bool {
	if len(s.States) > 0 && !slices.Contains(s.States, sl.Current.State) {
		return false
	}
	if len(s.IDs) > 0 && !slices.Contains(s.IDs, sl.ID) {
		return false
	}
	if ok, _ := path.Match(s.Host, sl.Host); s.Host != "" && !ok {
		return false
	}
	if ok, _ := path.Match(s.Rack, sl.RackID); s.Rack != "" && !ok {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := sl.Attributes[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ValidGlob reports whether a host or rack pattern is one path.Match reads.
func ValidGlob(pattern string) bool {
	_, err := path.Match(pattern, "")
	return err == nil
}
