//go:build integration

package console_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/jobs"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/slaves"
)

// The fleet page lists the fleet once and then follows the change feed
// (docs/behaviour.md "The change feed"): these tests count the requests it
// makes on a server of their own in front of the real handlers, so that a
// page that lists the fleet again instead of applying the changes is seen.

// counted serves the API and the console as site does, counting the
// requests by route (list, initial: the feed's initial state, changes: a
// follow, and "changes id=<id>" for the feed of one machine, expiring,
// details, history); gone, when set, is the cursor the first read of the
// fleet (the initial state or the list) answers instead of its own (a real
// cursor of the service, too old to follow).
type counted struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	gone   string
	hidden int // feed requests made while the test had hidden the tab
	hide   bool
	// failing is how many feed requests to come answer status (503 when
	// 0), and failed when those came.
	failing int
	status  int
	failed  []time.Time
	// tamper, when set, rewrites the changes of the next feed answer that
	// has some.
	tamper func(changes []json.RawMessage) []json.RawMessage
	// older makes the feed answer initial=true as an API older than the
	// initial state does: "ignores" (the feed from now, no bookmark) or
	// "refuses" (a 400 naming the parameter).
	older string
	// blocked answers 503 to every feed request that follows a cursor
	// while it is set, those open when it was set too (the service's
	// answer is dropped): a page that follows sees no change meanwhile.
	blocked bool
	// open counts the feed requests of one machine (id=) being answered.
	open map[string]int
	// matches is the If-Match of every change sent ("<method> <path> <If-Match>").
	matches []string
}

func countedSite(t *testing.T, gone string) *counted {
	t.Helper()
	c := &counted{counts: map[string]int{}, gone: gone, open: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *counted) serve(w http.ResponseWriter, r *http.Request) {
	route := ""
	switch {
	case r.Method == http.MethodGet && (r.URL.Path == "/api/slaves" || r.URL.Path == "/api/slaves/"):
		route = "list"
	case r.Method == http.MethodGet && r.URL.Path == "/api/slaves/changes" && r.URL.Query().Get("initial") == "true":
		route = "initial"
	case r.Method == http.MethodGet && r.URL.Path == "/api/slaves/changes":
		route = "changes"
	case r.Method == http.MethodGet && r.URL.Path == "/api/slaves/expiring":
		route = "expiring"
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/slaves/slave/") && strings.HasSuffix(r.URL.Path, "/details"):
		route = "details"
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/slaves/slave/"):
		route = "history"
	}
	id := r.URL.Query().Get("id")
	c.mu.Lock()
	c.counts[route]++
	if route == "changes" && id != "" {
		c.counts["changes id="+id]++
		c.open[id]++
		defer func() { c.mu.Lock(); c.open[id]--; c.mu.Unlock() }()
	}
	if r.Method == http.MethodPost || r.Method == http.MethodDelete {
		c.matches = append(c.matches, r.Method+" "+r.URL.Path+" "+r.Header.Get("If-Match"))
	}
	first := (route == "list" || route == "initial") && c.counts["list"]+c.counts["initial"] == 1
	if route == "changes" && c.hide {
		c.hidden++
	}
	fail := route == "changes" && c.failing > 0
	status := cmp.Or(c.status, http.StatusServiceUnavailable)
	if fail {
		c.failing--
		c.failed = append(c.failed, time.Now())
	}
	older := c.older
	c.mu.Unlock()
	if fail {
		message := map[int]string{http.StatusServiceUnavailable: "internal error (request test)", http.StatusForbidden: "alice may not read the fleet"}[status]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"code":%d,"message":%q}`, status, message)
		return
	}
	if route == "initial" && older == "refuses" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"code":400,"message":"unknown query param initial"}`)
		return
	}
	if route == "initial" && older == "ignores" {
		q := r.URL.Query()
		q.Del("initial")
		r.URL.RawQuery = q.Encode()
		route = "changes"
	}
	if route == "changes" {
		c.answer(w, r)
		return
	}
	if !(first && c.gone != "") {
		siteAPI.ServeHTTP(w, r)
		return
	}
	if route == "initial" {
		r.Header.Del("Accept-Encoding") // a body to rewrite, not gzip's
	}
	rec := httptest.NewRecorder()
	siteAPI.ServeHTTP(rec, r)
	maps.Copy(w.Header(), rec.Header())
	body := rec.Body.Bytes()
	if route == "list" {
		w.Header().Set(slaves.CursorHeader, c.gone)
	} else { // the initial state's bookmark and the answer's cursor
		var page struct {
			Changes []map[string]any `json:"changes"`
			Cursor  string           `json:"cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil || len(page.Changes) == 0 {
			http.Error(w, fmt.Sprintf("the initial state to make stale: %v in %s", err, body), http.StatusInternalServerError)
			return
		}
		page.Cursor = c.gone
		page.Changes[len(page.Changes)-1]["cursor"] = c.gone
		body, _ = json.Marshal(page)
		w.Header().Del("Content-Length")
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// answer answers a feed request with the service's answer, its changes
// rewritten by tamper if one is set when the answer has some, or with a 503
// while the feed is blocked.
func (c *counted) answer(w http.ResponseWriter, r *http.Request) {
	follows := r.URL.Query().Get("since") != ""
	blocked := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if follows && c.blocked {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"code":503,"message":"internal error (request test)"}`)
			return true
		}
		return false
	}
	if blocked() {
		return
	}
	rec := httptest.NewRecorder()
	siteAPI.ServeHTTP(rec, r)
	if blocked() {
		return
	}
	var page struct {
		Changes []json.RawMessage `json:"changes"`
		Cursor  string            `json:"cursor"`
	}
	c.mu.Lock()
	tamper := c.tamper
	c.mu.Unlock()
	if tamper != nil && rec.Code == http.StatusOK && json.Unmarshal(rec.Body.Bytes(), &page) == nil && len(page.Changes) > 0 {
		c.mu.Lock()
		c.tamper = nil
		c.mu.Unlock()
		page.Changes = tamper(page.Changes)
		body, _ := json.Marshal(page)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
		return
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (c *counted) count(route string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[route]
}

// block sets whether the feed is blocked (see blocked).
func (c *counted) block(on bool) { c.mu.Lock(); c.blocked = on; c.mu.Unlock() }

// opened is how many feed requests of machine id are being answered.
func (c *counted) opened(id string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.open[id] }

// matchesSince is the If-Match of each change sent since the nth.
func (c *counted) matchesSince(n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.matches[n:]...)
}

// sent is how many changes were sent.
func (c *counted) sent() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.matches) }

// reads is how many times the page read the whole fleet: its initial state
// in the feed, or the list.
func (c *counted) reads() int { return c.count("initial") + c.count("list") }

// openFleet opens the fleet page on prefix's machines and waits until it
// shows n of them and follows the feed.
func openFleet(t *testing.T, ctx context.Context, base, prefix string, n int) {
	t.Helper()
	open(t, ctx, base, "#/fleet?q="+prefix, "table.fleet tbody tr[data-id]")
	eventually(t, ctx, fmt.Sprintf("%d rows", n), fmt.Sprintf(`document.querySelectorAll("table.fleet tbody tr[data-id]").length === %d`, n))
	eventually(t, ctx, "the live indicator", `document.querySelector(".live")?.dataset.state === "live" && document.querySelector(".live").innerText.includes("Live")`)
}

// rowText is a JavaScript expression: the text of the row of machine id
// (never a selector built from the id).
func rowText(id string) string {
	x, _ := json.Marshal(id)
	return fmt.Sprintf(`([...document.querySelectorAll("table.fleet tbody tr[data-id]")].find(r => r.dataset.id === %s)?.innerText ?? "")`, x)
}

// row is a JavaScript expression: the row of machine id, or undefined.
func row(id string) string {
	x, _ := json.Marshal(id)
	return fmt.Sprintf(`[...document.querySelectorAll("table.fleet tbody tr[data-id]")].find(r => r.dataset.id === %s)`, x)
}

// within waits until the JavaScript expression is true and says how long
// that took, for the log: a figure, not a limit (it fails only after
// eventually's patience), as no time holds on a loaded machine.
func within(t *testing.T, ctx context.Context, what, expr string) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, ctx, what, expr)
	return time.Since(start)
}

// report reports the machines up, as the scheduler does.
func report(t *testing.T, ids ...string) {
	t.Helper()
	var machines []string
	for _, id := range ids {
		machines = append(machines, fmt.Sprintf(`{"id":%q,"host":"%s.example.com","rackId":"us-east-1a","resources":{"cpus":8,"mem":31000}}`, id, strings.ToLower(id)))
	}
	if _, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(`{"machines":[`+strings.Join(machines, ",")+`]}`)); err != nil {
		t.Fatalf("report: %v", err)
	}
}

func TestAChangeMadeThroughTheAPIAppearsInAnOpenConsoleWithoutListingAgain(t *testing.T) {
	p := fmt.Sprintf("feed-change-%d", time.Now().UnixNano())
	ids := seed(t, p, 3, false)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 3)
	// A selection made before the change stays made, and the table
	// sorted by state before it is sorted by the new states after it.
	do(t, ctx, chromedp.Evaluate(row(ids[2])+`.querySelector("input[type=checkbox]").click()`, nil))
	eventually(t, ctx, "one machine selected", has(".selectbar", "1 selected"))
	do(t, ctx, chromedp.Click(`button.sort[data-col=state]`))
	eventually(t, ctx, "the table sorted by state", `document.querySelector("th[data-col=state]").getAttribute("aria-sort") === "ascending"`)

	api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"kernel upgrade, ticket OPS-7"}`, http.StatusOK)
	took := within(t, ctx, "the frozen machine shown FROZEN with its message",
		rowText(ids[1])+`.includes("FROZEN") && `+rowText(ids[1])+`.includes("kernel upgrade, ticket OPS-7")`)
	t.Logf("state change: shown after %v", took)
	shot(t, ctx, "fleet-live-change")
	var marked, others bool
	do(t, ctx, chromedp.Evaluate(row(ids[1])+`.classList.contains("changed")`, &marked),
		chromedp.Evaluate(fmt.Sprintf(`[%s, %s].every(r => r.innerText.includes("ACTIVE") && !r.classList.contains("changed"))`, row(ids[0]), row(ids[2])), &others))
	if !marked {
		t.Error("the changed row is not marked")
	}
	if !others {
		t.Error("the machines that did not change are not shown ACTIVE and unmarked")
	}
	eventually(t, ctx, "the counts after the change", has(".counts", "1 FROZEN")+" && "+has(".counts", "2 ACTIVE")+" && "+has(".counts", "3 all"))
	eventually(t, ctx, "the selection kept", has(".selectbar", "1 selected")+" && "+row(ids[2])+`.querySelector("input[type=checkbox]").checked`)
	var order []string
	do(t, ctx, chromedp.Evaluate(`[...document.querySelectorAll("table.fleet tbody tr[data-id]")].map(r => r.dataset.id)`, &order))
	if want := []string{ids[0], ids[2], ids[1]}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("sorted by state after the change, got rows %v, want %v", order, want)
	}
	// The search finds the machine by its new message.
	do(t, ctx, clear("input[type=search]"), chromedp.SendKeys("input[type=search]", "ticket ops-7"))
	eventually(t, ctx, "the machine found by its new message", `document.querySelectorAll("table.fleet tbody tr[data-id]").length === 1 && `+rowText(ids[1])+` !== ""`)
	do(t, ctx, clear("input[type=search]"), chromedp.SendKeys("input[type=search]", p))
	// The filters apply to the changed list: FROZEN shows the one machine.
	do(t, ctx, chromedp.Click(`.counts a.s-frozen`))
	eventually(t, ctx, "only the frozen machine", `document.querySelectorAll("table.fleet tbody tr[data-id]").length === 1 && `+rowText(ids[1])+` !== ""`)
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
	if n := site.count("changes"); n < 1 {
		t.Errorf("the page asked the feed %d times, want at least once", n)
	}
}

func TestAChangedMachineMovesToItsPlaceInALongSortedSearch(t *testing.T) {
	p := fmt.Sprintf("feed-move-%d", time.Now().UnixNano())
	ids := seed(t, p, 60, false)
	// So many machines would push another test's off its first page.
	t.Cleanup(func() {
		for _, id := range ids {
			api(t, "DELETE", "/api/slaves/slave/"+id, "", http.StatusOK)
		}
	})
	slices.Sort(ids) // the page's order of the same state: by id
	site := countedSite(t, "")
	ctx := tab(t)
	// A page of 50 rows is more than a screen shows: the rows below it are
	// drawn after the first paint, and must come in their places too.
	openFleet(t, ctx, site.URL, p, 50)
	order := `[...document.querySelectorAll("table.fleet tbody tr[data-id]")].map(r => r.dataset.id).join(" ")`
	eventually(t, ctx, "the first 50 machines in id order", fmt.Sprintf(`%s === %q`, order, strings.Join(ids[:50], " ")))
	do(t, ctx, chromedp.Click(`button.sort[data-col=state]`))
	eventually(t, ctx, "the table sorted by state", `document.querySelector("th[data-col=state]").getAttribute("aria-sort") === "ascending"`)
	do(t, ctx, chromedp.Click(`button.sort[data-col=state]`))
	eventually(t, ctx, "the table sorted by state, descending", `document.querySelector("th[data-col=state]").getAttribute("aria-sort") === "descending"`)

	// The machine frozen is the 46th, far below the first screen: FROZEN
	// sorts it first, and the rest move down one place, in id order.
	moved := ids[45]
	api(t, "POST", "/api/slaves/slave/"+moved+"/freeze", `{"message":"disk swap, ticket OPS-46"}`, http.StatusOK)
	want := append([]string{moved}, slices.Delete(slices.Clone(ids), 45, 46)[:49]...)
	eventually(t, ctx, "the frozen machine first, the others in id order", fmt.Sprintf(`%s === %q`, order, strings.Join(want, " ")))
	eventually(t, ctx, "the counts after the change", has(".counts", "1 FROZEN")+" && "+has(".counts", "59 ACTIVE")+" && "+has(".counts", "60 all"))
	eventually(t, ctx, "the rows counted", has(".pager", "1–50 of 60"))
	// The search finds it by its new message, and no longer by nothing.
	do(t, ctx, clear("input[type=search]"), chromedp.SendKeys("input[type=search]", "ticket ops-46"))
	eventually(t, ctx, "the machine found by its new message", fmt.Sprintf(`%s === %q`, order, moved))
	do(t, ctx, clear("input[type=search]"), chromedp.SendKeys("input[type=search]", p))
	eventually(t, ctx, "the whole page again", fmt.Sprintf(`%s === %q`, order, strings.Join(want, " ")))
	// Sorted by id, a machine changed below the first screen keeps its
	// place, drawn again there while the rows around it stay as they are.
	do(t, ctx, chromedp.Click(`button.sort[data-col=id]`))
	eventually(t, ctx, "the table sorted by id", fmt.Sprintf(`%s === %q`, order, strings.Join(ids[:50], " ")))
	api(t, "POST", "/api/slaves/slave/"+ids[40]+"/freeze", `{"message":"disk swap, ticket OPS-41"}`, http.StatusOK)
	eventually(t, ctx, "the 41st machine frozen and marked in its place", fmt.Sprintf(`%s === %q && %s.includes("FROZEN") && %s.classList.contains("changed")`,
		order, strings.Join(ids[:50], " "), rowText(ids[40]), row(ids[40])))
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
}

func TestAMachineAddedAndOneDeletedAppearAndDisappear(t *testing.T) {
	p := fmt.Sprintf("feed-add-%d", time.Now().UnixNano())
	ids := []string{p + "-S0", p + "-S1", p + "-S2"}
	report(t, ids[0], ids[2])
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 2)
	do(t, ctx, chromedp.Evaluate(row(ids[0])+`.querySelector("input[type=checkbox]").click()`, nil))
	eventually(t, ctx, "one machine selected", has(".selectbar", "1 selected"))

	report(t, ids[1]) // the scheduler reports a machine that sorts between the two
	took := within(t, ctx, "the added machine", `document.querySelectorAll("table.fleet tbody tr[data-id]").length === 3 && `+rowText(ids[1])+`.includes("ACTIVE")`)
	t.Logf("added: shown after %v", took)
	var order []string
	do(t, ctx, chromedp.Evaluate(`[...document.querySelectorAll("table.fleet tbody tr[data-id]")].map(r => r.dataset.id)`, &order))
	if strings.Join(order, " ") != strings.Join(ids, " ") {
		t.Errorf("got rows %v, want %v in id order", order, ids)
	}
	shot(t, ctx, "fleet-live-added")

	api(t, "DELETE", "/api/slaves/slave/"+ids[0], "", http.StatusOK)
	took = within(t, ctx, "the deleted machine gone", `document.querySelectorAll("table.fleet tbody tr[data-id]").length === 2 && `+rowText(ids[0])+` === ""`)
	t.Logf("deleted: gone after %v", took)
	// A machine that is gone is no longer selected: a bulk change would act on it.
	eventually(t, ctx, "the counts and the selection after the deletion", has(".counts", "2 all")+" && "+has(".selectbar", "0 selected"))
	shot(t, ctx, "fleet-live-deleted")
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
}

func TestHostileTextInAChangeRendersAsText(t *testing.T) {
	p := fmt.Sprintf("feed-text-%d", time.Now().UnixNano())
	ids := seed(t, p, 1, false)
	site := countedSite(t, "")
	ctx := tab(t)
	// In the dark, for a reader who asked for less motion: the changed row
	// is marked without a fade.
	do(t, ctx, emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{
		{Name: "prefers-color-scheme", Value: "dark"}, {Name: "prefers-reduced-motion", Value: "reduce"}}))
	openFleet(t, ctx, site.URL, p, 1)
	const hostile = "<img src=x onerror=\"window.pwned=1\"><b>bold</b>\u0007\u202eend"
	body, _ := json.Marshal(map[string]string{"message": hostile})
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", string(body), http.StatusOK)
	eventually(t, ctx, "the message as text", rowText(ids[0])+`.includes("<img src=x onerror=")`)
	var timing string
	do(t, ctx, chromedp.Evaluate(`getComputedStyle(`+row(ids[0])+`).animationTimingFunction`, &timing))
	if !strings.HasPrefix(timing, "steps(1") {
		t.Errorf("the changed row's mark under reduced motion: got timing %q, want steps(1) (no fade)", timing)
	}
	var got struct {
		Text   string `json:"text"`
		Markup int    `json:"markup"`
		Pwned  bool   `json:"pwned"`
	}
	do(t, ctx, chromedp.Evaluate(`(() => { const r = `+row(ids[0])+`;
		return { text: r.querySelector("td[data-col=message]").textContent, markup: r.querySelectorAll("img, b").length, pwned: !!window.pwned } })()`, &got))
	if got.Text != hostile || got.Markup != 0 || got.Pwned {
		t.Errorf("got message cell %q with %d elements of markup (script ran: %v), want %q as text", got.Text, got.Markup, got.Pwned, hostile)
	}
	shot(t, ctx, "fleet-live-hostile-dark")
}

func TestACursorTheFeedNoLongerKeepsListsOnceAndFollowsOn(t *testing.T) {
	p := fmt.Sprintf("feed-gone-%d", time.Now().UnixNano())
	ids := seed(t, p, 2, false)
	// A cursor the service itself issued a day and an hour ago: the feed
	// answers it with its 410, as it would a console left open that long.
	store.SetClock(func() time.Time { return time.Now().Add(-25 * time.Hour) })
	page, err := store.Changes(context.Background(), "", 0, machine.Selector{})
	store.SetClock(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	site := countedSite(t, page.Cursor)
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 2)
	eventually(t, ctx, "the page saying it listed again", has("main", "Listed again (the change feed no longer held this list's changes)"))
	shot(t, ctx, "fleet-live-relisted")
	if n := site.reads(); n != 2 {
		t.Errorf("the page read the fleet %d times, want twice (once more after the 410)", n)
	}

	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"after the 410"}`, http.StatusOK)
	took := within(t, ctx, "the change after the new list", rowText(ids[0])+`.includes("FROZEN") && `+rowText(ids[0])+`.includes("after the 410")`)
	t.Logf("after the 410: shown after %v", took)
	if n := site.reads(); n != 2 {
		t.Errorf("the page read the fleet %d times, want twice", n)
	}
}

func TestAHiddenTabStopsFollowingAndCatchesUpWhenShown(t *testing.T) {
	p := fmt.Sprintf("feed-hidden-%d", time.Now().UnixNano())
	ids := seed(t, p, 1, false)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 1)
	// The browser hides a tab in the background; headless Chromium never
	// does, so the page is told as the browser tells it.
	visibility := func(hidden bool) chromedp.Action {
		return chromedp.Evaluate(fmt.Sprintf(`(() => {
			Object.defineProperty(document, "hidden", { configurable: true, get: () => %v });
			Object.defineProperty(document, "visibilityState", { configurable: true, get: () => %q });
			document.dispatchEvent(new Event("visibilitychange"));
			return true })()`, hidden, map[bool]string{true: "hidden", false: "visible"}[hidden]), nil)
	}
	do(t, ctx, visibility(true))
	site.mu.Lock()
	site.hide = true
	site.mu.Unlock()
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"while hidden"}`, http.StatusOK)
	time.Sleep(2 * time.Second)
	var text string
	do(t, ctx, chromedp.Evaluate(rowText(ids[0]), &text))
	if strings.Contains(text, "FROZEN") {
		t.Errorf("a hidden tab applied a change: row %q", text)
	}
	site.mu.Lock()
	site.hide = false
	hidden := site.hidden
	site.mu.Unlock()
	if hidden != 0 {
		t.Errorf("a hidden tab asked the feed %d times, want none", hidden)
	}
	do(t, ctx, visibility(false))
	took := within(t, ctx, "the change caught up", rowText(ids[0])+`.includes("FROZEN") && `+rowText(ids[0])+`.includes("while hidden")`)
	t.Logf("caught up after %v", took)
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
}

func TestAFeedThatFailsIsRetriedLaterAndLessOften(t *testing.T) {
	p := fmt.Sprintf("feed-retry-%d", time.Now().UnixNano())
	ids := seed(t, p, 2, false)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 2)
	const failures = 4
	site.mu.Lock()
	site.failing = failures
	site.mu.Unlock()
	// The request open now answers this change; the next ones fail.
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"before the outage"}`, http.StatusOK)
	eventually(t, ctx, "the indicator saying it reconnects", `document.querySelector(".live")?.dataset.state === "reconnecting" && document.querySelector(".live").innerText.includes("Reconnecting")`)
	shot(t, ctx, "fleet-live-reconnecting")
	api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"during the outage"}`, http.StatusOK)
	// Retried after 0.5-1 s, 1-2 s, 2-4 s and 4-8 s: the change shows
	// once the feed answers again, 15 s later at most on an idle machine.
	eventually(t, ctx, "the changes made before and during the outage", rowText(ids[0])+`.includes("before the outage") && `+
		rowText(ids[1])+`.includes("FROZEN") && `+rowText(ids[1])+`.includes("during the outage")`)
	eventually(t, ctx, "the live indicator again", `document.querySelector(".live")?.dataset.state === "live"`)
	site.mu.Lock()
	failed := append([]time.Time(nil), site.failed...)
	site.mu.Unlock()
	if len(failed) != failures {
		t.Fatalf("got %d failed feed requests, want %d", len(failed), failures)
	}
	for i := 1; i < len(failed); i++ {
		// The delay before retry i is at least half of 1 s doubled i-1 times.
		if gap, least := failed[i].Sub(failed[i-1]), time.Duration(500<<(i-1))*time.Millisecond; gap < least {
			t.Errorf("retry %d came %v after the failure before it, want at least %v", i, gap, least)
		}
	}
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
}

func TestARefusedFeedStopsFollowingUntilAskedAgain(t *testing.T) {
	p := fmt.Sprintf("feed-refused-%d", time.Now().UnixNano())
	ids := seed(t, p, 1, false)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 1)
	site.mu.Lock()
	site.failing, site.status = 1, http.StatusForbidden
	site.mu.Unlock()
	// The request open now answers this change; the next one is refused.
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"before the refusal"}`, http.StatusOK)
	eventually(t, ctx, "the indicator saying offline and the refusal in the API's words",
		`document.querySelector(".live")?.dataset.state === "offline" && `+has(".live", "Offline")+` && `+has(`.problem[role=alert]`, "Refused (403): alice may not read the fleet"))
	eventually(t, ctx, "the change the last answer brought", rowText(ids[0])+`.includes("FROZEN") && `+rowText(ids[0])+`.includes("before the refusal")`)
	shot(t, ctx, "fleet-live-refused")
	asked := site.count("changes")
	time.Sleep(3 * time.Second) // a retry would come within 1 s
	if n := site.count("changes"); n != asked {
		t.Errorf("after a 403 the page asked the feed %d more times, want none until asked", n-asked)
	}
	do(t, ctx, chromedp.Click(`.problem button.link`))
	eventually(t, ctx, "the live indicator again", `document.querySelector(".live")?.dataset.state === "live" && !document.querySelector(".problem")`)
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/activate", `{"message":"after the refusal"}`, http.StatusOK)
	eventually(t, ctx, "the change after the refusal", rowText(ids[0])+`.includes("ACTIVE") && `+rowText(ids[0])+`.includes("after the refusal")`)
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
}

func TestMalformedAndRepeatedChangesAreLeftOut(t *testing.T) {
	p := fmt.Sprintf("feed-bad-%d", time.Now().UnixNano())
	ids := seed(t, p, 2, false)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 2)
	// The answer that carries the freeze also carries changes the page
	// cannot apply, and the freeze again, older, as DEAD: an answer read
	// twice or out of order.
	site.mu.Lock()
	site.tamper = func(changes []json.RawMessage) []json.RawMessage {
		var real map[string]any
		if err := json.Unmarshal(changes[0], &real); err != nil || real["slaveId"] != ids[0] {
			t.Errorf("the answer to tamper with: got %s (%v), want the freeze of %s", changes, err, ids[0])
			return changes
		}
		older := maps.Clone(real)
		older["sequence"] = real["sequence"].(float64) - 1
		slave := maps.Clone(real["slave"].(map[string]any))
		state := maps.Clone(slave["currentState"].(map[string]any))
		state["state"], state["message"] = "DEAD", "an older change"
		slave["currentState"] = state
		older["slave"] = slave
		bad := []string{
			`null`, `"freeze"`, `{"slaveId":` + jsonString(ids[1]) + `,"type":"stateChanged","sequence":1}`,
			`{"slaveId":` + jsonString(ids[1]) + `,"type":"stateChanged","sequence":1,"slave":{"id":` + jsonString(ids[1]) + `,"host":"h","rackId":"r","currentState":{"state":"<b>NOPE</b>","timestamp":1}}}`,
			`{"slaveId":` + jsonString(ids[1]) + `,"type":"stateChanged","sequence":1,"slave":{"id":"someone-else","host":"h","rackId":"r","currentState":{"state":"DEAD","timestamp":1}}}`,
			`{"slaveId":` + jsonString(ids[1]) + `,"type":"exploded","sequence":1}`,
		}
		var out []json.RawMessage
		for _, b := range bad {
			out = append(out, json.RawMessage(b))
		}
		again, _ := json.Marshal(older)
		return append(append(out, changes...), again)
	}
	site.mu.Unlock()
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"the real change"}`, http.StatusOK)
	eventually(t, ctx, "the real change", rowText(ids[0])+`.includes("FROZEN") && `+rowText(ids[0])+`.includes("the real change")`)
	site.mu.Lock()
	tampered := site.tamper == nil
	site.mu.Unlock()
	if !tampered {
		t.Fatal("the answer of the freeze came without the changes added to it")
	}
	// The page applies an answer's changes together and draws them in one
	// draw: the one that shows the real change shows what the others did.
	var got struct {
		First, Second string
		Rows          int
	}
	do(t, ctx, chromedp.Evaluate(`({first: `+rowText(ids[0])+`, second: `+rowText(ids[1])+`, rows: document.querySelectorAll("table.fleet tbody tr[data-id]").length})`, &got))
	if !strings.Contains(got.First, "FROZEN") || strings.Contains(got.First, "an older change") {
		t.Errorf("the repeated older change was applied: row %q", got.First)
	}
	if !strings.Contains(got.Second, "ACTIVE") || got.Rows != 2 {
		t.Errorf("a malformed change was applied: row %q, %d rows", got.Second, got.Rows)
	}
	// The page still follows: the next change shows.
	api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"after the bad answer"}`, http.StatusOK)
	eventually(t, ctx, "the next change", rowText(ids[1])+`.includes("FROZEN") && `+rowText(ids[1])+`.includes("after the bad answer")`)
}

// jsonString is s as a JSON string.
func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestTheFleetIsReadFromTheFeedsInitialStateWithoutAList(t *testing.T) {
	p := fmt.Sprintf("feed-initial-%d", time.Now().UnixNano())
	ids := seed(t, p, 3, false)
	remove(t, ids)
	api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"before the page"}`, http.StatusOK)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 3)
	eventually(t, ctx, "the fleet as it was before the page", rowText(ids[1])+`.includes("FROZEN") && `+rowText(ids[1])+`.includes("before the page")`+
		` && `+has(".counts", "1 FROZEN")+` && `+has(".counts", "2 ACTIVE"))
	api(t, "POST", "/api/slaves/slave/"+ids[2]+"/freeze", `{"message":"after the initial state"}`, http.StatusOK)
	took := within(t, ctx, "the change after the initial state", rowText(ids[2])+`.includes("FROZEN") && `+rowText(ids[2])+`.includes("after the initial state")`)
	t.Logf("after the initial state: shown after %v", took)
	if n := site.count("list"); n != 0 {
		t.Errorf("the page listed the fleet %d times, want none: the feed's initial state is the list", n)
	}
	if n := site.count("initial"); n != 1 {
		t.Errorf("the page read the feed's initial state %d times, want once", n)
	}
}

func TestAnAPIWithoutTheInitialStateIsListedAndFollowed(t *testing.T) {
	for _, older := range []string{"ignores", "refuses"} {
		t.Run("one that "+older+" initial", func(t *testing.T) {
			p := fmt.Sprintf("feed-older-%s-%d", older, time.Now().UnixNano())
			ids := seed(t, p, 2, false)
			remove(t, ids)
			site := countedSite(t, "")
			site.older = older
			ctx := tab(t)
			openFleet(t, ctx, site.URL, p, 2)
			api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"followed after a list"}`, http.StatusOK)
			eventually(t, ctx, "the change after the list", rowText(ids[0])+`.includes("FROZEN") && `+rowText(ids[0])+`.includes("followed after a list")`)
			if n, m := site.count("initial"), site.count("list"); n != 1 || m != 1 {
				t.Errorf("the page asked for the initial state %d times and listed the fleet %d times, want once each", n, m)
			}
		})
	}
}

func TestAnExpiringChangeShowsAndGoesLive(t *testing.T) {
	p := fmt.Sprintf("feed-expiring-%d", time.Now().UnixNano())
	ids := seed(t, p, 2, false)
	remove(t, ids)
	site := countedSite(t, "")
	ctx := tab(t)
	openFleet(t, ctx, site.URL, p, 2)
	pendingOf := func(id string) string {
		return fmt.Sprintf(`(%s?.querySelector("td[data-col=pending]")?.innerText ?? "")`, row(id))
	}

	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"kernel upgrade","durationMillis":3600000,"revertToState":"ACTIVE"}`, http.StatusOK)
	api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"disk check","durationMillis":7200000,"revertToState":"ACTIVE"}`, http.StatusOK)
	took := within(t, ctx, "both pending returns", pendingOf(ids[0])+`.includes("→ ACTIVE in 59m") && `+pendingOf(ids[1])+`.includes("→ ACTIVE in 1h 59m")`)
	t.Logf("set: shown after %v", took)
	do(t, ctx, away())
	shot(t, ctx, "fleet-live-expiring")

	// The trigger runs as if the hour had passed: the first returns, the
	// second (two hours) stays pending.
	runner := jobs.New(store, limits, 7*24*time.Hour, quiet, nil)
	runner.Now = func() time.Time { return time.Now().Add(61 * time.Minute) }
	if _, err := runner.Expire(context.Background()); err != nil {
		t.Fatal(err)
	}
	took = within(t, ctx, "the first back to ACTIVE without its pending return", rowText(ids[0])+`.includes("ACTIVE") && `+rowText(ids[0])+`.includes("Updated due to expiring action") && `+
		pendingOf(ids[0])+` === "" && `+pendingOf(ids[1])+`.includes("→ ACTIVE")`)
	t.Logf("reverted: shown after %v", took)

	api(t, "DELETE", "/api/slaves/slave/"+ids[1]+"/expiring", "", http.StatusOK)
	took = within(t, ctx, "the second's pending return gone, the machine still FROZEN", pendingOf(ids[1])+` === "" && `+rowText(ids[1])+`.includes("FROZEN") && `+rowText(ids[1])+`.includes("disk check")`)
	t.Logf("deleted: gone after %v", took)
	shot(t, ctx, "fleet-live-expiring-gone")
	if n := site.count("expiring"); n != 1 {
		t.Errorf("the page read the pending changes %d times, want once: the feed brings their changes", n)
	}
	if n := site.reads(); n != 1 {
		t.Errorf("the page read the fleet %d times, want once", n)
	}
}
