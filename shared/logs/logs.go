// Package logs serves /api/logs (docs/behaviour.md "Task logs"): task-log lookups by task, by
// request and by deploy, and the paginated search, over the objects the
// logstore adapter lists in S3. Prefixes come from the logkey domain.
package logs

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/access"
	"github.com/fleetops/fleet/shared/callcount"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/metrics"
	"github.com/fleetops/fleet/shared/web"
	"golang.org/x/sync/errgroup"
)

// Store is what the lookups need from S3. All and Page return
// fault.NotFound when, and only when, the bucket does not exist.
type Store interface {
	All(ctx context.Context, bucket, prefix string) ([]logkey.Object, error)
	Page(ctx context.Context, bucket, prefix, after string, limit int) ([]logkey.Object, bool, error)
	Times(ctx context.Context, bucket, key string) (start, end *int64, err error)
	Links(ctx context.Context, bucket, key string, ttl time.Duration) (get, download string, err error)
}

// Index is what the lookups read instead of listing the buckets when the
// task-log index is on (docs/behaviour.md "Task-log index"): the logs of a
// task, request or deploy whose span overlaps the window, with their start
// and end times, in one query. Page is the search's: Store.Page of one
// bucket and prefix, kept to the logs of of (a task when of.ID is set, else
// a deploy when of.DeployID is, else a request) over w. Landed is the logs
// of of that landed in S3 (last modification) at or after since, whatever
// their span. Errors: fault.Unavailable and fault.Timeout.
type Index interface {
	Task(ctx context.Context, taskID string, w logkey.Window) ([]logkey.Entry, error)
	Request(ctx context.Context, requestID string, w logkey.Window) ([]logkey.Entry, error)
	Deploy(ctx context.Context, requestID, deployID string, w logkey.Window) ([]logkey.Entry, error)
	Page(ctx context.Context, of logkey.Task, bucket, prefix, after string, limit int, w logkey.Window) ([]logkey.Entry, bool, error)
	Landed(ctx context.Context, of logkey.Task, since int64) ([]logkey.Entry, error)
}

// Completeness tells which of the log buckets the index holds completely
// (docs/behaviour.md "Reconciliation"): a reconciliation found their
// notifications on and finished. Errors: those of Index.
type Completeness interface {
	Complete(ctx context.Context, buckets []string) (map[string]bool, error)
}

// Bounds on the S3 calls one lookup makes at once. The lists of a lookup
// are one wave (a year of monthly prefixes is 12). HEADs wait for the lists,
// so their pool is wider: 50 logs are one wave, and the lookup's critical
// path is two round trips, not 1 + ceil(50/16) (BENCHMARKS.md).
const (
	listWorkers = 16
	headWorkers = 64
)

// maxScopes is the most tasks and requests one lookup may name (docs/behaviour.md "Task logs").
const maxScopes = 100

// maxSearchPage is the largest maxPerPage of a search (docs/behaviour.md "Task logs").
const maxSearchPage = 1000

// Config is how the log routes read the task logs; the function's
// configuration (LOG_BUCKETS and the rest, see config.Logs) converts to it.
type Config struct {
	Buckets     []string      // none means S3 is not configured: lookups answer 404
	Format      logkey.Format // the task uploader's key format
	URLTTL      time.Duration // lifetime of presigned links
	Lookback    time.Duration // window of request and deploy lookups without start
	ListTimeout time.Duration // deadline of the listing phase
	LinkTimeout time.Duration // deadline of the metadata and link phase
	Policy      access.Policy // who may read
}

// Handler serves /api/logs.
type Handler struct {
	store    Store
	index    Index        // nil: lookups list the buckets
	complete Completeness // nil: the index holds every bucket completely
	cfg      Config
	now      func() time.Time
	routes   *web.Routes
}

// New returns the handler of the log routes.
func New(store Store, cfg Config) *Handler {
	h := &Handler{store: store, cfg: cfg, now: time.Now, routes: web.NewRoutes(cfg.Policy)}
	h.routes.HandleNamed("GET /api/logs/task/{taskId}", access.Read, counted{"task", h.task})
	h.routes.HandleNamed("GET /api/logs/request/{requestId}", access.Read, counted{"request", h.request})
	h.routes.HandleNamed("GET /api/logs/request/{requestId}/deploy/{deployId}", access.Read, counted{"deploy", h.deploy})
	h.routes.Handle("POST /api/logs/search", access.Read, counted{"search", h.search})
	return h
}

// ReadsIndex makes the lookups and the search read index, with exact
// windows, instead of listing the buckets; links are still presigned by the
// store. It returns h.
func (h *Handler) ReadsIndex(index Index) *Handler {
	h.index = index
	return h
}

// KnowsComplete makes the lookups and the search read the index only for
// the buckets c says it holds completely, and list the others. It returns
// h.
func (h *Handler) KnowsComplete(c Completeness) *Handler {
	h.complete = c
	return h
}

// IndexBucketsHeader names, on every answer of a lookup or a search with
// the index on, the buckets it answered from the index, comma separated:
// their logs are those S3's events had announced when it answered, seconds
// behind the uploads; the other buckets were listed (docs/behaviour.md
// "Reconciliation").
const IndexBucketsHeader = "X-Log-Index-Buckets"

// fromIndex chooses, once per request, the buckets it reads from the index:
// every one of them when nothing tells completeness, none when the index is
// off, else those known complete. It names them in IndexBucketsHeader,
// and notes the others on the log line (listed_buckets) and counts them
// (ListedLogBuckets).
func (h *Handler) fromIndex(w http.ResponseWriter, r *http.Request) func(bucket string) bool {
	if h.index == nil {
		return func(string) bool { return false }
	}
	complete := map[string]bool{}
	if h.complete == nil {
		for _, b := range h.cfg.Buckets {
			complete[b] = true
		}
	} else if got, err := h.complete.Complete(r.Context(), h.cfg.Buckets); err != nil {
		// Listing is slower, never wrong.
		web.Note(r, "completeness_error", err.Error())
	} else {
		complete = got
	}
	var in, out []string
	for _, b := range h.cfg.Buckets {
		if complete[b] {
			in = append(in, b)
		} else {
			out = append(out, b)
		}
	}
	w.Header().Set(IndexBucketsHeader, strings.Join(in, ","))
	if len(out) > 0 {
		web.Note(r, "listed_buckets", strings.Join(out, ","))
		web.Metrics(r).Emit(nil, metrics.Metric{Name: metrics.ListedLogBuckets, Value: float64(len(out)), Unit: metrics.Count})
	}
	return func(bucket string) bool { return complete[bucket] }
}

// over returns a copy of h over buckets alone, reading the index or not.
func (h *Handler) over(buckets []string, index bool) *Handler {
	c := *h
	c.cfg.Buckets = buckets
	if !index {
		c.index = nil
	}
	return &c
}

// Routes returns the route table, which declares each route's permission.
func (h *Handler) Routes() *web.Routes { return h.routes }

// counted is a lookup route of scope. Fail notes and counts a lookup the
// route table stopped, as the route counts those it answers.
type counted struct {
	scope string
	serve http.HandlerFunc
}

func (c counted) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.serve(w, r) }

func (c counted) Fail(w http.ResponseWriter, r *http.Request, err error) {
	noteIDs(r)
	countLookup(r, c.scope, 0)
	web.Error(w, r, err)
}

// noteIDs notes the ids the route's path names on the log line. The
// scheduler's request id goes there as log_request_id: request_id is the
// HTTP request's own id.
func noteIDs(r *http.Request) {
	web.Note(r, "task_id", r.PathValue("taskId"))
	web.Note(r, "log_request_id", r.PathValue("requestId"))
	web.Note(r, "deploy_id", r.PathValue("deployId"))
}

// ServeHTTP serves one request. Every answer, errors included, carries
// Cache-Control: no-store: lookups hold presigned URLs (docs/behaviour.md "Wire conventions").
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	h.routes.ServeHTTP(w, r)
}

// query is the parsed query string of a GET lookup.
type query struct {
	start, end      *int64
	landedSince     *int64
	excludeMetadata bool
	list            bool
	maxPerPage      int // 0: no cap
}

func parseQuery(r *http.Request, paged bool) (query, error) {
	v := r.URL.Query()
	var q query
	var err error
	if q.start, err = millis(v, "start"); err != nil {
		return q, err
	}
	if q.end, err = millis(v, "end"); err != nil {
		return q, err
	}
	if q.landedSince, err = millis(v, "landedSince"); err != nil {
		return q, err
	}
	if q.landedSince != nil && (q.start != nil || q.end != nil) {
		return q, fault.Invalid("landedSince answers what landed since, whatever the window: it takes no start or end")
	}
	q.excludeMetadata = strings.EqualFold(v.Get("excludeMetadata"), "true")
	q.list = strings.EqualFold(v.Get("list"), "true")
	if paged && v.Has("maxPerPage") {
		n, err := strconv.Atoi(v.Get("maxPerPage"))
		if err != nil || n < 1 {
			return q, fault.Invalid("maxPerPage must be a whole number ≥ 1, got %q", v.Get("maxPerPage"))
		}
		q.maxPerPage = n
	}
	return q, nil
}

// millis reads a time parameter: 13 decimal digits of epoch ms.
func millis(v map[string][]string, name string) (*int64, error) {
	s, ok := v[name]
	if !ok {
		return nil, nil
	}
	n, err := strconv.ParseInt(s[0], 10, 64)
	if len(s[0]) != 13 || strings.Trim(s[0], "0123456789") != "" || err != nil {
		return nil, fault.Invalid("%s must be a time in epoch milliseconds (13 digits), got %q", name, s[0])
	}
	return &n, nil
}

func (h *Handler) task(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("taskId")
	noteIDs(r)
	h.lookup(w, r, "task", id, false, func(q query, now int64) (target, error) {
		t, err := logkey.ParseTaskID(id)
		if err != nil {
			return target{}, err
		}
		return target{
			scope:  logkey.TaskScope(t),
			of:     t,
			window: logkey.TaskWindow(t, q.start, q.end, now),
			fresh:  true,
			index: func(ctx context.Context, w logkey.Window) ([]logkey.Entry, error) {
				return h.index.Task(ctx, t.ID, w)
			},
		}, nil
	})
}

// request serves a request's logs.
func (h *Handler) request(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("requestId")
	noteIDs(r)
	h.lookup(w, r, "request", id, true, func(q query, now int64) (target, error) {
		if err := logkey.CheckRequestID(id); err != nil {
			return target{}, err
		}
		return target{
			scope:  logkey.RequestScope(id),
			of:     logkey.Task{RequestID: id},
			window: logkey.LookbackWindow(q.start, q.end, h.cfg.Lookback, now),
			index: func(ctx context.Context, w logkey.Window) ([]logkey.Entry, error) {
				return h.index.Request(ctx, id, w)
			},
		}, nil
	})
}

func (h *Handler) deploy(w http.ResponseWriter, r *http.Request) {
	req, dep := r.PathValue("requestId"), r.PathValue("deployId")
	noteIDs(r)
	h.lookup(w, r, "deploy", req+"/"+dep, true, func(q query, now int64) (target, error) {
		if err := logkey.CheckRequestID(req); err != nil {
			return target{}, err
		}
		if err := logkey.CheckDeployID(dep); err != nil {
			return target{}, err
		}
		return target{
			scope:  logkey.DeployScope(req, dep),
			of:     logkey.Task{RequestID: req, DeployID: dep},
			window: logkey.LookbackWindow(q.start, q.end, h.cfg.Lookback, now),
			index: func(ctx context.Context, w logkey.Window) ([]logkey.Entry, error) {
				return h.index.Deploy(ctx, req, dep, w)
			},
		}, nil
	})
}

// target is what a GET lookup looks for: the logs of a scope over a window,
// read from the index when it is on, else listed under the scope's prefixes.
type target struct {
	scope  logkey.Scope
	of     logkey.Task // the task, deploy or request, as Index.Page names it
	window logkey.Window
	index  func(ctx context.Context, w logkey.Window) ([]logkey.Entry, error)
	fresh  bool // on the index, also list the newest prefixes (findIndexed)

	// landedSince, when set, answers the logs that landed at or after it
	// instead of those of the window, among the keys the window reaches
	// (docs/behaviour.md "Task logs", landedSince).
	landedSince *int64
}

// lookup answers a GET lookup of what: the logs of the target that resolve
// returns whose span overlaps its window, exactly (docs/behaviour.md "Task
// logs"), from the index when it is on, else from every object under the
// scope's prefixes in every bucket; newest first. scope names the lookup in
// the metrics.
func (h *Handler) lookup(w http.ResponseWriter, r *http.Request, scope, what string, paged bool, resolve func(q query, now int64) (target, error)) {
	logs, err := h.find(w, r, what, paged, resolve)
	countLookup(r, scope, len(logs))
	if err != nil {
		web.Error(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, logs)
}

func (h *Handler) find(w http.ResponseWriter, r *http.Request, what string, paged bool, resolve func(q query, now int64) (target, error)) ([]logJSON, error) {
	q, err := parseQuery(r, paged)
	if err != nil {
		return nil, err
	}
	if len(h.cfg.Buckets) == 0 {
		return nil, fault.NotFound("S3 configuration was absent")
	}
	now := h.now().UnixMilli()
	t, err := resolve(q, now)
	if err != nil {
		return nil, err
	}
	t.window.Plain = q.excludeMetadata
	t.landedSince = q.landedSince
	if h.index == nil {
		return h.findListed(r, what, q, t, now)
	}
	fromIndex := h.fromIndex(w, r)
	var in, out []string
	for _, b := range h.cfg.Buckets {
		if fromIndex(b) {
			in = append(in, b)
		} else {
			out = append(out, b)
		}
	}
	switch {
	case len(out) == 0:
		return h.findIndexed(r, what, q, t, now)
	case len(in) == 0:
		return h.findListed(r, what, q, t, now)
	}
	indexed, err := h.over(in, true).findIndexed(r, what, q, t, now)
	if err != nil {
		return nil, err
	}
	listed, err := h.over(out, false).findListed(r, what, q, t, now)
	if err != nil {
		return nil, err
	}
	all := append(indexed, listed...)
	slices.SortStableFunc(all, func(a, b logJSON) int { return cmp.Compare(b.LastModified, a.LastModified) })
	return all, nil
}

// findListed answers a lookup by listing every prefix of the target in
// every bucket, with a HEAD per log unless metadata is excluded.
func (h *Handler) findListed(r *http.Request, what string, q query, t target, now int64) ([]logJSON, error) {
	ps, err := h.cfg.Format.Prefixes(t.scope, logkey.Reach(t.window, now), logkey.MaxPrefixes)
	if err != nil {
		return nil, err
	}
	var gone missingBuckets
	found, err := h.listAll(r.Context(), what, ps, &gone)
	if err != nil {
		return nil, err
	}
	if err := gone.report(r, h.cfg.Buckets); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.LinkTimeout)
	defer cancel()
	entries := unknownTimes(found)
	if !q.excludeMetadata {
		if err := h.readTimes(ctx, what, entries); err != nil {
			return nil, err
		}
	}
	entries = h.answers(t, now, entries)
	if q.maxPerPage > 0 {
		entries = capPerBucket(entries, q.maxPerPage)
	}
	return h.describe(ctx, what, entries, !q.excludeMetadata, !q.list)
}

// findIndexed answers a lookup from the index: one query over the exact
// window, the logs of buckets outside LOG_BUCKETS dropped, their times as
// indexed, so that metadata costs no HEAD. A task lookup whose window
// reaches into the index's lag also lists the task's newest prefixes, in
// parallel, and adds the logs the index does not hold yet (fresh); when
// that fails, the index's answer stands and the log line says why. now
// is the instant (epoch ms) the window was resolved at.
func (h *Handler) findIndexed(r *http.Request, what string, q query, t target, now int64) ([]logJSON, error) {
	qctx, cancel := context.WithTimeout(r.Context(), h.cfg.ListTimeout)
	defer cancel()
	var entries []logkey.Entry
	var listed []logkey.Object
	var gone missingBuckets
	g, gctx := errgroup.WithContext(qctx)
	g.Go(func() (err error) {
		if t.landedSince != nil {
			entries, err = h.index.Landed(gctx, t.of, *t.landedSince)
			return err
		}
		entries, err = t.index(gctx, t.window)
		return err
	})
	recent := logkey.Window{Start: max(t.window.Start, now-freshness.Milliseconds()), End: t.window.End, Plain: t.window.Plain}
	if t.fresh && recent.Start < recent.End {
		g.Go(func() error {
			ps, err := h.cfg.Format.Prefixes(t.scope, recent, logkey.MaxPrefixes)
			if err == nil {
				listed, err = h.listAll(gctx, what, ps, &gone)
			}
			if err != nil {
				// The list only adds what the index lags behind: without
				// it, the index's answer stands.
				web.Note(r, "newest_prefix_error", err.Error())
				listed = nil
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if errors.Is(qctx.Err(), context.DeadlineExceeded) {
			return nil, fault.Timeout("Timed out waiting for the log index for %s", what)
		}
		return nil, err
	}
	if err := gone.report(r, h.cfg.Buckets); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(r.Context(), h.cfg.LinkTimeout)
	defer cancel()
	unindexed, err := h.unindexed(lctx, what, q, entries, listed)
	if err != nil {
		web.Note(r, "newest_prefix_error", err.Error())
		unindexed = nil
	}
	entries = h.answers(t, now, append(entries, unindexed...))
	entries = slices.DeleteFunc(entries, func(e logkey.Entry) bool { return !slices.Contains(h.cfg.Buckets, e.Bucket) })
	if q.maxPerPage > 0 {
		entries = capPerBucket(entries, q.maxPerPage)
	}
	return h.describe(lctx, what, entries, !q.excludeMetadata, !q.list)
}

// freshness is how far back from now a task lookup on the index also lists
// the task's newest prefixes: far longer than the index lags behind an
// upload (docs/behaviour.md "Task-log index").
const freshness = time.Minute

// unindexed returns the listed objects the index does not hold, with their
// times (one HEAD each) unless metadata is excluded.
func (h *Handler) unindexed(ctx context.Context, what string, q query, indexed []logkey.Entry, listed []logkey.Object) ([]logkey.Entry, error) {
	held := make(map[[2]string]bool, len(indexed))
	for _, e := range indexed {
		held[[2]string{e.Bucket, e.Key}] = true
	}
	var out []logkey.Entry
	for _, o := range listed {
		if !held[[2]string{o.Bucket, o.Key}] {
			out = append(out, logkey.Entry{Object: o})
		}
	}
	if !q.excludeMetadata {
		if err := h.readTimes(ctx, what, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// answers keeps the entries that answer t at now, by the one rule every
// path applies, listing or index, GET or search (docs/behaviour.md "Task
// logs"): the key parses to t's task, deploy or request (logkey.Scope.Owns),
// it lies under a prefix of t's window reached to now (logkey.Reach,
// logkey.Format.Listed), and its span, by the window's rule, overlaps the
// window (logkey.Window.Holds), or, asked what landed since, it landed
// then or later. Listed and indexed logs then answer alike, whatever else
// their prefixes hold.
func (h *Handler) answers(t target, now int64, entries []logkey.Entry) []logkey.Entry {
	reach := logkey.Reach(t.window, now)
	return slices.DeleteFunc(entries, func(e logkey.Entry) bool {
		p, ok := h.cfg.Format.Parse(e.Key)
		if !ok || !t.scope.Owns(p) || !h.cfg.Format.Listed(t.scope, p, reach) {
			return true
		}
		if t.landedSince != nil {
			return e.LastModified < *t.landedSince
		}
		return !t.window.Holds(e, p.Time)
	})
}

// countLookup records one lookup, answered or not: in the metrics, by scope,
// with the logs it answered with and the S3 attempts it made (the only
// backend this function calls); on the log line, the count of logs.
func countLookup(r *http.Request, scope string, answered int) {
	web.Note(r, "logs", answered)
	web.Metrics(r).Emit([]metrics.Dimension{{Name: "Scope", Value: scope}},
		metrics.Metric{Name: metrics.LogLookups, Value: 1, Unit: metrics.Count},
		metrics.Metric{Name: metrics.LogObjects, Value: float64(answered), Unit: metrics.Count},
		metrics.Metric{Name: metrics.S3Calls, Value: float64(callcount.From(r.Context()).Calls()), Unit: metrics.Count})
}

// listAll lists every prefix in every bucket completely, in parallel, within
// LOG_LIST_TIMEOUT. A bucket that does not exist lists nothing and is noted
// in gone.
func (h *Handler) listAll(ctx context.Context, what string, prefixes []string, gone *missingBuckets) ([]logkey.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ListTimeout)
	defer cancel()
	type job struct{ bucket, prefix string }
	var jobs []job
	for _, b := range h.cfg.Buckets {
		for _, p := range prefixes {
			jobs = append(jobs, job{b, p})
		}
	}
	lists := make([][]logkey.Object, len(jobs))
	err := each(ctx, len(jobs), listWorkers, func(ctx context.Context, i int) error {
		objs, err := h.store.All(ctx, jobs[i].bucket, jobs[i].prefix)
		if gone.skip(jobs[i].bucket, err) {
			return nil
		}
		lists[i] = objs
		return err
	})
	if err != nil {
		return nil, timedOut(ctx, what, err)
	}
	return slices.Concat(lists...), nil
}

// unknownTimes turns listed objects into entries whose times a HEAD
// must read.
func unknownTimes(objs []logkey.Object) []logkey.Entry {
	out := make([]logkey.Entry, len(objs))
	for i, o := range objs {
		out[i].Object = o
	}
	return out
}

// capPerBucket keeps the newest n objects of each bucket.
func capPerBucket(objs []logkey.Entry, n int) []logkey.Entry {
	newestFirst(objs)
	kept := map[string]int{}
	return slices.DeleteFunc(objs, func(o logkey.Entry) bool {
		kept[o.Bucket]++
		return kept[o.Bucket] > n
	})
}

func newestFirst(objs []logkey.Entry) {
	slices.SortStableFunc(objs, func(a, b logkey.Entry) int {
		return cmp.Or(cmp.Compare(b.LastModified, a.LastModified), strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Key, b.Key))
	})
}

// readTimes reads the start and end times of each entry from its
// object's metadata, one HEAD each, in parallel, within ctx.
func (h *Handler) readTimes(ctx context.Context, what string, entries []logkey.Entry) error {
	err := each(ctx, len(entries), headWorkers, func(ctx context.Context, i int) error {
		start, end, err := h.store.Times(ctx, entries[i].Bucket, entries[i].Key)
		entries[i].Start, entries[i].End = start, end
		return err
	})
	return timedOut(ctx, what, err)
}

// describe turns entries into the wire form, newest first: with their times
// unless told not to, and presigned URLs unless told not to, within ctx.
// Both URLs expire at the same instant.
func (h *Handler) describe(ctx context.Context, what string, objs []logkey.Entry, metadata, links bool) ([]logJSON, error) {
	newestFirst(objs)
	out := make([]logJSON, len(objs))
	for i, o := range objs {
		out[i] = logJSON{Key: o.Key, LastModified: o.LastModified, Size: o.Size}
		if metadata {
			out[i].StartTime, out[i].EndTime = o.Start, o.End
		}
	}
	if !links {
		return out, nil
	}
	err := each(ctx, len(objs), headWorkers, func(ctx context.Context, i int) error {
		get, download, err := h.store.Links(ctx, objs[i].Bucket, objs[i].Key, h.cfg.URLTTL)
		out[i].GetURL, out[i].DownloadURL = get, download
		return err
	})
	if err != nil {
		return nil, timedOut(ctx, what, err)
	}
	return out, nil
}

// timedOut turns a phase that ran out of time into the 504 of docs/behaviour.md "Task logs".
func timedOut(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || fault.KindOf(err) == fault.KindTimeout {
		return fault.Timeout("Timed out waiting for response from S3 for %s", what)
	}
	return err
}

// each runs f for 0..n-1 on at most workers goroutines and returns the
// first error, after which the rest are not started; so does the end of
// ctx.
func each(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	started := 0
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(gctx, i) })
		started++
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if started < n {
		return ctx.Err()
	}
	return nil
}
