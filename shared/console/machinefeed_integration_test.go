//go:build integration

package console_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/shared/jobs"
)

// The machine page reads its machine once and then follows the change feed
// for that machine alone (docs/console.md "Machine"): another operator's
// changes, made with the Go client as a script makes them, show on the
// open page without a reload, and a change made from the page after one is
// conditioned on the sequence the feed brought.

// operator is another operator: the Go client on the API.
func operator(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Endpoint: site.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openMachine opens the page of machine id and waits until it follows the feed.
func openMachine(t *testing.T, ctx context.Context, base, id string) {
	t.Helper()
	open(t, ctx, base, "#/machine/"+id, "form.actions")
	eventually(t, ctx, "the live indicator", `document.querySelector(".live")?.dataset.state === "live" && `+has(".live", "Live"))
}

// holds waits until cond holds, or fails saying what was wanted.
func holds(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("got no %s", what)
		}
	}
}

func TestTheMachinePageShowsChangesAsTheyHappen(t *testing.T) {
	id := seed(t, fmt.Sprintf("machine-live-%d", time.Now().UnixNano()), 1, false)[0]
	other := operator(t)
	bg := context.Background()
	site := countedSite(t, "")
	ctx := tab(t)
	openMachine(t, ctx, site.URL, id)
	do(t, ctx, away())

	if err := other.FreezeSlave(bg, id, client.ChangeRequest{Message: "kernel upgrade, ticket OPS-7"}, client.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	took := within(t, ctx, "the freeze in the title, the details and the history",
		has("main .title", "FROZEN")+" && "+has("dl.facts", "kernel upgrade, ticket OPS-7")+" && "+
			has("ol.timeline li:first-child", "FROZEN")+" && "+has("ol.timeline li:first-child", "kernel upgrade, ticket OPS-7")+
			` && document.querySelectorAll("ol.timeline li").length === 2`)
	t.Logf("state change: shown after %v", took)
	shot(t, ctx, "machine-live-change")

	t.Run("a change after it is conditioned on the sequence it brought", func(t *testing.T) {
		seq := sequence(t, id)
		sent := site.sent()
		do(t, ctx, chromedp.Click(`form.actions input[value=activate]`), chromedp.SendKeys(`form.actions textarea`, "back to work"),
			chromedp.Click(`form.actions button[type=submit]`))
		confirmDialog(t, ctx, "goes from FROZEN to ACTIVE")
		eventually(t, ctx, "done", has("form.actions .result", "Done: "+id+" is ACTIVE")+" && "+has("ol.timeline li:first-child", "back to work"))
		want := []string{fmt.Sprintf(`POST /api/slaves/slave/%s/activate "%d"`, id, seq)}
		if got := site.matchesSince(sent); !slices.Equal(got, want) {
			t.Errorf("got changes with If-Match %q, want %q", got, want)
		}
	})

	// Before the expiry runs an hour ahead: its revert is stamped then, and
	// the report would be older than the machine's state.
	t.Run("a new description from a report", func(t *testing.T) {
		report(t, id)
		eventually(t, ctx, "the reported host and resources", has("main .title h1", strings.ToLower(id)+".example.com")+" && "+has("dl.facts", "31000"))
	})

	t.Run("an expiring change set, then reverted by the expiry", func(t *testing.T) {
		do(t, ctx, away())
		if err := other.FreezeSlave(bg, id, client.ChangeRequest{Message: "disk check", DurationMillis: 3600000, RevertToState: "ACTIVE"}, client.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "the pending return, in the title and the manage panel",
			has("main .title", "FROZEN")+" && "+has("main .title", "→ ACTIVE in 59m")+" && "+has(`section[aria-labelledby=manage-h]`, "Pending: → ACTIVE in 59m"))
		shot(t, ctx, "machine-live-expiring")
		runner := jobs.New(store, limits, 7*24*time.Hour, quiet, nil)
		runner.Now = func() time.Time { return time.Now().Add(61 * time.Minute) }
		if _, err := runner.Expire(bg); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "ACTIVE again without the pending return, the revert in the history",
			has("main .title", "ACTIVE")+` && !document.querySelector("main .pending") && !`+has("main", "Make permanent")+" && "+
				has("ol.timeline li:first-child", "Updated due to expiring action"))
	})

	t.Run("a deletion", func(t *testing.T) {
		if err := other.DeleteSlave(bg, id); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "the deletion said, every action off",
			has(`main .problem[role=alert]`, strings.ToLower(id)+".example.com was deleted")+
				` && [...document.querySelectorAll("form.actions button, form.actions input, form.actions select, form.actions textarea, section[aria-labelledby=manage-h] button")].every(e => e.disabled)`)
		shot(t, ctx, "machine-live-deleted")
		axeClean(t, ctx)
	})

	// Everything after the first read came from the feed.
	for _, route := range []string{"details", "history", "expiring"} {
		if n := site.count(route); n != 1 {
			t.Errorf("the page read %s %d times, want once", route, n)
		}
	}
	if n, m := site.count("changes"), site.count("changes id="+id); n != m {
		t.Errorf("the page asked the feed %d times, %d of them for its machine alone (id=), want every time", n, m)
	}
	if n := site.count("initial") + site.count("list"); n != 0 {
		t.Errorf("the page read the fleet %d times, want none", n)
	}
}

func TestLeavingTheMachinePageStopsItsRequests(t *testing.T) {
	ids := seed(t, fmt.Sprintf("machine-leave-%d", time.Now().UnixNano()), 1, false)
	remove(t, ids)
	id := ids[0]
	site := countedSite(t, "")
	ctx := tab(t)
	openMachine(t, ctx, site.URL, id)
	holds(t, "a feed request of the machine held open", func() bool { return site.opened(id) == 1 })
	// An address of the same document, as the console's links are.
	do(t, ctx, chromedp.Evaluate(`location.hash = "#/logs"; true`, nil))
	eventually(t, ctx, "the logs page", `document.querySelector("main form") !== null`)
	holds(t, "no feed request of the machine open", func() bool { return site.opened(id) == 0 })
	before := map[string]int{}
	routes := []string{"changes id=" + id, "details", "history", "expiring"}
	for _, r := range routes {
		before[r] = site.count(r)
	}
	// A change the page would have been told of, and read again after.
	api(t, "POST", "/api/slaves/slave/"+id+"/freeze", `{"message":"after the page was left"}`, http.StatusOK)
	time.Sleep(3 * time.Second) // a follow answers within a second, a retry comes within one
	for _, r := range routes {
		if n := site.count(r) - before[r]; n != 0 {
			t.Errorf("after the page was left it asked %s %d more times, want none", r, n)
		}
	}
}
