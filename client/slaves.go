package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// ListSlaves returns every slave, sorted by id; state, when not empty, keeps
// only the slaves in it (the service reads it leniently: "frozen" and
// "starting-decommission" work). It is listSlaves and, the same route,
// listSlavesTrailingSlash.
func (c *Client) ListSlaves(ctx context.Context, state string) ([]Slave, error) {
	out, _, err := c.ListSlavesAt(ctx, state)
	return out, err
}

// ListSlavesAt is ListSlaves with the cursor of the state the list answered
// (X-Changes-Cursor): following the change feed from it (FollowChanges)
// yields every change after the list and none it already holds.
func (c *Client) ListSlavesAt(ctx context.Context, state string) ([]Slave, string, error) {
	var sel Selector
	if state != "" {
		sel.States = []State{State(state)}
	}
	return c.ListSelected(ctx, sel)
}

// ListSelected is ListSlavesAt of the slaves sel picks.
func (c *Client) ListSelected(ctx context.Context, sel Selector) ([]Slave, string, error) {
	q := url.Values{}
	sel.query(q)
	a, err := c.do(ctx, call{op: "listSlaves", method: http.MethodGet, path: "/api/slaves", query: q, idempotent: true})
	if err != nil {
		return nil, "", err
	}
	var out []Slave
	if err := c.decode("listSlaves", a, &out); err != nil {
		return nil, "", err
	}
	return out, a.header.Get("X-Changes-Cursor"), nil
}

// GetSlave returns one slave (getSlave); an unknown id is a 404 *Error.
func (c *Client) GetSlave(ctx context.Context, id string) (*Slave, error) {
	a, err := c.do(ctx, getSlave(id))
	if err != nil {
		return nil, err
	}
	var out Slave
	if err := c.decode("getSlave", a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSlaveHistory returns the newest limit entries of the slave's state
// history, newest first (getSlaveHistory); limit 0 means the service's
// default, 1,000. An unknown slave has an empty history.
func (c *Client) GetSlaveHistory(ctx context.Context, id string, limit int) ([]StateUpdate, error) {
	a, err := c.do(ctx, getSlaveHistory(id, limit))
	if err != nil {
		return nil, err
	}
	var out []StateUpdate
	if err := c.decode("getSlaveHistory", a, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ListExpiring returns every pending expiring change, by machine id
// (listExpiring).
func (c *Client) ListExpiring(ctx context.Context) ([]Expiring, error) {
	a, err := c.do(ctx, listExpiring())
	if err != nil {
		return nil, err
	}
	var out []Expiring
	if err := c.decode("listExpiring", a, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ChangeOptions are the options of a state change.
type ChangeOptions struct {
	// IdempotencyKey names the change for retries; empty means a new
	// random key. Give your own to make retries of your own (after this
	// process died, say) safe: within 10 minutes the service answers the
	// same key with the first answer.
	IdempotencyKey string
	// DryRun asks what the change would answer and changes nothing: nil
	// when the service would apply it, else the *Error it would refuse it
	// with. The service decides, by the rules it applies to the change
	// (all but the decommission limit, which it checks as it writes).
	DryRun bool
	// IfMatch, when not nil, is the slave's sequence as the caller saw it
	// (Slave.Sequence): the change is made only if the slave is still at
	// it, else a 412 *Error (IsMoved) that says where it is now.
	IfMatch *int64
}

// ifMatch is the If-Match header of a sequence, "" for none.
func ifMatch(sequence *int64) string {
	if sequence == nil {
		return ""
	}
	return strconv.FormatInt(*sequence, 10)
}

// FreezeSlave moves the slave to FROZEN (freezeSlave). A 409 *Error when
// it is already frozen or decommissioning, a 404 when unknown.
func (c *Client) FreezeSlave(ctx context.Context, id string, req ChangeRequest, opts ChangeOptions) error {
	return c.change(ctx, "freezeSlave", id, "freeze", req, opts)
}

// DecommissionSlave moves the slave to STARTING_DECOMMISSION
// (decommissionSlave). A 400 *Error over the decommission limit, a 409 when
// the state refuses it, a 404 when unknown.
func (c *Client) DecommissionSlave(ctx context.Context, id string, req ChangeRequest, opts ChangeOptions) error {
	return c.change(ctx, "decommissionSlave", id, "decommission", req, opts)
}

// ActivateSlave moves the slave to ACTIVE (activateSlave). A 409 *Error
// when it is already active, a 404 when unknown.
func (c *Client) ActivateSlave(ctx context.Context, id string, req ChangeRequest, opts ChangeOptions) error {
	return c.change(ctx, "activateSlave", id, "activate", req, opts)
}

func (c *Client) change(ctx context.Context, op, id, action string, req ChangeRequest, opts ChangeOptions) error {
	key := opts.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	var body any
	if req != (ChangeRequest{}) {
		body = req
	}
	var query url.Values
	if opts.DryRun {
		query = url.Values{"dryRun": {"true"}}
	}
	_, err := c.do(ctx, call{op: op, method: http.MethodPost, path: "/api/slaves/slave/" + seg(id) + "/" + action, query: query, body: body, key: key, idempotent: true, ifMatch: ifMatch(opts.IfMatch)})
	return err
}

// DeleteSlave removes the slave, its history and its expiring record
// (deleteSlave); an unknown id is a 404 *Error. It is not sent again after
// a timeout: a delete that was applied would then answer 404.
func (c *Client) DeleteSlave(ctx context.Context, id string) error {
	return c.DeleteSlaveIf(ctx, id, nil)
}

// DeleteSlaveIf is DeleteSlave only while the slave is at sequence, when
// it is not nil: else a 412 *Error (IsMoved), and nothing is deleted.
func (c *Client) DeleteSlaveIf(ctx context.Context, id string, sequence *int64) error {
	_, err := c.do(ctx, call{op: "deleteSlave", method: http.MethodDelete, path: "/api/slaves/slave/" + seg(id), ifMatch: ifMatch(sequence)})
	return err
}

// DeleteExpiring removes the slave's expiring change, if any, so that its
// current state stays (deleteExpiring). It succeeds for an unknown slave.
func (c *Client) DeleteExpiring(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{op: "deleteExpiring", method: http.MethodDelete, path: "/api/slaves/slave/" + seg(id) + "/expiring", idempotent: true})
	return err
}

// DeleteDeadSlaves removes every DEAD slave with its history and expiring
// record (deleteDeadSlaves).
func (c *Client) DeleteDeadSlaves(ctx context.Context) error {
	_, err := c.do(ctx, call{op: "deleteDeadSlaves", method: http.MethodDelete, path: "/api/slaves/dead", idempotent: true})
	return err
}

// ImportOptions are the options of an import.
type ImportOptions struct {
	Replace       bool // mode=replace: a slave stored otherwise is replaced, not a conflict
	OverrideLimit bool // overrideLimit=true: slaves join the decommissioning set regardless of its limit
}

// Import imports slaves as the old API describes them (importSlaves), up
// to 100 at once, and returns each one's result in their order. It is sent
// again after a timeout: an import that was applied then answers unchanged.
func (c *Client) Import(ctx context.Context, slaves []ImportedSlave, opts ImportOptions) ([]ImportResult, error) {
	query := url.Values{}
	if opts.Replace {
		query.Set("mode", "replace")
	}
	if opts.OverrideLimit {
		query.Set("overrideLimit", "true")
	}
	if slaves == nil {
		slaves = []ImportedSlave{}
	}
	a, err := c.do(ctx, call{op: "importSlaves", method: http.MethodPost, path: "/api/slaves/import", query: query, body: ImportRequest{Slaves: slaves}, idempotent: true})
	if err != nil {
		return nil, err
	}
	var out ImportAnswer
	if err := c.decode("importSlaves", a, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}
