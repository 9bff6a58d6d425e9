//go:build integration

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/dev/browser"
	"github.com/fleetops/fleet/shared/console"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
)

// The operator's daily work on a phone (390 px) and a laptop (1440 px):
// the fleet as cards or as a table that fits, changes to many machines at
// once under a guard, the next action offered, a search over everything a
// row says, and the logs' times with their zone.

var widths = []int64{390, 1440}

// wideMessage is a message longer than any screen is wide.
var wideMessage = "replacing the NVMe drive in bay 3 after repeated I/O errors; " + strings.Repeat("waiting for the vendor's part and the rack team's slot, ", 6) + "end"

// noSideways fails when the page, or the fleet table in its frame, is wider
// than the window.
func noSideways(t *testing.T, ctx context.Context, width int64) {
	t.Helper()
	var got struct{ Page, Window, Table, Frame float64 }
	do(t, ctx, chromedp.Evaluate(`(() => { const w = document.querySelector(".table-wrap");
		return {Page: document.documentElement.scrollWidth, Window: window.innerWidth, Table: w ? w.scrollWidth : 0, Frame: w ? w.clientWidth : 0} })()`, &got))
	if got.Page > got.Window+1 || got.Table > got.Frame+1 {
		t.Errorf("at %d px: page %v px wide in a %v px window, table %v px in a %v px frame: want no sideways scroll", width, got.Page, got.Window, got.Table, got.Frame)
	}
}

// axeClean runs axe-core on the page as it is: no serious or critical
// violation is allowed.
func axeClean(t *testing.T, ctx context.Context) {
	t.Helper()
	var violations []string
	do(t, ctx, chromedp.Evaluate(axe(t)+`;true`, nil), chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"]}).then(r =>
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")))`, &violations, withAwait))
	if len(violations) > 0 {
		t.Errorf("axe-core found:\n%s", strings.Join(violations, "\n"))
	}
}

func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate(`document.fonts.ready.then(() => true)`, nil, withAwait), browser.Screenshot(filepath.Join(shots, name+".png")))
}

// sized opens a tab at width px.
func sized(t *testing.T, width int64) context.Context {
	t.Helper()
	ctx := tab(t)
	do(t, ctx, browser.Look(width, "light"))
	return ctx
}

func remove(t *testing.T, ids []string) {
	t.Cleanup(func() {
		for _, id := range ids {
			api(t, "DELETE", "/api/slaves/slave/"+id, "", 200)
		}
	})
}

func TestFleetIsCardsOnAPhoneAndFitsALaptop(t *testing.T) {
	ids := seed(t, "layout", 6, false)
	remove(t, ids)
	body, _ := json.Marshal(map[string]any{"message": wideMessage, "durationMillis": 7200000, "revertToState": "ACTIVE"})
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", string(body), 200)
	row := fmt.Sprintf(`[...document.querySelectorAll("table.fleet tbody tr")].find(r => r.innerText.includes(%q))`, ids[0])
	for _, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx := sized(t, width)
			open(t, ctx, site.URL, "#/fleet?q=layout-", "table.fleet tbody tr")
			eventually(t, ctx, "the pending change", has("table.fleet tbody", "→ ACTIVE"))
			shot(t, ctx, fmt.Sprintf("fleet-layout-%d", width))
			noSideways(t, ctx, width)
			// Every cell that matters is on the screen, whole or cut with
			// its full text at hand.
			var cells []struct {
				Col          string
				Left, Right  float64
				Width, Shown float64
				Title        string
			}
			do(t, ctx, chromedp.Evaluate(row+`.querySelectorAll("td")`+`.length && [...`+row+`.querySelectorAll("td")].map(td => { const r = td.getBoundingClientRect(); const m = td.querySelector("span.msg");
				return {Col: td.dataset.col, Left: r.left, Right: r.right, Width: m ? m.scrollWidth : 0, Shown: m ? m.clientWidth : 0, Title: m ? m.title : ""} })`, &cells))
			seen := map[string]bool{}
			for _, c := range cells {
				if c.Left == 0 && c.Right == 0 {
					continue // an empty cell, left out of a card
				}
				seen[c.Col] = true
				if c.Left < 0 || c.Right > float64(width)+1 || c.Right <= c.Left {
					t.Errorf("at %d px the %s cell is at %v–%v: want it on the screen", width, c.Col, c.Left, c.Right)
				}
				if c.Col == "message" && c.Width > c.Shown+1 && c.Title != wideMessage {
					t.Errorf("the message is cut with title %q: want the whole message in the title", c.Title)
				}
			}
			for _, col := range []string{"id", "state", "message", "pending"} {
				if !seen[col] {
					t.Errorf("at %d px got cells %v: want %s", width, cells, col)
				}
			}
			var height float64
			do(t, ctx, chromedp.Evaluate(row+`.getBoundingClientRect().height`, &height))
			if width == 390 {
				eventually(t, ctx, "cards: no header, labelled lines", `getComputedStyle(document.querySelector("table.fleet thead")).display === "none" &&
					getComputedStyle(document.querySelector("table.fleet tbody td[data-col=state]"), "::before").content.includes("State")`)
			} else if height > 60 {
				t.Errorf("at %d px the row of a long message is %v px tall: want one line", width, height)
			}
		})
	}
}

// seedAttributes reports n machines, the first with a pool attribute of
// its own.
func seedAttributes(t *testing.T, prefix string, n int) []string {
	t.Helper()
	var ids, list []string
	for i := range n {
		id := fmt.Sprintf("%s-S%d", prefix, i)
		ids = append(ids, id)
		pool := "general"
		if i == 0 {
			pool = "gpu-a100"
		}
		list = append(list, fmt.Sprintf(`{"id":%q,"host":"%s-node-%d.example.com","rackId":"us-east-1a","attributes":{"pool":%q},"resources":{"cpus":%d,"mem":63000}}`, id, prefix, i, pool, 8*(i+1)))
	}
	if _, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(`{"machines":[`+strings.Join(list, ",")+`]}`)); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestFleetSearchesEverythingARowSaysAndShowsCapacity(t *testing.T) {
	ids := seedAttributes(t, "finder", 4)
	remove(t, ids)
	api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"swap PSU ticket-7731"}`, 200)
	// The user a change records is the caller's, which this API (auth off)
	// has none of: the change is applied as an authorizer's caller's is.
	err := store.Apply(context.Background(), ids[2], machine.UserChange(machine.Change{SlaveID: ids[2], Target: machine.Frozen,
		Request: machine.ChangeRequest{Message: "night shift"}, User: "carol@example.com", Now: func() int64 { return time.Now().UnixMilli() }}, limits))
	if err != nil {
		t.Fatal(err)
	}
	// finder-S3 drains with 5 tasks running: the only count the API carries.
	err = store.Apply(context.Background(), ids[3], machine.UserChange(machine.Change{SlaveID: ids[3], Target: machine.StartingDecommission,
		Now: func() int64 { return time.Now().UnixMilli() }}, machine.Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	running := fmt.Sprintf(`{"machines":[{"id":%q,"host":"finder-node-3.example.com","rackId":"us-east-1a","attributes":{"pool":"general"},"resources":{"cpus":32,"mem":63000},"runningTasks":5}]}`, ids[3])
	if _, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(running)); err != nil {
		t.Fatal(err)
	}
	if got := api(t, "GET", "/api/slaves/slave/"+ids[3]+"/details", "", 200); !strings.Contains(got, `"runningTasks":5`) {
		t.Fatalf("got %s, want finder-S3 draining with 5 tasks", got)
	}
	for _, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx := sized(t, width)
			open(t, ctx, site.URL, "#/fleet?q=finder-", "table.fleet tbody tr")
			eventually(t, ctx, "4 rows", `document.querySelectorAll("table.fleet tbody tr").length === 4`)
			// Only the draining machine has a Tasks cell with text; on a
			// card the others have no Tasks line at all.
			eventually(t, ctx, "a task count on finder-S3 alone", `(() => {
				const tds = [...document.querySelectorAll("table.fleet tbody td[data-col=tasks]")];
				const counted = tds.filter((td) => td.textContent !== "");
				return tds.length === 4 && counted.length === 1 && counted[0].textContent === "5" &&
					counted[0].closest("tr").querySelector("a").textContent === "finder-S3" &&
					tds.every((td) => getComputedStyle(td).display !== "none" || (innerWidth <= 700 && td.textContent === ""));
			})()`)
			for _, c := range []struct{ q, want string }{{"pool=gpu", ids[0]}, {"ticket-7731", ids[1]}, {"carol@", ids[2]}} {
				do(t, ctx, clear(`input[type=search]`), chromedp.SendKeys(`input[type=search]`, c.q))
				eventually(t, ctx, c.want+" alone for "+c.q, fmt.Sprintf(`document.querySelectorAll("table.fleet tbody tr").length === 1 && %s`, has("table.fleet tbody", c.want)))
			}
			do(t, ctx, clear(`input[type=search]`), chromedp.SendKeys(`input[type=search]`, "finder-node-3"))
			eventually(t, ctx, "the capacity of finder-S3", `document.querySelector("table.fleet td[data-col=cpus]")?.innerText.includes("32") &&
				document.querySelector("table.fleet td[data-col=mem]")?.innerText.includes("62 GB") &&
				document.querySelector("table.fleet td[data-col=tasks]")?.innerText.includes("5")`)
			shot(t, ctx, fmt.Sprintf("fleet-search-%d", width))
			noSideways(t, ctx, width)
			open(t, ctx, site.URL, "#/machine/"+ids[3], "dl.facts")
			eventually(t, ctx, "the machine page's running tasks", `[...document.querySelectorAll("dl.facts dt")].some((dt) => dt.textContent === "Running tasks" && dt.nextElementSibling.textContent === "5")`)
			shot(t, ctx, fmt.Sprintf("machine-draining-%d", width))
		})
	}
}

// pickRows selects the rows of ids on the fleet page by clicking them: the
// first by its checkbox, the others anywhere in the row.
func pickRows(t *testing.T, ctx context.Context, ids ...string) {
	t.Helper()
	for i, id := range ids {
		sel := fmt.Sprintf(`//tr[.//a[text()=%q]]/td[@data-col="rack"]`, id)
		if i == 0 {
			sel = fmt.Sprintf(`//tr[.//a[text()=%q]]//input[@type="checkbox"]`, id)
		}
		do(t, ctx, chromedp.Click(sel, chromedp.BySearch))
	}
}

func TestBulkChangeOfASelection(t *testing.T) {
	ids := seed(t, "bulk", 4, false)
	remove(t, ids)
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"already"}`, 200)

	t.Run("select all matching, freeze, one refused in the API's words (390)", func(t *testing.T) {
		ctx := sized(t, 390)
		open(t, ctx, site.URL, "#/fleet?q=bulk-", "table.fleet tbody tr")
		eventually(t, ctx, "4 rows", `document.querySelectorAll("table.fleet tbody tr").length === 4`)
		before := changes.len()
		do(t, ctx, chromedp.Click(`//button[text()="Select all 4 matching"]`, chromedp.BySearch))
		eventually(t, ctx, "4 selected", has(".selectbar", "4 selected"))
		do(t, ctx, chromedp.SendKeys(`form.bulk textarea`, "rack power work"), chromedp.Click(`form.bulk button[type=submit]`))
		confirmDialog(t, ctx, "Freeze 4 machines?")
		eventually(t, ctx, "every result", has("form.bulk", "3 applied, 1 refused, 0 held back"))
		eventually(t, ctx, "the refusal", has(fmt.Sprintf(`li[data-id=%q]`, ids[0]), "FAILURE_ALREADY_AT_STATE"))
		for _, id := range ids[1:] {
			eventually(t, ctx, id+" applied", has(fmt.Sprintf(`li[data-id=%q]`, id), "applied: FROZEN"))
			if h := api(t, "GET", "/api/slaves/slave/"+id+"/details", "", 200); !strings.Contains(h, `"FROZEN"`) || !strings.Contains(h, "rack power work") {
				t.Errorf("%s: got %s, want FROZEN with the message", id, h)
			}
		}
		sent := changes.since(before)
		keys := map[string]bool{}
		for _, s := range sent {
			f := strings.Fields(s)
			if len(f) != 3 {
				t.Errorf("got %q, want an Idempotency-Key", s)
				continue
			}
			keys[f[2]] = true
		}
		if len(sent) != 4 || len(keys) != 4 {
			t.Errorf("got changes %q, want 4, each with its own key", sent)
		}
		shot(t, ctx, "fleet-bulk-390")
		noSideways(t, ctx, 390)
		axeClean(t, ctx)

		// What follows a freeze: activate or decommission, for the applied.
		eventually(t, ctx, "the next actions", has("form.bulk .buttons", "Next for the 3 applied")+` && !`+has("form.bulk .buttons", "Freeze…"))
		do(t, ctx, chromedp.Click(`//form[contains(@class,"bulk")]//button[text()="Activate…"]`, chromedp.BySearch))
		eventually(t, ctx, "the 3 applied selected for activate", has(".selectbar", "3 selected")+` && document.querySelector("form.bulk input[value=activate]").checked`)
	})

	t.Run("rows picked by click, activated (1440)", func(t *testing.T) {
		ctx := sized(t, 1440)
		open(t, ctx, site.URL, "#/fleet?q=bulk-", "table.fleet tbody tr")
		eventually(t, ctx, "4 rows", `document.querySelectorAll("table.fleet tbody tr").length === 4`)
		pickRows(t, ctx, ids[1], ids[2], ids[3])
		eventually(t, ctx, "3 selected", has(".selectbar", "3 selected"))
		do(t, ctx, chromedp.Click(`form.bulk input[value=activate]`), chromedp.Click(`form.bulk button[type=submit]`))
		confirmDialog(t, ctx, "Activate 3 machines?")
		eventually(t, ctx, "every result", has("form.bulk", "3 applied, 0 refused"))
		shot(t, ctx, "fleet-bulk-1440")
		noSideways(t, ctx, 1440)
		axeClean(t, ctx)
		for _, id := range ids[1:] {
			if h := api(t, "GET", "/api/slaves/slave/"+id+"/details", "", 200); !strings.Contains(h, `"ACTIVE"`) {
				t.Errorf("%s: got %s, want ACTIVE", id, h)
			}
		}
	})
}

// outOfActive counts the machines of prefix in any state but ACTIVE, as the
// API lists them.
func outOfActive(prefix string) (int, error) {
	res, err := http.Get(site.URL + "/api/slaves")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var list []struct {
		ID           string
		CurrentState struct{ State string }
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list {
		if strings.HasPrefix(s.ID, prefix) && s.CurrentState.State != "ACTIVE" {
			n++
		}
	}
	return n, nil
}

// A guard of 0 allows no disruption: the form refuses it and says why (as
// the browser's own refusal of the field), before asking anything or
// sending any change.
func TestBulkGuardOfZeroIsRefused(t *testing.T) {
	ids := seed(t, "guardzero", 3, false)
	remove(t, ids)
	ctx := sized(t, 1440)
	open(t, ctx, site.URL, "#/fleet?q=guardzero-", "table.fleet tbody tr")
	eventually(t, ctx, "3 rows", `document.querySelectorAll("table.fleet tbody tr").length === 3`)
	do(t, ctx, chromedp.Click(`//button[text()="Select all 3 matching"]`, chromedp.BySearch),
		chromedp.Click(`form.bulk input[value=freeze]`),
		chromedp.SendKeys(`//label[starts-with(text(),"At most N")]/following-sibling::input`, "0", chromedp.BySearch),
		chromedp.Click(`form.bulk button[type=submit]`))
	eventually(t, ctx, "the refusal in the guard's own words", `(() => { const g = document.evaluate('//label[starts-with(text(),"At most N")]/following-sibling::input', document, null, 9).singleNodeValue;
		return !g.validity.valid && g.validationMessage.includes("A guard of 0 allows no machine out of ACTIVE") })()`)
	var asked bool
	do(t, ctx, chromedp.Evaluate(`!!document.querySelector("dialog.confirm[open]")`, &asked))
	if n, err := outOfActive("guardzero-"); err != nil || n != 0 || asked {
		t.Errorf("got %d machines out of ACTIVE (%v) and a confirmation shown: %v, want nothing asked or changed", n, err, asked)
	}
}

func TestBulkGuardKeepsAtMostNOutOfActive(t *testing.T) {
	ids := seed(t, "guard", 8, false)
	remove(t, ids)
	api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"message":"already out"}`, 200)
	for _, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx := sized(t, width)
			open(t, ctx, site.URL, "#/fleet?q=guard-", "table.fleet tbody tr")
			eventually(t, ctx, "8 rows", `document.querySelectorAll("table.fleet tbody tr").length === 8`)
			do(t, ctx, chromedp.Click(`//button[text()="Select all 8 matching"]`, chromedp.BySearch),
				chromedp.Click(`form.bulk input[value=freeze]`),
				chromedp.SendKeys(`//label[starts-with(text(),"At most N")]/following-sibling::input`, "3", chromedp.BySearch),
				chromedp.Click(`form.bulk button[type=submit]`))
			eventually(t, ctx, "the confirmation with the guard", has("dialog.confirm", "at most 3 of them out of ACTIVE at once"))

			// The test watches the API while the changes go out.
			var most, polls int
			var pollErr error
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					n, err := outOfActive("guard-")
					if err != nil {
						pollErr = err
						return
					}
					polls++
					most = max(most, n)
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			do(t, ctx, chromedp.Click("dialog.confirm button[value=ok]"))
			eventually(t, ctx, "every result", has("form.bulk", "held back by the guard."))
			close(stop)
			<-done
			n, err := outOfActive("guard-")
			if err != nil || pollErr != nil {
				t.Fatal(err, pollErr)
			}
			if most > 3 || n != 3 {
				t.Errorf("got at most %d (over %d looks) and finally %d machines out of ACTIVE, want never more than 3 and 3 at the end", most, polls, n)
			}
			eventually(t, ctx, "the counts", has("form.bulk", "2 applied, 1 refused, 5 held back by the guard."))
			eventually(t, ctx, "a held-back row", has("ol.bulk-results", "held back by the guard"))
			shot(t, ctx, fmt.Sprintf("fleet-guard-%d", width))
			noSideways(t, ctx, width)
			for _, id := range ids[1:] { // back to one out, for the next width
				var s struct{ CurrentState struct{ State string } }
				json.Unmarshal([]byte(api(t, "GET", "/api/slaves/slave/"+id+"/details", "", 200)), &s)
				if s.CurrentState.State != "ACTIVE" {
					api(t, "POST", "/api/slaves/slave/"+id+"/activate", "", 200)
				}
			}
		})
	}
}

func TestTheNextActionIsOffered(t *testing.T) {
	ids := seed(t, "nextstep", 2, false)
	remove(t, ids)
	for i, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx := sized(t, width)
			open(t, ctx, site.URL, "#/machine/"+ids[i], "form.actions")
			// What the title says when the result shows: the next actions
			// show with the machine as the change left it, so that nothing
			// above them moves once they can be aimed at.
			do(t, ctx, chromedp.Evaluate(`new MutationObserver((_, o) => { if (document.querySelector("form.actions .next")) {
				window.shownWith = document.querySelector("main .title").innerText; o.disconnect() } }).observe(document.querySelector("form.actions"), {childList: true, subtree: true}); true`, nil))
			do(t, ctx, chromedp.Click(`form.actions input[value=freeze]`), chromedp.Click(`form.actions button[type=submit]`))
			confirmDialog(t, ctx, "goes from ACTIVE to FROZEN")
			eventually(t, ctx, "activate or decommission next", has("form.actions .next", "Activate…")+" && "+has("form.actions .next", "Decommission…")+
				" && !"+has("form.actions .next", "Freeze…")+` && document.querySelector("form.actions input[value=activate]").checked`)
			var shownWith string
			do(t, ctx, chromedp.Evaluate(`window.shownWith`, &shownWith))
			if !strings.Contains(shownWith, "FROZEN") {
				t.Errorf("the next actions showed under the title %q: want the machine shown FROZEN by then", shownWith)
			}
			shot(t, ctx, fmt.Sprintf("machine-next-%d", width))
			axeClean(t, ctx)
			do(t, ctx, chromedp.Click(`//span[@class="next"]/button[text()="Decommission…"]`, chromedp.BySearch))
			eventually(t, ctx, "decommission chosen", `document.querySelector("form.actions input[value=decommission]").checked && document.activeElement.type === "submit"`)
			do(t, ctx, chromedp.Click(`form.actions input[value=activate]`), chromedp.Click(`form.actions button[type=submit]`))
			confirmDialog(t, ctx, "goes from FROZEN to ACTIVE")
			eventually(t, ctx, "freeze or decommission next", has("form.actions .next", "Freeze…")+" && !"+has("form.actions .next", "Activate…"))
		})
	}
}

// TestAPressLandsWhereTheOperatorAimed holds the pointer on the change
// form's button while the machine changes under it, as a person's pointer
// rests on a button before the press: the page reads the change (its
// details grow by the attributes the scheduler now reports) and the press
// still makes the change aimed at. A page that drew the change then would
// have moved the button from under the pointer.
func TestAPressLandsWhereTheOperatorAimed(t *testing.T) {
	for _, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			prefix := fmt.Sprintf("aimed-%d", width)
			ids := seed(t, prefix, 1, false)
			remove(t, ids)
			// Frozen with a pending change: the form offers activate.
			api(t, "POST", "/api/slaves/slave/"+ids[0]+"/freeze", `{"durationMillis":7200000,"revertToState":"ACTIVE"}`, 200)
			ctx := sized(t, width)
			open(t, ctx, site.URL, "#/machine/"+ids[0], "form.actions")
			eventually(t, ctx, "the pending change and activate chosen", has("main", "→ ACTIVE")+
				` && document.querySelector("form.actions input[value=activate]").checked`)
			x, y := aim(t, ctx, "form.actions button[type=submit]")

			attrs := []string{`"instance_type":"m5.4xlarge"`}
			for _, k := range []string{"ami", "kernel", "zone", "owner", "tier", "rotation"} {
				attrs = append(attrs, fmt.Sprintf("%q:%q", k, k+"-2026-12"))
			}
			reported := fmt.Sprintf(`{"machines":[{"id":%q,"host":"%s-node-0.example.com","rackId":"us-east-1a","attributes":{%s},"resources":{"cpus":16,"mem":63000},"runningTasks":2}]}`,
				ids[0], prefix, strings.Join(attrs, ","))
			if _, err := inventory.New(store, machine.NoLossBrake, quiet, nil).Handle(context.Background(), json.RawMessage(reported)); err != nil {
				t.Fatal(err)
			}
			// The page has read the change when it shows it, or says the
			// details it shows are about to change.
			eventually(t, ctx, "the page reading the new attributes", has("main", "rotation-2026-12")+` || document.querySelector("section[aria-labelledby=details-h]").ariaBusy === "true"`)
			shot(t, ctx, fmt.Sprintf("machine-aimed-held-%d", width))
			do(t, ctx, chromedp.MouseClickXY(x, y))
			confirmDialog(t, ctx, "goes from FROZEN to ACTIVE")
			eventually(t, ctx, "the change applied", has("form.actions", "is ACTIVE"))
			if h := api(t, "GET", "/api/slaves/slave/"+ids[0]+"/details", "", 200); !strings.Contains(h, `"ACTIVE"`) {
				t.Errorf("got %s, want ACTIVE", h)
			}
			// Once the pointer leaves, the page shows what it read.
			do(t, ctx, away())
			eventually(t, ctx, "the new attributes once the pointer left", has("main", "rotation-2026-12")+` && document.querySelector("section[aria-labelledby=details-h]").ariaBusy !== "true"`)
			shot(t, ctx, fmt.Sprintf("machine-aimed-%d", width))
		})
	}
}

// aim moves the pointer onto the middle of the element sel, as a person's
// hand does before the press, and says where it is.
func aim(t *testing.T, ctx context.Context, sel string) (x, y float64) {
	t.Helper()
	var at struct{ X, Y float64 }
	do(t, ctx, chromedp.ScrollIntoView(sel), chromedp.Evaluate(fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect();
		return {X: r.left + r.width / 2, Y: r.top + r.height / 2} })()`, sel), &at))
	do(t, ctx, chromedp.MouseEvent(input.MouseMoved, at.X, at.Y))
	return at.X, at.Y
}

func TestLogsShowTimesWithTheirZoneAndShortNames(t *testing.T) {
	for _, width := range widths {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx := sized(t, width)
			open(t, ctx, site.URL, "#/logs?by=task&task="+taskID+"&window=24h", "table.logs tbody tr")
			var times []string
			do(t, ctx, chromedp.Evaluate(`[...document.querySelectorAll("table.logs tbody tr:first-child time")].map(t => t.innerText)`, &times))
			if len(times) != 3 {
				t.Fatalf("got times %q, want last modified, start and end", times)
			}
			var zoned bool
			do(t, ctx, chromedp.Evaluate(fmt.Sprintf(`%q.split("|").every(s => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ([A-Z]{2,5}|GMT[+-][\d:]+)$/.test(s))`, strings.Join(times, "|")), &zoned))
			if !zoned {
				t.Errorf("got times %q, want 2026-11-24 01:46:00 UTC", times)
			}
			var name, key string
			do(t, ctx, chromedp.Text(`table.logs tbody tr:first-child span.file`, &name))
			if want := "service-119.log"; name != want { // the newest first
				t.Errorf("got file name %q, want %q", name, want)
			}
			eventually(t, ctx, "the full key hidden", `document.querySelector("table.logs tbody tr:first-child code.full").checkVisibility() === false`)
			do(t, ctx, chromedp.Click(`table.logs tbody tr:first-child summary`))
			eventually(t, ctx, "the full key shown", `document.querySelector("table.logs tbody tr:first-child code.full").checkVisibility()`)
			do(t, ctx, chromedp.Text(`table.logs tbody tr:first-child code.full`, &key))
			if !strings.Contains(key, taskID) || !strings.HasSuffix(key, "-"+name) {
				t.Errorf("got key %q, want the whole key of %s", key, name)
			}
			shot(t, ctx, fmt.Sprintf("logs-zone-%d", width))
			noSideways(t, ctx, width)
			axeClean(t, ctx)
		})
	}
}

// inFlight counts the changes the API is answering at once, and the most.
// Each change is held until want are in flight together (or for a long
// while, then no more), so that a page sending want at once is seen doing
// it however loaded the machine is.
type inFlight struct {
	mu        sync.Mutex
	now, most int
	want      int
	full      chan struct{} // closed once want were in flight, or the wait was given up
}

func newInFlight(want int) *inFlight { return &inFlight{want: want, full: make(chan struct{})} }

func (f *inFlight) fill() {
	select {
	case <-f.full:
	default:
		close(f.full)
	}
}

func (f *inFlight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.now++
		f.most = max(f.most, f.now)
		if f.now >= f.want {
			f.fill()
		}
		f.mu.Unlock()
		select {
		case <-f.full:
		case <-time.After(45 * time.Second): // a page that never sends want at once: most says so
			f.mu.Lock()
			f.fill()
			f.mu.Unlock()
		}
		// A moment more in flight: the window in which a page sending
		// more than want at once would be seen.
		time.Sleep(20 * time.Millisecond)
		h.ServeHTTP(w, r)
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	})
}

func TestBulkChangeSendsAFewAtATime(t *testing.T) {
	ids := seed(t, "lanes", 24, false)
	remove(t, ids)
	// Over HTTP/2, as API Gateway serves it, the browser does not cap the
	// requests to a host at 6: the page's own bound is what holds.
	lanes := newInFlight(8)
	srv := httptest.NewUnstartedServer(lanes.wrap(changes.wrap(faults.wrap(siteAPI))))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the browser's probes before it takes the test certificate
	srv.StartTLS()
	// The page holds a request to the change feed open until it closes:
	// the tab closes first (cleanups run last in, first out), then the
	// connections the browser keeps are cut, so Close waits for nothing.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	ctx := sized(t, 1440)
	do(t, ctx, security.SetIgnoreCertificateErrors(true))
	open(t, ctx, srv.URL, "#/fleet?q=lanes-", "table.fleet tbody tr")
	eventually(t, ctx, "24 rows", `document.querySelectorAll("table.fleet tbody tr").length === 24`)
	do(t, ctx, chromedp.Click(`//button[text()="Select all 24 matching"]`, chromedp.BySearch),
		chromedp.Click(`form.bulk input[value=activate]`), chromedp.Click(`form.bulk button[type=submit]`))
	confirmDialog(t, ctx, "Activate 24 machines?")
	// Every machine is ACTIVE already: 24 refusals, each a request.
	eventually(t, ctx, "every result", has("form.bulk", "0 applied, 24 refused"))
	lanes.mu.Lock()
	defer lanes.mu.Unlock()
	if lanes.most != lanes.want {
		t.Errorf("got at most %d changes in flight, want 8 (bounded, and in parallel)", lanes.most)
	}
}

// TestFleetFitsALaptopAtItsLongest fills every column with the longest
// values a fleet has (full machine ids, cloud host names, long users, the
// longest state, a pending change, capacity): at 1440 px the table still
// fits, cutting the host, user and message and wrapping the id, in the
// machine's own font and in fonts much wider.
func TestFleetFitsALaptopAtItsLongest(t *testing.T) {
	ui, err := console.New(console.Config{Auth: console.AuthNone})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().UnixMilli()
	var rows []string
	for i := range 12 {
		id := fmt.Sprintf("20261121-051400-16777343-5050-1234-S%06d", i)
		rows = append(rows, fmt.Sprintf(`{"id":%q,"firstSeenAt":1793491200000,"currentState":{"objectId":%q,"state":"STARTING_DECOMMISSION","timestamp":1793491200000,"user":"operations-oncall@example.com","message":"kernel upgrade on node-%06d with a long explanation of why"},"host":"ip-10-12-%d-17.us-east-1.compute.internal","rackId":"us-east-1a","attributes":{},"resources":{"cpus":96,"mem":786432},"runningTasks":1024}`, id, id, i, i))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/slaves":
			io.WriteString(w, "["+strings.Join(rows, ",")+"]")
		case "/api/slaves/expiring":
			fmt.Fprintf(w, `[{"machineId":"20261121-051400-16777343-5050-1234-S000001","user":"ops@example.com","startMillis":%d,"actionId":"a","revertToState":"ACTIVE","killTasksOnDecommissionTimeout":false,"expiringAPIRequestObject":{"message":"x","durationMillis":7200000,"revertToState":"ACTIVE","actionId":"a","killTasksOnDecommissionTimeout":false}}]`, due)
		default:
			ui.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close) // after the tab's
	ctx := sized(t, 1440)
	open(t, ctx, srv.URL, "#/fleet", "table.fleet tbody tr")
	shot(t, ctx, "fleet-longest-1440")
	noSideways(t, ctx, 1440)
	// The layout holds for any font, not only the one this machine has:
	// a font far wider than DejaVu, Liberation or the system's (every
	// letter a third of an em apart) cuts cells, and the table still fits.
	for _, wider := range []string{"table.fleet { letter-spacing: .12em }", "table.fleet { letter-spacing: .35em; font-family: monospace }"} {
		do(t, ctx, chromedp.Evaluate(`(() => { const s = new CSSStyleSheet(); s.replaceSync(`+strconv.Quote(wider)+`); document.adoptedStyleSheets = [s]; return true })()`, nil))
		noSideways(t, ctx, 1440)
	}
	shot(t, ctx, "fleet-longest-1440-wide-font")
}
