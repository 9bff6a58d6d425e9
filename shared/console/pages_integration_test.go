//go:build integration

package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/fleetops/fleet/shared/jobs"
)

func TestFleetPageCountsFiltersSortsAndRemembers(t *testing.T) {
	ids := seed(t, "fleetpage", 12, false)
	api(t, "POST", "/api/slaves/slave/"+ids[3]+"/freeze", `{"message":"disk check"}`, 200)
	api(t, "POST", "/api/slaves/slave/"+ids[4]+"/freeze", `{"message":"kernel","durationMillis":7200000,"revertToState":"ACTIVE"}`, 200)
	t.Cleanup(func() {
		for _, id := range ids {
			api(t, "DELETE", "/api/slaves/slave/"+id, "", 200)
		}
	})
	ctx := tab(t)
	open(t, ctx, site.URL, "#/fleet", "table.fleet tbody tr")
	eventually(t, ctx, "the frozen machine with its message", has("table.fleet tbody", "disk check"))
	eventually(t, ctx, "the pending change with its countdown", has(`td[data-col=pending]`, "→ ACTIVE in 1h 59m"))

	t.Run("search by host narrows the rows and goes into the address", func(t *testing.T) {
		do(t, ctx, chromedp.SendKeys(`input[type=search]`, "fleetpage-node-1"))
		// fleetpage-node-1, -10, -11
		eventually(t, ctx, "3 rows", `document.querySelectorAll("table.fleet tbody tr").length === 3`)
		eventually(t, ctx, "q in the address", `location.hash.includes("q=fleetpage-node-1")`)
	})
	t.Run("a state count filters by state", func(t *testing.T) {
		do(t, ctx, clear(`input[type=search]`), chromedp.SendKeys(`input[type=search]`, "fleetpage"))
		eventually(t, ctx, "a FROZEN count of 2", has(".counts a.s-frozen", "2 FROZEN"))
		do(t, ctx, chromedp.Click(".counts a.s-frozen"))
		eventually(t, ctx, "2 frozen rows", `document.querySelectorAll("table.fleet tbody tr").length === 2 && location.hash.includes("state=FROZEN")`)
	})
	t.Run("sorting by host descending", func(t *testing.T) {
		do(t, ctx, chromedp.Click(".counts li:first-child a"), chromedp.Click(`button.sort[data-col=host]`), chromedp.Click(`button.sort[data-col=host]`))
		eventually(t, ctx, "host sorted descending", `document.querySelector("th[aria-sort=descending] button[data-col=host]") !== null &&
			document.querySelector("table.fleet tbody td[data-col=host]").innerText === "fleetpage-node-9.example.com"`)
	})
	t.Run("a shared address shows the same view", func(t *testing.T) {
		var url string
		do(t, ctx, chromedp.Location(&url))
		other := tab(t)
		do(t, other, chromedp.Navigate(url))
		eventually(t, other, "the same first row", `document.querySelector("table.fleet tbody td[data-col=host]")?.innerText === "fleetpage-node-9.example.com"`)
	})
	t.Run("columns and filters persist in the browser", func(t *testing.T) {
		do(t, ctx, chromedp.Click("details.columns summary"), chromedp.Click(`details.columns input[type=checkbox]:nth-of-type(1)`, chromedp.NodeVisible))
		do(t, ctx, chromedp.Evaluate(`(() => { const b = [...document.querySelectorAll("details.columns label")].find(l => l.innerText.includes("Rack")).querySelector("input"); b.click(); return true })()`, nil))
		eventually(t, ctx, "no rack column", `document.querySelector("td[data-col=rack]") === null`)
		open(t, ctx, site.URL, "#/fleet", "table.fleet tbody tr")
		eventually(t, ctx, "the saved search and sort, without rack", `location.hash.includes("q=fleetpage") && location.hash.includes("sort=host") && document.querySelector("td[data-col=rack]") === null`)
		do(t, ctx, chromedp.Evaluate(`localStorage.clear()`, nil))
	})
}

func TestMachinePageActions(t *testing.T) {
	ids := seed(t, "actions", 5, false)
	t.Cleanup(func() {
		for _, id := range ids[1:] {
			api(t, "DELETE", "/api/slaves/slave/"+id, "", 200)
		}
	})
	id := ids[0]
	ctx := tab(t)
	open(t, ctx, site.URL, "#/machine/"+id, "form.actions")
	eventually(t, ctx, "details", has("main", "actions-node-0.example.com"))

	before := changes.len()
	t.Run("freeze for 2 hours with a message", func(t *testing.T) {
		do(t, ctx, chromedp.Click(`form.actions input[value=freeze]`),
			chromedp.SendKeys(`form.actions textarea`, "kernel upgrade"),
			choose(`form.actions select`, "custom"))
		do(t, ctx, clear(`form.actions input[type=number]`), chromedp.SendKeys(`form.actions input[type=number]`, "2"), chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "For 2h: at about")
		// As a person would, the next change waits for this one's result:
		// the form is off until then (the feed may draw the machine first).
		eventually(t, ctx, "done", has("form.actions .result", "Done: "+id+" is FROZEN for 2h"))
		eventually(t, ctx, "the FROZEN badge and pending revert", has("main .title", "FROZEN")+" && "+has("main .title", "→ ACTIVE in 1h 59m"))
		eventually(t, ctx, "the history's newest entry", has("ol.timeline li:first-child", "FROZEN")+" && "+has("ol.timeline li:first-child", "kernel upgrade"))
	})
	t.Run("a refused change shows the API's message next to the button", func(t *testing.T) {
		do(t, ctx, chromedp.Click(`form.actions input[value=freeze]`), chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "goes from FROZEN to FROZEN")
		eventually(t, ctx, "the 409", has("form.actions .result", "FAILURE_ALREADY_AT_STATE - Slave "+id+" is in FROZEN state"))
	})
	t.Run("make permanent cancels the pending revert", func(t *testing.T) {
		do(t, ctx, chromedp.Click(`//button[text()="Make permanent"]`, chromedp.BySearch))
		confirmDialog(t, ctx, "the pending return to ACTIVE is cancelled")
		eventually(t, ctx, "no pending change", `!document.querySelector("main .pending")`)
		if body := api(t, "GET", "/api/slaves/expiring", "", 200); strings.Contains(body, id) {
			t.Errorf("got %s, want no expiring record of %s", body, id)
		}
	})
	t.Run("an answer lost on the way back is retried with the same key and applied once", func(t *testing.T) {
		faults.arm()
		do(t, ctx, chromedp.Click(`form.actions input[value=activate]`), chromedp.SendKeys(`form.actions textarea`, "back to work"), chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "goes from FROZEN to ACTIVE")
		eventually(t, ctx, "the 503 with its Retry-After", has("form.actions .result", "try again in 2 s"))
		var kept string
		do(t, ctx, chromedp.Value(`form.actions textarea`, &kept))
		if kept != "back to work" {
			t.Errorf("got message %q after the failure, want what was typed kept", kept)
		}
		do(t, ctx, chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "goes from FROZEN to ACTIVE")
		eventually(t, ctx, "done", has("form.actions .result", "Done: "+id+" is ACTIVE"))
		eventually(t, ctx, "ACTIVE", has("main .title", "ACTIVE"))
	})
	t.Run("every change carried an Idempotency-Key, the retry the same one", func(t *testing.T) {
		sent := changes.since(before)
		if len(sent) != 5 {
			t.Fatalf("got changes %q, want freeze, freeze, make permanent, activate twice", sent)
		}
		for _, s := range sent {
			if strings.HasSuffix(s, " ") {
				t.Errorf("got %q, want an Idempotency-Key", s)
			}
		}
		if sent[3] != sent[4] {
			t.Errorf("got %q then %q, want the retry to reuse the key", sent[3], sent[4])
		}
		if sent[0] == sent[1] {
			t.Errorf("got %q twice, want a new key for a new request", sent[0])
		}
		history := api(t, "GET", "/api/slaves/slave/"+id, "", 200)
		if n := strings.Count(history, "back to work"); n != 1 {
			t.Errorf("got %d activations in the history, want 1: %s", n, history)
		}
	})
	t.Run("the decommission limit refusal is shown", func(t *testing.T) {
		api(t, "POST", "/api/slaves/slave/"+ids[1]+"/decommission", "", 200)
		api(t, "POST", "/api/slaves/slave/"+ids[2]+"/decommission", "", 200)
		defer api(t, "POST", "/api/slaves/slave/"+ids[1]+"/activate", "", 200)
		defer api(t, "POST", "/api/slaves/slave/"+ids[2]+"/activate", "", 200)
		do(t, ctx, chromedp.Click(`form.actions input[value=decommission]`), chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "goes from ACTIVE to STARTING_DECOMMISSION")
		eventually(t, ctx, "the 400", has("form.actions .result", "2 slaves are already decommissioning state (2 allowed at once)"))
	})
	t.Run("the history timeline is newest first", func(t *testing.T) {
		open(t, ctx, site.URL, "#/machine/"+id, "ol.timeline li")
		var states []string
		do(t, ctx, chromedp.Evaluate(`[...document.querySelectorAll("ol.timeline li .badge")].map(b => b.innerText)`, &states))
		if want := []string{"ACTIVE", "FROZEN", "ACTIVE"}; strings.Join(states, " ") != strings.Join(want, " ") {
			t.Errorf("got timeline %v, want %v", states, want)
		}
	})
	t.Run("delete removes the machine and returns to the fleet", func(t *testing.T) {
		do(t, ctx, chromedp.Click(`//button[text()="Delete machine…"]`, chromedp.BySearch))
		confirmDialog(t, ctx, "removes the machine, its whole history")
		eventually(t, ctx, "the fleet page", `location.hash.startsWith("#/fleet")`)
		api(t, "GET", "/api/slaves/slave/"+id+"/details", "", 404)
	})
}

func TestExpiringChangeRevertsWhileThePageIsOpen(t *testing.T) {
	id := seed(t, "revert", 1, false)[0]
	t.Cleanup(func() { api(t, "DELETE", "/api/slaves/slave/"+id, "", 200) })
	ctx := tab(t)
	open(t, ctx, site.URL, "#/machine/"+id, "form.actions")
	do(t, ctx, chromedp.Click(`form.actions input[value=freeze]`), choose(`form.actions select`, "3600000"), chromedp.Click(`form.actions button[type=submit]`))
	confirmDialog(t, ctx, "returns to ACTIVE")
	eventually(t, ctx, "the pending revert", has("main .title", "→ ACTIVE in 59m"))

	// The trigger runs as if the hour had passed.
	runner := jobs.New(store, limits, 7*24*time.Hour, quiet, nil)
	runner.Now = func() time.Time { return time.Now().Add(61 * time.Minute) }
	if _, err := runner.Expire(context.Background()); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, away())
	eventually(t, ctx, "ACTIVE again without a reload", has("main .title", "ACTIVE")+` && !document.querySelector("main .pending")`)
	eventually(t, ctx, "the revert in the timeline", has("ol.timeline li:first-child", "Updated due to expiring action"))
}

func TestExpiringPageAndRemovingDeadMachines(t *testing.T) {
	live := seed(t, "alive", 1, false)[0]
	dead := seed(t, "gone", 3, true)
	t.Cleanup(func() { api(t, "DELETE", "/api/slaves/slave/"+live, "", 200) })
	api(t, "POST", "/api/slaves/slave/"+live+"/freeze", `{"message":"rack move","durationMillis":14400000,"revertToState":"ACTIVE"}`, 200)
	ctx := tab(t)
	open(t, ctx, site.URL, "#/expiring", "table.grid tbody tr")
	eventually(t, ctx, "the record with its countdown", has("table.grid", live)+" && "+has("table.grid", "in 3h 59m")+" && "+has("table.grid", "rack move"))
	eventually(t, ctx, "the dead count on the button", has("button.danger", "Remove 3 dead machines"))
	do(t, ctx, chromedp.Click(`button.danger`))
	confirmDialog(t, ctx, "Remove 3 dead machines?")
	eventually(t, ctx, "no dead machines left", has("button.danger", "No dead machines"))
	for _, id := range dead {
		api(t, "GET", "/api/slaves/slave/"+id+"/details", "", 404)
	}
}

func TestLogsPage(t *testing.T) {
	ctx := tab(t)
	t.Run("a task's logs, followed page by page to the end, each once", func(t *testing.T) {
		open(t, ctx, site.URL, "#/logs", "form")
		do(t, ctx, chromedp.Click(`input[value=task]`), chromedp.SendKeys(`//label[text()="Task id"]/following-sibling::input`, taskID, chromedp.BySearch),
			choose("main select", "24h"), chromedp.Click(`//button[text()="Find logs"]`, chromedp.BySearch))
		eventually(t, ctx, "the first page", `document.querySelectorAll("table.logs tbody tr").length === 50`)
		for _, want := range []int{100, 120} {
			do(t, ctx, chromedp.Click(`button.more`))
			eventually(t, ctx, fmt.Sprintf("%d logs", want), fmt.Sprintf(`document.querySelectorAll("table.logs tbody tr").length === %d`, want))
		}
		eventually(t, ctx, "the end", has("main", "That is all."))
		var names []string
		do(t, ctx, chromedp.Evaluate(`[...document.querySelectorAll("table.logs td.key span")].map(s => s.innerText)`, &names))
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				t.Errorf("got %s twice", n)
			}
			seen[n] = true
		}
		if len(seen) != logFiles {
			t.Errorf("got %d distinct logs, want %d", len(seen), logFiles)
		}
	})
	t.Run("view and download fetch the object", func(t *testing.T) {
		var view, download string
		do(t, ctx, chromedp.AttributeValue(`table.logs tbody tr:first-child a.view`, "href", &view, nil),
			chromedp.AttributeValue(`table.logs tbody tr:first-child a.download`, "href", &download, nil))
		for _, link := range []struct{ url, disposition string }{{view, ""}, {download, "attachment"}} {
			res, err := http.Get(link.url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(body), "of "+taskID) {
				t.Errorf("GET %s: got %d %s, want the log", link.url, res.StatusCode, body)
			}
			if got := res.Header.Get("Content-Disposition"); !strings.Contains(got, link.disposition) {
				t.Errorf("GET %s: got Content-Disposition %q, want %q", link.url, got, link.disposition)
			}
		}
	})
	t.Run("the lookup is a shareable address", func(t *testing.T) {
		var url string
		do(t, ctx, chromedp.Location(&url))
		if !strings.Contains(url, "task="+taskID) {
			t.Fatalf("got %s, want the task in the address", url)
		}
		other := tab(t)
		do(t, other, chromedp.Navigate(url))
		eventually(t, other, "the first page", `document.querySelectorAll("table.logs tbody tr").length === 50`)
	})
	t.Run("a task id in a machine's history is one click from its logs", func(t *testing.T) {
		id := seed(t, "tasklink", 1, false)[0]
		defer api(t, "DELETE", "/api/slaves/slave/"+id, "", 200)
		api(t, "POST", "/api/slaves/slave/"+id+"/freeze", `{"message":"draining (`+taskID+`) first"}`, 200)
		open(t, ctx, site.URL, "#/machine/"+id, "ol.timeline li a")
		do(t, ctx, chromedp.Click(`ol.timeline li:first-child a`))
		eventually(t, ctx, "the task's logs", `location.hash.includes("task=`+taskID+`") && document.querySelectorAll("table.logs tbody tr").length === 50`)
	})
	t.Run("no logs in the window is not an error", func(t *testing.T) {
		open(t, ctx, site.URL, "#/logs?by=request&request=nobody&window=1h", "main .info")
		eventually(t, ctx, "the message", has("main .info", "No logs in this window"))
	})
	t.Run("S3 not configured is said so", func(t *testing.T) {
		open(t, ctx, noS3Site.URL, "#/logs?by=task&task="+taskID+"&window=24h", "main .info")
		eventually(t, ctx, "the message", has("main .info", "S3 is not configured"))
	})
	t.Run("a bad task id shows the API's message", func(t *testing.T) {
		open(t, ctx, site.URL, "#/logs?by=task&task=nonsense&window=24h", "main .problem")
		eventually(t, ctx, "the 400", has("main .problem", "nonsense is not a valid task id"))
	})
}

func TestNetworkDownIsShownAndKeepsTheForm(t *testing.T) {
	id := seed(t, "offline", 1, false)[0]
	t.Cleanup(func() { api(t, "DELETE", "/api/slaves/slave/"+id, "", 200) })
	ctx := tab(t)
	open(t, ctx, site.URL, "#/machine/"+id, "form.actions")
	do(t, ctx, chromedp.SendKeys(`form.actions textarea`, "network check"))
	// Requests to the API fail as when the network is down.
	do(t, ctx, chromedp.Evaluate(`window.fetch = () => Promise.reject(new TypeError("Failed to fetch")); true`, nil))
	do(t, ctx, chromedp.Click(`form.actions input[value=freeze]`), chromedp.Click(`form.actions button[type=submit]`))
	confirmDialog(t, ctx, "goes from ACTIVE to FROZEN")
	eventually(t, ctx, "the network error", has("form.actions .result", "cannot be reached"))
	var kept string
	do(t, ctx, chromedp.Value(`form.actions textarea`, &kept))
	if kept != "network check" {
		t.Errorf("got %q, want the message kept", kept)
	}
}

func TestTheKeyboardAlone(t *testing.T) {
	id := seed(t, "keys", 3, false)[0]
	t.Cleanup(func() {
		for i := range 3 {
			api(t, "DELETE", fmt.Sprintf("/api/slaves/slave/keys-S%d", i), "", 200)
		}
	})
	ctx := tab(t)
	open(t, ctx, site.URL, "#/fleet", "table.fleet tbody tr")
	// tabTo presses Tab until the focus is on sel.
	tabTo := func(sel string) {
		t.Helper()
		for range 40 {
			var on bool
			do(t, ctx, chromedp.Evaluate(fmt.Sprintf(`document.activeElement?.matches(%q) ?? false`, sel), &on))
			if on {
				return
			}
			do(t, ctx, chromedp.KeyEvent(kb.Tab))
		}
		t.Fatalf("Tab never reached %s", sel)
	}
	tabTo(`input[type=search]`)
	do(t, ctx, chromedp.KeyEvent("keys-node"))
	eventually(t, ctx, "3 rows", `document.querySelectorAll("table.fleet tbody tr").length === 3`)
	tabTo(`button.sort[data-col=host]`)
	do(t, ctx, chromedp.KeyEvent(kb.Enter), chromedp.KeyEvent(kb.Enter))
	eventually(t, ctx, "host sorted descending", `document.querySelector("th[aria-sort=descending] button[data-col=host]") !== null`)

	t.Run("Escape cancels a confirmation and sends nothing", func(t *testing.T) {
		open(t, ctx, site.URL, "#/machine/"+id, "form.actions")
		before := changes.len()
		tabTo(`form.actions button[type=submit]`)
		do(t, ctx, chromedp.KeyEvent(kb.Enter))
		eventually(t, ctx, "the confirmation", `document.querySelector("dialog.confirm[open]") !== null && document.activeElement.value === "cancel"`)
		do(t, ctx, chromedp.KeyEvent(kb.Escape))
		eventually(t, ctx, "no dialog", `document.querySelector("dialog.confirm") === null`)
		if n := changes.len() - before; n != 0 {
			t.Errorf("got %d changes sent, want none", n)
		}
	})
}
