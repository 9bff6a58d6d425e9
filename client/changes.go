package client

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Changes is one answer of the change feed (Changes in openapi.yaml).
type Changes struct {
	Changes []SlaveChange `json:"changes"`
	Cursor  string        `json:"cursor"` // the cursor to follow from next
}

// SlaveChange is one change of the feed (SlaveChange): Type is "added",
// "stateChanged", "descriptionChanged", "deleted" or one of the expiring
// kinds; Update is the history
// entry of added and stateChanged, PreviousState the state a stateChanged
// left, Slave the slave as the change left it (nil when deleted). Sequence
// grows from one change of a slave to the next.
type SlaveChange struct {
	SlaveID       string       `json:"slaveId"`
	Type          string       `json:"type"`
	Timestamp     int64        `json:"timestamp"` // epoch ms
	Sequence      int64        `json:"sequence"`
	Update        *StateUpdate `json:"update,omitempty"`
	PreviousState State        `json:"previousState,omitempty"`
	Slave         *Slave       `json:"slave,omitempty"`
	// Expiring is the record of the expiring kinds: "expiringSet",
	// "expiringDeleted" and "expiringReverted".
	Expiring *Expiring `json:"expiring,omitempty"`
}

// Bookmark is a position in the feed with no change (Bookmark): the end of
// the initial state (initial=true), a stream's heartbeat or its last line.
type Bookmark struct {
	Type            string `json:"type"` // "bookmark"
	Cursor          string `json:"cursor"`
	InitialStateEnd bool   `json:"initialStateEnd,omitempty"`
	StreamEnd       bool   `json:"streamEnd,omitempty"`
}

// StreamError is a stream's line for a failure after its first line
// (StreamError); the bookmark after it says where to resume.
type StreamError struct {
	Type    string `json:"type"` // "error"
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// FollowChanges returns the changes after the cursor since (from now when
// it is empty) and the cursor to follow from next (followChanges). With wait
// above 0 (at most 20 s) the service holds the request until a change
// exists. A cursor older than the feed's retention is a 410 *Error: list
// the slaves again.
func (c *Client) FollowChanges(ctx context.Context, since string, wait time.Duration) (*Changes, error) {
	out, _, err := c.FollowChangesRaw(ctx, since, wait)
	return out, err
}

// FollowChangesRaw is FollowChanges with each change also as the service
// sent it, in the same order, for a client that passes changes on exactly
// (fleetctl watch -o json).
func (c *Client) FollowChangesRaw(ctx context.Context, since string, wait time.Duration) (*Changes, []json.RawMessage, error) {
	return c.FollowSelectedRaw(ctx, since, wait, Selector{})
}

// Selector picks slaves for the list and the feed, the service applying it
// (docs/behaviour.md "Selectors"): States any of, Host and Rack globs,
// every label of Labels, IDs any of; the zero Selector picks every slave.
// On the feed a change is sent when its slave was picked before it or
// after it.
type Selector struct {
	States     []State
	Host, Rack string
	Labels     map[string]string
	IDs        []string
}

// query adds the selector's parameters to q.
func (s Selector) query(q url.Values) {
	for _, st := range s.States {
		q.Add("state", string(st))
	}
	if s.Host != "" {
		q.Set("host", s.Host)
	}
	if s.Rack != "" {
		q.Set("rack", s.Rack)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		q.Add("label", k+"="+s.Labels[k])
	}
	for _, id := range s.IDs {
		q.Add("id", id)
	}
}

// FollowSelectedRaw is FollowChangesRaw of the changes of the slaves sel
// picked before or after them; an answer with no change still moves the
// cursor (a bookmark).
func (c *Client) FollowSelectedRaw(ctx context.Context, since string, wait time.Duration, sel Selector) (*Changes, []json.RawMessage, error) {
	q := url.Values{}
	sel.query(q)
	if since != "" {
		q.Set("since", since)
	}
	if wait > 0 {
		q.Set("wait", strconv.Itoa(int(wait/time.Second)))
	}
	a, err := c.do(ctx, call{op: "followChanges", method: http.MethodGet, path: "/api/slaves/changes", query: q, idempotent: true})
	if err != nil {
		return nil, nil, err
	}
	var out Changes
	if err := c.decode("followChanges", a, &out); err != nil {
		return nil, nil, err
	}
	var raw struct {
		Changes []json.RawMessage `json:"changes"`
	}
	if err := json.Unmarshal(a.body, &raw); err != nil {
		return nil, nil, fmt.Errorf("followChanges: decode answer: %w", err)
	}
	return &out, raw.Changes, nil
}
