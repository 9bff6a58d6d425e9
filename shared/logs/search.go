package logs

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/logstore"
	"github.com/fleetops/fleet/shared/web"
)

// group is the only log group; it names continuation tokens (SPEC §6.4).
const group = logkey.DefaultGroup

// source is one (bucket, prefix) pair a search lists, with its token key.
type source struct {
	key, bucket, prefix string
}

// search serves POST /api/logs/search (SPEC §6.6). A page holds at most
// maxPerPage results in all. Sources are listed in a fixed order, a few at a
// time in parallel, each from where its token says it stopped, until the
// page is full; a source that had to stop early gets a token holding the
// last key it returned, so following the tokens returns every object exactly
// once.
func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	answered := 0
	defer func() { countLookup(r, "search", answered) }()
	if err := h.mayRead(r); err != nil {
		web.Error(w, r, err)
		return
	}
	var req searchJSON
	if _, err := web.DecodeBody(r, &req); err != nil {
		web.Error(w, r, err)
		return
	}
	if err := req.check(); err != nil {
		web.Error(w, r, err)
		return
	}
	if len(h.cfg.Buckets) == 0 {
		web.Error(w, r, fault.NotFound("S3 configuration was absent"))
		return
	}
	sources, err := h.sources(req)
	if err != nil {
		web.Error(w, r, err)
		return
	}
	found, tokens, err := h.page(r.Context(), sources, req)
	if err != nil {
		web.Error(w, r, err)
		return
	}
	allow := req.allowlist()
	found = slices.DeleteFunc(found, func(o logstore.Object) bool {
		return len(allow) > 0 && !slices.ContainsFunc(allow, func(a string) bool { return strings.HasPrefix(o.Key, a) })
	})
	results, err := h.describe(r.Context(), "search", found, !req.ExcludeMetadata, !req.ListOnly)
	if err != nil {
		web.Error(w, r, err)
		return
	}
	last := true
	for _, t := range tokens {
		last = last && t.LastPage
	}
	answered = len(results)
	web.JSON(w, http.StatusOK, searchResultJSON{ContinuationTokens: tokens, LastPage: last, Results: results})
}

// sources returns every (bucket, prefix) the search covers, in a fixed
// order: buckets in LOG_BUCKETS order, prefixes sorted, with no prefix that
// extends another one of the same bucket.
func (h *Handler) sources(req searchJSON) ([]source, error) {
	now := h.now().UnixMilli()
	budget := logkey.MaxPrefixes
	var prefixes []string
	add := func(ps []string, err error) error {
		if err != nil {
			return err
		}
		budget -= len(ps)
		prefixes = append(prefixes, ps...)
		return nil
	}
	allow := req.allowlist()
	for _, id := range req.TaskIDs {
		t, err := logkey.ParseTaskID(id)
		if err != nil {
			return nil, err
		}
		ps, err := h.cfg.Format.Prefixes(logkey.TaskScope(t), logkey.TaskWindow(t, req.Start, req.End, now), budget)
		if err := add(logkey.Allow(ps, allow), err); err != nil {
			return nil, err
		}
	}
	window := logkey.LookbackWindow(req.Start, req.End, h.cfg.Lookback, now)
	for _, requestID := range slices.Sorted(maps.Keys(req.RequestsAndDeploys)) {
		deploys := req.RequestsAndDeploys[requestID]
		if len(deploys) == 0 {
			if err := add(h.cfg.Format.Prefixes(logkey.RequestScope(requestID), window, budget)); err != nil {
				return nil, err
			}
			continue
		}
		for _, d := range deploys {
			if err := add(h.cfg.Format.Prefixes(logkey.DeployScope(requestID, d), window, budget)); err != nil {
				return nil, err
			}
		}
	}
	var out []source
	for _, b := range h.cfg.Buckets {
		for _, p := range logkey.Compact(prefixes) {
			out = append(out, source{key: group + "-" + b + "-" + p, bucket: b, prefix: p})
		}
	}
	return out, nil
}

// page lists the next page of the search: at most maxPerPage objects over
// all sources, and the token of every source.
func (h *Handler) page(ctx context.Context, sources []source, req searchJSON) ([]logstore.Object, map[string]tokenJSON, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.ListTimeout)
	defer cancel()
	tokens := make(map[string]tokenJSON, len(sources))
	var open []source
	for _, s := range sources {
		t := req.ContinuationTokens[s.key]
		tokens[s.key] = t
		if !t.LastPage {
			open = append(open, s)
		}
	}
	room := req.maxPerPage()
	var found []logstore.Object
	// Each wave lists up to listWorkers sources at once, each for the whole room
	// left; the results are then taken in source order until the page is
	// full, and a source whose results were not all taken resumes after the
	// last one taken. A source found empty to its end is final at once, so
	// the last page is rarely an empty one.
	for len(open) > 0 && room > 0 {
		wave := open[:min(listWorkers, len(open))]
		open = open[len(wave):]
		pages := make([][]logstore.Object, len(wave))
		done := make([]bool, len(wave))
		err := each(ctx, len(wave), listWorkers, func(ctx context.Context, i int) error {
			var err error
			pages[i], done[i], err = h.store.Page(ctx, wave[i].bucket, wave[i].prefix, tokenValue(tokens[wave[i].key]), room)
			return err
		})
		if err != nil {
			return nil, nil, timedOut(ctx, "search", err)
		}
		for i, s := range wave {
			if room == 0 && len(pages[i]) > 0 {
				continue // the page is full: this source keeps its token
			}
			taken := pages[i][:min(room, len(pages[i]))]
			found = append(found, taken...)
			room -= len(taken)
			t := tokens[s.key]
			if len(taken) > 0 {
				t.Value = &taken[len(taken)-1].Key
			}
			t.LastPage = done[i] && len(taken) == len(pages[i])
			tokens[s.key] = t
		}
	}
	return found, tokens, nil
}

func tokenValue(t tokenJSON) string {
	if t.Value == nil {
		return ""
	}
	return *t.Value
}
