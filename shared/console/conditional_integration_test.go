//go:build integration

package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/client"
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

// A delete or a "make permanent" from a machine page that did not see
// another operator's change (its feed blocked by the test's server, so the
// page still shows the machine as it opened it) is refused in words, and
// nothing is done on the server.
func TestADeleteOrMakePermanentOfAMachineThatMovedMeanwhileIsRefusedInWords(t *testing.T) {
	for _, c := range []struct {
		name string
		// before is made through the API before the page opens, other by
		// the other operator while it does not follow.
		before, other   func(t *testing.T, id string)
		button, confirm string
		path            string // the page's change
		now             string // the state the words say
	}{{
		name:   "delete",
		other:  func(t *testing.T, id string) { freezeBy(t, id, client.ChangeRequest{Message: "the other operator"}) },
		button: "Delete machine…", confirm: "removes the machine, its whole history",
		path: "DELETE /api/slaves/slave/%s", now: "FROZEN",
	}, {
		name: "make permanent",
		before: func(t *testing.T, id string) {
			freezeBy(t, id, client.ChangeRequest{Message: "disk check", DurationMillis: 3600000, RevertToState: "ACTIVE"})
		},
		other: func(t *testing.T, id string) {
			if err := operator(t).DecommissionSlave(context.Background(), id, client.ChangeRequest{Message: "the other operator"}, client.ChangeOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		button: "Make permanent", confirm: "the pending return to ACTIVE is cancelled",
		path: "DELETE /api/slaves/slave/%s/expiring", now: "STARTING_DECOMMISSION",
	}} {
		t.Run(c.name, func(t *testing.T) {
			ids := seed(t, "movedmanage", 1, false)
			remove(t, ids)
			id := ids[0]
			host := "movedmanage-node-0.example.com"
			if c.before != nil {
				c.before(t, id)
			}
			site := countedSite(t, "")
			ctx := tab(t)
			openMachine(t, ctx, site.URL, id)
			eventually(t, ctx, "the button", has("section[aria-labelledby=manage-h] button", c.button))
			seen := sequence(t, id)
			history := api(t, "GET", "/api/slaves/slave/"+id, "", 200)
			expiring := expiringOf(t, id)

			site.block(true)
			c.other(t, id)
			// The request the page held open comes back without the change.
			eventually(t, ctx, "the page not following", `document.querySelector(".live")?.dataset.state === "reconnecting"`)
			if h := api(t, "GET", "/api/slaves/slave/"+id, "", 200); h == history {
				t.Fatal("the other operator's change is not in the history")
			}
			var shown string
			do(t, ctx, chromedp.Evaluate(`document.querySelector("main .title").innerText`, &shown))
			if strings.Contains(shown, c.now) {
				t.Fatalf("the page showed the other operator's change (%q): it followed", shown)
			}

			sent := site.sent()
			do(t, ctx, chromedp.Click(fmt.Sprintf(`//section[@aria-labelledby="manage-h"]//button[text()=%q]`, c.button), chromedp.BySearch))
			confirmDialog(t, ctx, c.confirm)
			eventually(t, ctx, "the refusal in words", has("section[aria-labelledby=manage-h] .result",
				host+" changed since you opened this page: it is now "+c.now+". Nothing was done; review it and try again."))
			eventually(t, ctx, "the machine as it is now", has("main .title", c.now)+" && "+has("ol.timeline li:first-child", "the other operator"))
			do(t, ctx, away(), chromedp.ScrollIntoView("section[aria-labelledby=manage-h] .result"))
			shot(t, ctx, "machine-moved-"+strings.ReplaceAll(c.name, " ", "-"))
			want := []string{fmt.Sprintf(c.path+` "%d"`, id, seen)}
			if got := site.matchesSince(sent); !slices.Equal(got, want) {
				t.Errorf("got changes with If-Match %q, want the page's with the sequence it showed: %q", got, want)
			}
			// Nothing was done: the machine is there as the other operator
			// left it, with its pending change.
			now, err := operator(t).GetSlave(context.Background(), id)
			if err != nil {
				t.Fatalf("the machine after the refusal: %v", err)
			}
			if string(now.CurrentState.State) != c.now || now.CurrentState.Message != "the other operator" {
				t.Errorf("got %s (%q), want %s as the other operator left it", now.CurrentState.State, now.CurrentState.Message, c.now)
			}
			var entries []json.RawMessage
			if err := json.Unmarshal([]byte(api(t, "GET", "/api/slaves/slave/"+id, "", 200)), &entries); err != nil || len(entries) != strings.Count(history, `"state"`)+1 {
				t.Errorf("got history %s (%v), want the entries before and the other operator's", entries, err)
			}
			if got := expiringOf(t, id); got != expiring {
				t.Errorf("got expiring change %q, want %q as before", got, expiring)
			}
		})
	}
}

// freezeBy freezes machine id as the other operator, with the Go client.
func freezeBy(t *testing.T, id string, req client.ChangeRequest) {
	t.Helper()
	if err := operator(t).FreezeSlave(context.Background(), id, req, client.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
}

// expiringOf is machine id's pending change as the API lists it ("" for none).
func expiringOf(t *testing.T, id string) string {
	t.Helper()
	list, err := operator(t).ListExpiring(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range list {
		if x.MachineID == id {
			return fmt.Sprintf("→ %s after %d ms from %d", x.RevertToState, x.Request.DurationMillis, x.StartMillis)
		}
	}
	return ""
}
