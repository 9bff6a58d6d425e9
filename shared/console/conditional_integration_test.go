//go:build integration

package console_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Two operators at once (docs/behaviour.md "Conditional changes"): a
// change asked for from a page is made only on the machine as the page
// showed it. Another operator's change lands while the confirmation is
// open, the first operator confirms, and the page says in words that the
// machine moved and what it is now; nothing is done to it.

// sequence is the machine's sequence as its details say.
func sequence(t *testing.T, id string) int64 {
	t.Helper()
	var s struct{ Sequence int64 }
	if err := json.Unmarshal([]byte(api(t, "GET", "/api/slaves/slave/"+id+"/details", "", 200)), &s); err != nil {
		t.Fatal(err)
	}
	return s.Sequence
}

func TestAChangeToAMachineThatMovedMeanwhileIsRefusedInWords(t *testing.T) {
	t.Run("the machine page", func(t *testing.T) {
		ids := seed(t, "moved", 1, false)
		remove(t, ids)
		id := ids[0]
		seen := sequence(t, id)
		ctx := tab(t)
		open(t, ctx, site.URL, "#/machine/"+id, "form.actions")
		eventually(t, ctx, "details", has("main", "moved-node-0.example.com"))
		sent := changes.len()
		do(t, ctx, chromedp.Click(`form.actions input[value=freeze]`), chromedp.SendKeys(`form.actions textarea`, "from the page"),
			chromedp.Click(`form.actions button[type=submit]`))
		eventually(t, ctx, "the confirmation", has("dialog.confirm", "goes from ACTIVE to FROZEN"))
		// Meanwhile the other operator freezes it.
		api(t, "POST", "/api/slaves/slave/"+id+"/freeze", `{"message":"the other operator"}`, 200)
		do(t, ctx, chromedp.Click("dialog.confirm button[value=ok]"))
		eventually(t, ctx, "the refusal in words", has("form.actions .result",
			"moved-node-0.example.com changed since you opened this page: it is now FROZEN. Nothing was done; review it and try again."))
		eventually(t, ctx, "the machine as it is now", has("main .title", "FROZEN")+" && "+has("ol.timeline li:first-child", "the other operator"))
		do(t, ctx, away(), chromedp.ScrollIntoView("form.actions .result"))
		shot(t, ctx, "machine-moved")
		axeClean(t, ctx)
		want := []string{"POST /api/slaves/slave/" + id + "/freeze ", fmt.Sprintf(`POST /api/slaves/slave/%s/freeze "%d"`, id, seen)}
		if got := changes.matchesSince(sent); !slices.Equal(got, want) {
			t.Errorf("got changes with If-Match %q, want the other operator's without and the page's with the sequence it showed: %q", got, want)
		}
		if h := api(t, "GET", "/api/slaves/slave/"+id, "", 200); strings.Contains(h, "from the page") || strings.Count(h, `"FROZEN"`) != 1 {
			t.Errorf("got history %s, want the other operator's freeze only", h)
		}
		// Asked again from the page as it is now, the change is made.
		do(t, ctx, chromedp.Click(`form.actions input[value=activate]`), chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "goes from FROZEN to ACTIVE")
		eventually(t, ctx, "done", has("form.actions .result", "Done: "+id+" is ACTIVE"))
	})

	t.Run("a bulk change says which machines moved", func(t *testing.T) {
		ids := seed(t, "bulkmoved", 3, false)
		remove(t, ids)
		ctx := sized(t, 1440)
		open(t, ctx, site.URL, "#/fleet?q=bulkmoved-", "table.fleet tbody tr")
		eventually(t, ctx, "3 rows, live", `document.querySelectorAll("table.fleet tbody tr[data-id]").length === 3 && document.querySelector(".live")?.dataset.state === "live"`)
		do(t, ctx, chromedp.Click(`//button[text()="Select all 3 matching"]`, chromedp.BySearch))
		eventually(t, ctx, "3 selected", has(".selectbar", "3 selected"))
		do(t, ctx, chromedp.Click(`form.bulk input[value=freeze]`), chromedp.SendKeys(`form.bulk textarea`, "rack power work"),
			choose(`form.bulk select`, "3600000"), chromedp.Click(`form.bulk button[type=submit]`))
		eventually(t, ctx, "the confirmation", has("dialog.confirm", "Freeze 3 machines?"))
		api(t, "POST", "/api/slaves/slave/"+ids[1]+"/freeze", `{"message":"the other operator"}`, 200)
		do(t, ctx, chromedp.Click("dialog.confirm button[value=ok]"))
		eventually(t, ctx, "every result", has("form.bulk",
			"2 applied, 0 refused, 0 held back by the guard. 1 changed since this page showed it: nothing was done to it; review and try again."))
		eventually(t, ctx, "the machine that moved, in words", has(fmt.Sprintf(`li[data-id=%q]`, ids[1]), "Changed meanwhile: it is now FROZEN. Nothing was done to it."))
		for _, id := range []string{ids[0], ids[2]} {
			eventually(t, ctx, id+" applied", has(fmt.Sprintf(`li[data-id=%q]`, id), "applied: FROZEN"))
		}
		do(t, ctx, away())
		shot(t, ctx, "fleet-bulk-moved")
		if h := api(t, "GET", "/api/slaves/slave/"+ids[1], "", 200); strings.Contains(h, "rack power work") {
			t.Errorf("got history %s, want nothing of the bulk change", h)
		}
		// The next change, asked for from the page as the run and the
		// feed left it (the pending returns set with the freezes), finds
		// nothing moved.
		do(t, ctx, chromedp.Click(`//form[contains(@class,"bulk")]//button[text()="Activate…"]`, chromedp.BySearch))
		eventually(t, ctx, "the 2 applied selected for activate", has(".selectbar", "2 selected")+` && document.querySelector("form.bulk input[value=activate]").checked`)
		do(t, ctx, chromedp.Click(`form.bulk button[type=submit]`))
		confirmDialog(t, ctx, "Activate 2 machines?")
		eventually(t, ctx, "both activated", has("form.bulk", "2 applied, 0 refused, 0 held back by the guard.")+` && !`+has("form.bulk", "changed since"))
	})
}
