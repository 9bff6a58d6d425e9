package slaves

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/fleetops/fleet/shared/exactjson"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"

	"golang.org/x/sync/errgroup"
)

// MaxImport is the most slaves one import may hold.
const MaxImport = 100

// MaxImportBody is the largest body an import may have, instead of
// web.MaxBody: a slave with a long history takes far more than 64 KiB, and
// this stays within what a Lambda function is handed (6 MB, of which the
// body is part of the event, its quotes escaped) (docs/decisions.md
// "Import").
const MaxImportBody = 4 << 20

// importConcurrency is how many slaves of one import are written at once.
const importConcurrency = 8

// importRoute serves the import: 200 with the result of each slave, or the
// error, counted once in the StateChanges metric as a change route is
// (counted), refusals by the route table included.
type importRoute func(r *http.Request) (importAnswerJSON, error)

func (f importRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	answer, err := f(r)
	if err != nil {
		f.Fail(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, answer)
	f.count(r, http.StatusOK)
}

// Fail answers and counts a request the route table stopped.
func (f importRoute) Fail(w http.ResponseWriter, r *http.Request, err error) {
	web.Error(w, r, err)
	f.count(r, web.Status(err))
}

func (importRoute) count(r *http.Request, status int) {
	web.Metrics(r).Emit([]metrics.Dimension{{Name: "Action", Value: "import"}, {Name: "Result", Value: web.Outcome(status)}},
		metrics.Metric{Name: metrics.StateChanges, Value: 1, Unit: metrics.Count})
}

// importOptions reads the import's query: mode (empty, or replace) and
// overrideLimit (true or false). An import has no dry run.
func importOptions(r *http.Request) (machine.ImportOptions, error) {
	q := r.URL.Query()
	var opts machine.ImportOptions
	switch v := q.Get("mode"); v {
	case "":
	case "replace":
		opts.Replace = true
	default:
		return opts, fault.Invalid("mode must be replace, or absent, got %q", v)
	}
	var err error
	if opts.OverrideLimit, err = flag(q, "overrideLimit"); err != nil {
		return opts, err
	}
	if q.Has("dryRun") {
		return opts, fault.Invalid("an import has no dry run: importing a slave stored so already changes nothing")
	}
	return opts, nil
}

// importSlaves imports a batch of slaves as the old API describes them
// (docs/behaviour.md "Import"), importConcurrency at a time, and answers
// each one's result in the order of the request. A slave refused, or in
// conflict, does not stop the others; a failure of the store does, and is
// the answer (importing the batch again is safe: what was imported is
// then unchanged).
func (h *Handler) importSlaves(r *http.Request) (importAnswerJSON, error) {
	opts, err := importOptions(r)
	if err != nil {
		return importAnswerJSON{}, err
	}
	var body importJSON
	present, err := web.DecodeBodyUpTo(r, &body, MaxImportBody)
	switch {
	case err != nil:
		return importAnswerJSON{}, err
	case !present || body.Slaves == nil:
		return importAnswerJSON{}, fault.Invalid("request body must name the slaves to import")
	case len(body.Slaves) > MaxImport:
		return importAnswerJSON{}, fault.Invalid("an import holds at most %d slaves, got %d", MaxImport, len(body.Slaves))
	}
	results := make([]importResultJSON, len(body.Slaves))
	imports := make([]*machine.Import, len(body.Slaves))
	named := map[string]bool{}
	for i, raw := range body.Slaves {
		imp, err := decodeImport(raw)
		results[i].ID = imp.Slave.ID
		if err == nil && named[imp.Slave.ID] {
			err = fault.Invalid("slave %s is named more than once in this import", imp.Slave.ID)
		}
		if err == nil {
			err = imp.Validate(h.limits.MaxExpiring)
		}
		if err != nil {
			results[i].refuse(err)
			continue
		}
		named[imp.Slave.ID] = true
		imports[i] = &imp
	}
	g, ctx := errgroup.WithContext(r.Context())
	g.SetLimit(importConcurrency)
	for i, imp := range imports {
		if imp == nil {
			continue
		}
		g.Go(func() error {
			var result machine.ImportResult
			err := h.store.Import(ctx, imp.Slave.ID, machine.ImportSlave(*imp, opts, h.limits, h.clock, &result))
			switch {
			case errors.Is(err, machine.ErrOverLimit):
				results[i].refuse(err)
			case err == nil, result == machine.Refused || result == machine.Conflicted:
				results[i].Result, results[i].Reason = string(result), fault.Message(err)
			default:
				return fmt.Errorf("import slave %s: %w", imp.Slave.ID, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return importAnswerJSON{}, err
	}
	counts := map[string]int{}
	for _, res := range results {
		counts[res.Result]++
	}
	for _, res := range []machine.ImportResult{machine.Imported, machine.Unchanged, machine.Conflicted, machine.Refused} {
		web.Note(r, string(res), counts[string(res)])
	}
	return importAnswerJSON{Results: results}, nil
}

func (res *importResultJSON) refuse(err error) {
	res.Result, res.Reason = string(machine.Refused), fault.Message(err)
}

// The wire of the import (openapi.yaml ImportRequest, ImportAnswer).

type importJSON struct {
	// Slaves are decoded one by one (decodeImport), so that a slave that
	// is not what the schema says is refused alone.
	Slaves []json.RawMessage `json:"slaves"`
}

type importedSlaveJSON struct {
	Slave    *importSlaveJSON `json:"slave"`
	History  []updateJSON     `json:"history"`
	Expiring *expiringJSON    `json:"expiring,omitempty"`
}

// importSlaveJSON is SchedulerSlave as the old API wrote it: its id as id
// or slaveId; its sequence, this service's own, is ignored.
type importSlaveJSON struct {
	ID           string            `json:"id"`
	SlaveID      string            `json:"slaveId"`
	FirstSeenAt  int64             `json:"firstSeenAt"`
	CurrentState *updateJSON       `json:"currentState"`
	Host         string            `json:"host"`
	RackID       string            `json:"rackId"`
	Attributes   map[string]string `json:"attributes"`
	Resources    json.RawMessage   `json:"resources,omitempty"`
	RunningTasks *int              `json:"runningTasks,omitempty"`
}

type importAnswerJSON struct {
	Results []importResultJSON `json:"results"`
}

type importResultJSON struct {
	ID     string `json:"id"`
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
}

// decodeImport reads one slave of an import into the domain's terms,
// with the id it names whenever it names one: fault.Invalid when it is not
// an object of the import's schema, or a message or actionId is over its
// bound. What the domain checks (machine.Import.Validate) is left to it.
func decodeImport(raw json.RawMessage) (machine.Import, error) {
	var in importedSlaveJSON
	if err := exactjson.Unmarshal(raw, &in); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return machine.Import{}, fault.Invalid("field %s of the slave has the wrong type", typeErr.Field)
		}
		return machine.Import{}, fault.Invalid("a slave to import must be a JSON object")
	}
	s := in.Slave
	if s == nil {
		return machine.Import{}, fault.Invalid("a slave to import must have its record (slave)")
	}
	id := s.ID
	if id == "" {
		id = s.SlaveID
	}
	imp := machine.Import{Slave: machine.Slave{ID: id, FirstSeenAt: s.FirstSeenAt, Host: s.Host, RackID: s.RackID,
		Attributes: s.Attributes, RunningTasks: s.RunningTasks}}
	if s.CurrentState == nil {
		return imp, fault.Invalid("slave %s has no currentState", id)
	}
	if r := bytes.TrimSpace(s.Resources); len(r) > 0 && string(r) != "null" {
		if r[0] != '{' {
			return imp, fault.Invalid("the resources of slave %s must be a JSON object", id)
		}
		imp.Slave.Resources = json.RawMessage(r)
	}
	var err error
	if imp.Slave.Current, err = importedUpdate(id, *s.CurrentState); err != nil {
		return imp, err
	}
	for _, u := range in.History {
		entry, err := importedUpdate(id, u)
		if err != nil {
			return imp, err
		}
		imp.History = append(imp.History, entry)
	}
	if e := in.Expiring; e != nil {
		req, err := e.ExpiringAPIRequestObject.changeRequest()
		if err != nil {
			return imp, fault.Invalid("the expiring change of slave %s: %s", id, fault.Message(err))
		}
		if utf8.RuneCountInString(e.ActionID) > MaxActionID {
			return imp, fault.Invalid("the expiring change of slave %s: actionId must be at most %d characters", id, MaxActionID)
		}
		imp.Expiring = &machine.Expiring{MachineID: e.MachineID, User: e.User, StartMillis: e.StartMillis, ActionID: e.ActionID,
			RevertTo: machine.State(e.RevertToState), KillTasksOnDecommissionTimeout: e.KillTasksOnDecommissionTimeout, Request: req}
	}
	return imp, nil
}

// importedUpdate is a history entry of slave id as the old API wrote it,
// its message within MaxMessage.
func importedUpdate(id string, u updateJSON) (machine.Update, error) {
	if utf8.RuneCountInString(u.Message) > MaxMessage {
		return machine.Update{}, fault.Invalid("a history entry of slave %s has a message over %d characters", id, MaxMessage)
	}
	return machine.Update{SlaveID: u.ObjectID, State: machine.State(u.State), Timestamp: u.Timestamp, User: u.User, Message: u.Message}, nil
}
