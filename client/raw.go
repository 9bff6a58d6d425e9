package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// The reads below also come raw: the answer's JSON as the service sent it,
// for a client that compares two APIs field by field (fleetctl diff) and
// must see a field the wire types do not know, which decoding into them
// would drop. Each read's call is built once, for its typed and its raw
// method.

func getSlave(id string) call {
	return call{op: "getSlave", method: http.MethodGet, path: "/api/slaves/slave/" + seg(id) + "/details", idempotent: true}
}

func getSlaveHistory(id string, limit int) call {
	var q url.Values
	if limit != 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	return call{op: "getSlaveHistory", method: http.MethodGet, path: "/api/slaves/slave/" + seg(id), query: q, idempotent: true}
}

func listExpiring() call {
	return call{op: "listExpiring", method: http.MethodGet, path: "/api/slaves/expiring", idempotent: true}
}

func getTaskLogs(taskID string, q LogQuery) call {
	return call{op: "getTaskLogs", method: http.MethodGet, path: "/api/logs/task/" + seg(taskID), query: q.values(false), idempotent: true}
}

func getRequestLogs(requestID string, q LogQuery) call {
	return call{op: "getRequestLogs", method: http.MethodGet, path: "/api/logs/request/" + seg(requestID), query: q.values(true), idempotent: true}
}

func getDeployLogs(requestID, deployID string, q LogQuery) call {
	return call{op: "getDeployLogs", method: http.MethodGet, path: "/api/logs/request/" + seg(requestID) + "/deploy/" + seg(deployID), query: q.values(true), idempotent: true}
}

// raw sends the read cl and returns its answer as it came.
func (c *Client) raw(ctx context.Context, cl call) (json.RawMessage, error) {
	a, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

// ListSlavesRaw is ListSlaves as the service sent it, asked as the old
// API spells the route, GET /api/slaves/ (listSlavesTrailingSlash).
func (c *Client) ListSlavesRaw(ctx context.Context, state string) (json.RawMessage, error) {
	var q url.Values
	if state != "" {
		q = url.Values{"state": {state}}
	}
	return c.raw(ctx, call{op: "listSlavesTrailingSlash", method: http.MethodGet, path: "/api/slaves/", query: q, idempotent: true})
}

// GetSlaveRaw is GetSlave as the service sent it.
func (c *Client) GetSlaveRaw(ctx context.Context, id string) (json.RawMessage, error) {
	return c.raw(ctx, getSlave(id))
}

// GetSlaveHistoryRaw is GetSlaveHistory as the service sent it.
func (c *Client) GetSlaveHistoryRaw(ctx context.Context, id string, limit int) (json.RawMessage, error) {
	return c.raw(ctx, getSlaveHistory(id, limit))
}

// ListExpiringRaw is ListExpiring as the service sent it.
func (c *Client) ListExpiringRaw(ctx context.Context) (json.RawMessage, error) {
	return c.raw(ctx, listExpiring())
}

// GetTaskLogsRaw is GetTaskLogs as the service sent it.
func (c *Client) GetTaskLogsRaw(ctx context.Context, taskID string, q LogQuery) (json.RawMessage, error) {
	return c.raw(ctx, getTaskLogs(taskID, q))
}

// GetRequestLogsRaw is GetRequestLogs as the service sent it.
func (c *Client) GetRequestLogsRaw(ctx context.Context, requestID string, q LogQuery) (json.RawMessage, error) {
	return c.raw(ctx, getRequestLogs(requestID, q))
}

// GetDeployLogsRaw is GetDeployLogs as the service sent it.
func (c *Client) GetDeployLogsRaw(ctx context.Context, requestID, deployID string, q LogQuery) (json.RawMessage, error) {
	return c.raw(ctx, getDeployLogs(requestID, deployID, q))
}
