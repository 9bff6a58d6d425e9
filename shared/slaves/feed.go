package slaves

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/payload"
)

// CursorHeader carries, on a list of the slaves, the change feed's cursor
// of the state the list answered: following the feed from it misses no
// change after the list and repeats none in it (docs/behaviour.md "The
// change feed").
const CursorHeader = "X-Changes-Cursor"

// MaxWait bounds the wait query parameter of the change feed.
const MaxWait = 20 * time.Second

// Feed is what the handlers need from the change feed (change.Protocol).
type Feed interface {
	Changes(ctx context.Context, since string, wait time.Duration) (change.Page, error)
	Listed(ctx context.Context, list func(context.Context) error) (map[string]*machine.Slave, string, error)
}

// changesJSON is the answer of GET /api/slaves/changes.
type changesJSON struct {
	Changes []changeJSON `json:"changes"`
	Cursor  string       `json:"cursor"`
}

// changeJSON is one change of the feed. Sequence only grows from one
// change of a slave to the next: a consumer that sees one not above the
// last it saw of that slave has seen it already.
type changeJSON struct {
	SlaveID       string      `json:"slaveId"`
	Type          string      `json:"type"`
	Timestamp     int64       `json:"timestamp"`
	Sequence      int64       `json:"sequence"`
	Update        *updateJSON `json:"update,omitempty"`
	PreviousState string      `json:"previousState,omitempty"`
	Slave         *slaveJSON  `json:"slave,omitempty"`
}

// ChangeJSON is the body of one change as the feed answers it, and as its
// "Slave Changed" event carries it (shared/publish).
func ChangeJSON(c change.Change) ([]byte, error) {
	return json.Marshal(toChangeJSON(c))
}

func toChangeJSON(c change.Change) changeJSON {
	out := changeJSON{SlaveID: c.SlaveID, Type: string(c.Kind), Timestamp: c.At, Sequence: c.Seq, PreviousState: string(c.Previous)}
	if c.Entry != nil {
		out.Update = new(toUpdateJSON(*c.Entry))
	}
	if c.Slave != nil {
		out.Slave = new(toSlaveJSON(*c.Slave))
	}
	return out
}

// changes serves the change feed: the changes after the since cursor (from
// now without one), holding the request up to wait seconds for one.
func (h *Handler) changes(r *http.Request) (changesJSON, error) {
	q := r.URL.Query()
	wait, err := waitParam(q.Get("wait"))
	if err != nil {
		return changesJSON{}, err
	}
	page, err := h.store.Changes(r.Context(), q.Get("since"), wait)
	if err != nil {
		return changesJSON{}, err
	}
	out := changesJSON{Changes: []changeJSON{}, Cursor: page.Cursor}
	size := 0
	for i, c := range page.Changes {
		change := toChangeJSON(c)
		b, err := json.Marshal(change)
		if err != nil {
			return changesJSON{}, fmt.Errorf("encode change of %s: %w", c.SlaveID, err)
		}
		// No byte takes more than 6 as Lambda carries it: an answer of
		// changes within payload.Budget/6 always fits, and one change always does.
		if size += len(b); i > 0 && size > payload.Budget/6 {
			out.Cursor = page.After(i)
			break
		}
		out.Changes = append(out.Changes, change)
	}
	return out, nil
}

// waitParam reads the wait query parameter: whole seconds, 0 to MaxWait.
func waitParam(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || time.Duration(n)*time.Second > MaxWait {
		return 0, fault.Invalid("query param wait must be a whole number of seconds from 0 to %d", int(MaxWait/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}
