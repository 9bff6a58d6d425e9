package logs

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
	"github.com/fleetops/fleet/shared/payload"
	"github.com/fleetops/fleet/shared/web"
)

// group is the only log group; it names continuation tokens (docs/behaviour.md "Task logs").
const group = logkey.DefaultGroup

// source is one (bucket, prefix) pair a search lists, with its token key,
// the window its logs are kept by and whose logs they are (see owners).
type source struct {
	key, bucket, prefix string
	window              logkey.Window
	owners              []logkey.Task
}

// hit is a log a page found, with the source it came from. Its times are
// known when it was read from the index.
type hit struct {
	object logkey.Entry
	source *source
}

// search serves POST /api/logs/search (docs/behaviour.md "Task logs"). A page holds at most
// maxPerPage results in all. Sources are listed in a fixed order, a few at a
// time in parallel, each from where its token says it stopped, until the
// page is full; a source that had to stop early gets a token holding the
// last key it returned, so following the tokens returns every object exactly
// once. A page also stops where its answer would outgrow what Lambda can
// return (see fitPage), with tokens that resume right there.
func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	page, err := h.searchPage(w, r)
	countLookup(r, "search", len(page.Results))
	if err != nil {
		web.Error(w, r, err)
		return
	}
	web.JSON(w, http.StatusOK, page)
}

func (h *Handler) searchPage(w http.ResponseWriter, r *http.Request) (searchResultJSON, error) {
	var none searchResultJSON
	var req searchJSON
	if _, err := web.DecodeBody(r, &req); err != nil {
		return none, err
	}
	if err := req.check(); err != nil {
		return none, err
	}
	if len(h.cfg.Buckets) == 0 {
		return none, fault.NotFound("S3 configuration was absent")
	}
	sources, err := h.sources(req)
	if err != nil {
		return none, err
	}
	base, err := pageBase(sources, req.ContinuationTokens)
	if err != nil {
		return none, err
	}
	fromIndex := h.fromIndex(w, r)
	var gone missingBuckets
	hits, tokens, err := h.page(r.Context(), sources, req, &gone, fromIndex)
	if err != nil {
		return none, err
	}
	if err := gone.report(r, h.cfg.Buckets); err != nil {
		return none, err
	}
	allow := req.allowlist()
	var found []logkey.Entry
	from := map[[2]string]*source{}
	for _, hit := range hits {
		if len(allow) == 0 || slices.ContainsFunc(allow, func(a string) bool { return strings.HasPrefix(hit.object.Key, a) }) {
			found = append(found, hit.object)
			from[[2]string{hit.object.Bucket, hit.object.Key}] = hit.source
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.LinkTimeout)
	defer cancel()
	if !req.ExcludeMetadata {
		// The index answered its logs' times already; a listed bucket's
		// need a HEAD each.
		if err := h.readListedTimes(ctx, found, fromIndex); err != nil {
			return none, err
		}
	}
	found = slices.DeleteFunc(found, func(e logkey.Entry) bool { return !h.sourceAnswers(from[[2]string{e.Bucket, e.Key}], e) })
	// describe puts found in the results' order; fitPage pairs them.
	results, err := h.describe(ctx, "search", found, !req.ExcludeMetadata, !req.ListOnly)
	if err != nil {
		return none, err
	}
	results, tokens = fitPage(base, hits, found, results, tokens, req.ContinuationTokens)
	last := true
	for _, t := range tokens {
		last = last && t.LastPage
	}
	return searchResultJSON{ContinuationTokens: tokens, LastPage: last, Results: results}, nil
}

// readListedTimes reads the times of the found logs of the buckets that
// were listed, one HEAD each: the index answered its own logs' times.
func (h *Handler) readListedTimes(ctx context.Context, found []logkey.Entry, fromIndex func(string) bool) error {
	var at []int
	for i, e := range found {
		if !fromIndex(e.Bucket) {
			at = append(at, i)
		}
	}
	if len(at) == 0 {
		return nil
	}
	listed := make([]logkey.Entry, len(at))
	for j, i := range at {
		listed[j] = found[i]
	}
	if err := h.readTimes(ctx, "search", listed); err != nil {
		return err
	}
	for j, i := range at {
		found[i] = listed[j]
	}
	return nil
}

// sources returns every (bucket, prefix) the search covers, in a fixed
// order: buckets in LOG_BUCKETS order, prefixes sorted, with no prefix that
// extends another one of the same bucket. Each has the window of the
// scopes it lists for.
func (h *Handler) sources(req searchJSON) ([]source, error) {
	now := h.now().UnixMilli()
	budget := logkey.MaxPrefixes
	var prefixes []scoped
	add := func(w logkey.Window, of logkey.Task, ps []string, err error) error {
		if err != nil {
			return err
		}
		budget -= len(ps)
		for _, p := range ps {
			prefixes = append(prefixes, scoped{prefix: p, window: w, owners: []logkey.Task{h.indexedAs(of)}})
		}
		return nil
	}
	allow := req.allowlist()
	for _, id := range req.TaskIDs {
		t, err := logkey.ParseTaskID(id)
		if err != nil {
			return nil, err
		}
		w := logkey.TaskWindow(t, req.Start, req.End, now)
		w.Plain = req.ExcludeMetadata
		ps, err := h.cfg.Format.Prefixes(logkey.TaskScope(t), logkey.Reach(w, now), budget)
		if err := add(w, t, logkey.Allow(ps, allow), err); err != nil {
			return nil, err
		}
	}
	window := logkey.LookbackWindow(req.Start, req.End, h.cfg.Lookback, now)
	window.Plain = req.ExcludeMetadata
	reach := logkey.Reach(window, now)
	for _, requestID := range slices.Sorted(maps.Keys(req.RequestsAndDeploys)) {
		deploys := req.RequestsAndDeploys[requestID]
		if len(deploys) == 0 {
			ps, err := h.cfg.Format.Prefixes(logkey.RequestScope(requestID), reach, budget)
			if err := add(window, logkey.Task{RequestID: requestID}, ps, err); err != nil {
				return nil, err
			}
			continue
		}
		for _, d := range deploys {
			ps, err := h.cfg.Format.Prefixes(logkey.DeployScope(requestID, d), reach, budget)
			if err := add(window, logkey.Task{RequestID: requestID, DeployID: d}, ps, err); err != nil {
				return nil, err
			}
		}
	}
	var out []source
	for _, b := range h.cfg.Buckets {
		for _, p := range compact(prefixes) {
			out = append(out, source{key: group + "-" + b + "-" + p.prefix, bucket: b, prefix: p.prefix, window: p.window, owners: p.owners})
		}
	}
	return out, nil
}

// scoped is a prefix a search lists, with the window of the scope that
// named it and whose logs it lists for.
type scoped struct {
	prefix string
	window logkey.Window
	owners []logkey.Task
}

// compact is logkey.Compact keeping windows and owners: a prefix dropped
// because it extends (or repeats) a kept one widens the kept one's window
// to cover its own, and adds its owners, so that the kept prefix answers
// every log either scope would.
func compact(prefixes []scoped) []scoped {
	slices.SortFunc(prefixes, func(a, b scoped) int { return strings.Compare(a.prefix, b.prefix) })
	var out []scoped
	for _, p := range prefixes {
		// Sorted, the prefixes that extend one follow it directly.
		if n := len(out); n > 0 && strings.HasPrefix(p.prefix, out[n-1].prefix) {
			kept := &out[n-1].window
			kept.Start, kept.End = min(kept.Start, p.window.Start), max(kept.End, p.window.End)
			out[n-1].owners = joinOwners(out[n-1].owners, p.owners)
			continue
		}
		out = append(out, p)
	}
	return out
}

// page lists the next page of the search: at most maxPerPage objects over
// all sources, in the order they were listed (source by source, in key
// order), and the token of every source. A source whose bucket does not
// exist is final and empty, and the bucket is noted in gone. With the
// index on, each source's page is read from it instead (indexPage), with
// the same tokens.
func (h *Handler) page(ctx context.Context, sources []source, req searchJSON, gone *missingBuckets, fromIndex func(bucket string) bool) ([]hit, map[string]tokenJSON, error) {
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
	var found []hit
	// Each wave lists up to listWorkers sources at once, each for the whole room
	// left; the results are then taken in source order until the page is
	// full, and a source whose results were not all taken resumes after the
	// last one taken. A source found empty to its end is final at once, so
	// the last page is rarely an empty one.
	for len(open) > 0 && room > 0 {
		wave := open[:min(listWorkers, len(open))]
		open = open[len(wave):]
		pages := make([][]logkey.Entry, len(wave))
		done := make([]bool, len(wave))
		err := each(ctx, len(wave), listWorkers, func(ctx context.Context, i int) error {
			after := tokenValue(tokens[wave[i].key])
			if fromIndex(wave[i].bucket) {
				var err error
				pages[i], done[i], err = h.indexPage(ctx, wave[i], after, room)
				return err
			}
			objs, last, err := h.store.Page(ctx, wave[i].bucket, wave[i].prefix, after, room)
			if gone.skip(wave[i].bucket, err) {
				pages[i], done[i] = nil, true
				return nil
			}
			pages[i], done[i] = unknownTimes(objs), last
			return err
		})
		if err != nil && h.index != nil {
			return nil, nil, indexTimedOut(ctx, "search", err)
		}
		if err != nil {
			return nil, nil, timedOut(ctx, "search", err)
		}
		for i, s := range wave {
			if room == 0 && len(pages[i]) > 0 {
				continue // the page is full: this source keeps its token
			}
			taken := pages[i][:min(room, len(pages[i]))]
			for _, o := range taken {
				found = append(found, hit{object: o, source: &wave[i]})
			}
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

// maxTokenShare is the most of payload.Budget that a search answer without
// results may take: a search whose tokens alone would take more is refused
// before anything is listed, so that every page has room for results. Real
// searches take a few hundred kilobytes at most (2,000 prefixes of about a
// hundred bytes); only ids hundreds of bytes long over thousands of
// prefixes come near it.
const maxTokenShare = payload.Budget / 2

// pageBase returns how many bytes a search answer without results takes as
// Lambda carries it (payload.StringSize), with every token at its widest:
// the value it came with, or an empty one, and lastPage false. It is
// fault.Invalid when that is over maxTokenShare.
func pageBase(sources []source, in map[string]tokenJSON) (int, error) {
	empty := ""
	tokens := make(map[string]tokenJSON, len(sources))
	for _, s := range sources {
		t := in[s.key]
		if t.Value == nil {
			t.Value = &empty
		}
		t.LastPage = false
		tokens[s.key] = t
	}
	size, err := carried(searchResultJSON{ContinuationTokens: tokens, Results: []logJSON{}})
	if err != nil {
		return 0, err
	}
	if size > maxTokenShare {
		return 0, fault.Invalid("This search covers too many prefixes, or too long ones, for one answer to carry their continuation tokens; name fewer tasks and requests or narrow the time window")
	}
	return size, nil
}

// carried returns the size of v's JSON as Lambda carries it.
func carried(v any) (int, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("measure search answer: %w", err)
	}
	return payload.StringSize(b), nil
}

// fitPage cuts a page to payload.Budget. Up to
// 1,000 results of long keys, each with two presigned URLs that repeat the
// key, can take over 20 MB; the cut keeps the longest run of hits, in the
// order they were listed, whose results and tokens fit beside base (see
// pageBase), and gives every source it cut the token that resumes at its
// first object not answered: the last key answered of that source, or the
// token the source came with. The page keeps at least one hit, so that
// following the tokens always ends.
//
// found and results are the page's objects that passed the allowlist and
// their results, index for index; hits that did not pass it cost only
// their key, which a token may hold.
func fitPage(base int, hits []hit, found []logkey.Entry, results []logJSON, tokens, in map[string]tokenJSON) ([]logJSON, map[string]tokenJSON) {
	index := make(map[[2]string]int, len(found))
	for i, o := range found {
		index[[2]string{o.Bucket, o.Key}] = i
	}
	size, keySize := base, map[string]int{}
	cut := len(hits)
	for i, hit := range hits {
		// The source's token now ends at this key instead of the last one.
		key, _ := carried(hit.object.Key)
		grow := key - keySize[hit.source.key]
		if j, ok := index[[2]string{hit.object.Bucket, hit.object.Key}]; ok {
			result, _ := carried(results[j])
			grow += result + 1 // and a comma
		}
		if size+grow > payload.Budget && i > 0 {
			cut = i
			break
		}
		size, keySize[hit.source.key] = size+grow, key
	}
	if cut == len(hits) {
		return results, tokens
	}
	// Hits come source by source: the source of the first hit cut may have
	// answered some, every later one answered none.
	for i := cut; i < len(hits); i++ {
		s := hits[i].source.key
		if i > cut && s == hits[i-1].source.key {
			continue
		}
		t := in[s]
		if i == cut && cut > 0 && hits[cut-1].source.key == s {
			t.Value = &hits[cut-1].object.Key
		}
		t.LastPage = false
		tokens[s] = t
	}
	answered := map[[2]string]bool{}
	for _, hit := range hits[:cut] {
		answered[[2]string{hit.object.Bucket, hit.object.Key}] = true
	}
	kept := results[:0:0]
	for j, o := range found {
		if answered[[2]string{o.Bucket, o.Key}] {
			kept = append(kept, results[j])
		}
	}
	return kept, tokens
}

// sourceAnswers is answers for a log that s's page found: its key parses
// to a log of one of s's owners, in the default group, and its span, by
// the window's rule, overlaps s's window. It lies under s's prefix, which
// the window reached to now named.
func (h *Handler) sourceAnswers(s *source, e logkey.Entry) bool {
	p, ok := h.cfg.Format.Parse(e.Key)
	if !ok || p.Group != "" && p.Group != group {
		return false
	}
	of := logkey.Task{ID: p.TaskID, RequestID: p.RequestID, DeployID: p.DeployID}
	return slices.ContainsFunc(s.owners, func(o logkey.Task) bool { return holds(o, of) }) && s.window.Holds(e, p.Time)
}
