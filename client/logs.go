package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogQuery narrows a GET log lookup. Zero values mean the service's
// defaults.
type LogQuery struct {
	Start, End      time.Time // the window [Start, End); zero for the service's
	ExcludeMetadata bool      // leave out StartTime and EndTime
	ListOnly        bool      // leave out the presigned URLs
	MaxPerPage      int       // request and deploy lookups: at most this many per bucket
	// LandedSince, instead of a window, asks for the logs that landed in S3
	// (their last modification) at or after it, whatever their span.
	LandedSince time.Time
}

func (q LogQuery) values(perPage bool) url.Values {
	v := url.Values{}
	if !q.Start.IsZero() {
		v.Set("start", strconv.FormatInt(q.Start.UnixMilli(), 10))
	}
	if !q.End.IsZero() {
		v.Set("end", strconv.FormatInt(q.End.UnixMilli(), 10))
	}
	if !q.LandedSince.IsZero() {
		v.Set("landedSince", strconv.FormatInt(q.LandedSince.UnixMilli(), 10))
	}
	if q.ExcludeMetadata {
		v.Set("excludeMetadata", "true")
	}
	if q.ListOnly {
		v.Set("list", "true")
	}
	if perPage && q.MaxPerPage > 0 {
		v.Set("maxPerPage", strconv.Itoa(q.MaxPerPage))
	}
	return v
}

// GetTaskLogs returns every log of one task, newest first (getTaskLogs).
// A malformed task id is a 400 *Error.
func (c *Client) GetTaskLogs(ctx context.Context, taskID string, q LogQuery) ([]Log, error) {
	return c.logs(ctx, getTaskLogs(taskID, q))
}

// GetRequestLogs returns every log of one request's tasks, newest first
// (getRequestLogs).
func (c *Client) GetRequestLogs(ctx context.Context, requestID string, q LogQuery) ([]Log, error) {
	return c.logs(ctx, getRequestLogs(requestID, q))
}

// GetDeployLogs returns every log of one deploy's tasks, newest first
// (getDeployLogs).
func (c *Client) GetDeployLogs(ctx context.Context, requestID, deployID string, q LogQuery) ([]Log, error) {
	return c.logs(ctx, getDeployLogs(requestID, deployID, q))
}

func (c *Client) logs(ctx context.Context, cl call) ([]Log, error) {
	a, err := c.do(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []Log
	if err := c.decode(cl.op, a, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SearchLogs returns one page of a log search (searchLogs). Send the
// page's ContinuationTokens back in the same request for the next page;
// SearchAllLogs does.
func (c *Client) SearchLogs(ctx context.Context, req SearchRequest) (*SearchResult, error) {
	// A search reads: sending it again is harmless.
	a, err := c.do(ctx, call{op: "searchLogs", method: http.MethodPost, path: "/api/logs/search", body: req, idempotent: true})
	if err != nil {
		return nil, err
	}
	var out SearchResult
	if err := c.decode("searchLogs", a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SearchAllLogs follows a search's pages to the last and returns every
// log, each once, in the order the pages gave them. MaxPerPage 0 asks for
// pages of 1,000.
func (c *Client) SearchAllLogs(ctx context.Context, req SearchRequest) ([]Log, error) {
	if req.MaxPerPage == 0 {
		req.MaxPerPage = 1000
	}
	var all []Log
	for {
		page, err := c.SearchLogs(ctx, req)
		if err != nil {
			return all, err
		}
		all = append(all, page.Results...)
		if page.LastPage {
			return all, nil
		}
		req.ContinuationTokens = page.ContinuationTokens
	}
}
