package slaves

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops/fleet/shared/machine"
)

// encodedList is a slave list as it is answered: each slave is encoded as
// the store hands it over, and the encodings are sorted by id. A fleet of
// 100,000 slaves is then held as its 40 MB of JSON elements, never as
// decoded slaves with their attribute maps (docs/decisions.md, "The fleet
// list is held encoded").
type encodedList struct {
	slaves []encodedSlave
	sel    machine.Selector                    // the slaves the list holds
	encode func(machine.Slave) ([]byte, error) // a slave as the answer holds it
}

type encodedSlave struct {
	id   string
	json json.RawMessage
}

// add encodes s when the list's selector picks it; the store calls it with
// every slave it reads for the list.
func (l *encodedList) add(s machine.Slave) error {
	if !l.sel.Matches(s) {
		return nil
	}
	b, err := l.encode(s)
	if err != nil {
		return fmt.Errorf("encode slave %s: %w", s.ID, err)
	}
	l.slaves = append(l.slaves, encodedSlave{id: s.ID, json: b})
	return nil
}

// correct replaces the slaves of fix in the list with the state fix holds
// of each (leaving out those it holds nil, deleted) where the selector
// picks it.
func (l *encodedList) correct(fix map[string]*machine.Slave) error {
	if len(fix) == 0 {
		return nil
	}
	l.slaves = slices.DeleteFunc(l.slaves, func(s encodedSlave) bool {
		_, ok := fix[s.id]
		return ok
	})
	for _, s := range fix {
		if s != nil {
			if err := l.add(*s); err != nil {
				return err
			}
		}
	}
	return nil
}

// sorted returns the elements of the list in id order, for web.JSON.
func (l *encodedList) sorted() []json.RawMessage {
	slices.SortFunc(l.slaves, func(a, b encodedSlave) int { return strings.Compare(a.id, b.id) })
	out := make([]json.RawMessage, len(l.slaves))
	for i, s := range l.slaves {
		out[i] = s.json
	}
	return out
}
