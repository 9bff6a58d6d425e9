//go:build integration

package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/dev/browser"
)

// axe is axe-core, vendored for these tests (testdata/axe/README.md).
func axe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "axe", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEveryPageLooksRightAndPassesAxe saves a screenshot of every page in
// the light and dark themes at 360 and 1440 px (bin/console-screenshots),
// and runs axe-core on each: no serious or critical violation is allowed.
func TestEveryPageLooksRightAndPassesAxe(t *testing.T) {
	ids := seed(t, "demo", 14, false)
	dead := seed(t, "demo-lost", 2, true)
	t.Cleanup(func() {
		for _, id := range append(ids, dead...) {
			api(t, "DELETE", "/api/slaves/slave/"+id, "", 200)
		}
	})
	m := ids[1]
	api(t, "POST", "/api/slaves/slave/"+m+"/freeze", `{"message":"disk errors on /dev/nvme1, waiting for a replacement"}`, 200)
	api(t, "POST", "/api/slaves/slave/"+m+"/activate", `{"message":"disk replaced"}`, 200)
	api(t, "POST", "/api/slaves/slave/"+m+"/freeze", `{"message":"kernel upgrade","durationMillis":7200000,"revertToState":"ACTIVE"}`, 200)
	api(t, "POST", "/api/slaves/slave/"+ids[4]+"/freeze", `{"message":"noisy neighbour"}`, 200)
	api(t, "POST", "/api/slaves/slave/"+ids[6]+"/decommission", `{"message":"end of lease"}`, 200)
	api(t, "POST", "/api/slaves/slave/"+ids[9]+"/freeze", `{"message":"rack maintenance","durationMillis":14400000,"revertToState":"ACTIVE"}`, 200)
	defer api(t, "POST", "/api/slaves/slave/"+ids[6]+"/activate", "", 200)

	pages := []struct{ name, route, ready string }{
		{"fleet", "#/fleet?q=demo", "table.fleet tbody tr"},
		{"machine", "#/machine/" + m, "ol.timeline li"},
		{"expiring", "#/expiring", "table.grid tbody tr"},
		{"logs", "#/logs?by=task&task=" + taskID + "&window=24h", "table.logs tbody tr"},
		{"logs-form", "#/logs", "form"},
	}
	script := axe(t)
	for _, p := range pages {
		for _, scheme := range []string{"light", "dark"} {
			for _, width := range []int64{360, 1440} {
				t.Run(fmt.Sprintf("%s %s %d", p.name, scheme, width), func(t *testing.T) {
					ctx := tab(t)
					do(t, ctx, browser.Look(width, scheme))
					open(t, ctx, site.URL, p.route, p.ready)
					do(t, ctx, chromedp.Evaluate(`document.fonts.ready.then(() => true)`, nil, withAwait),
						browser.Screenshot(filepath.Join(shots, fmt.Sprintf("%s-%s-%d.png", p.name, scheme, width))))
					var wide bool
					do(t, ctx, chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth + 1`, &wide))
					if wide {
						t.Errorf("the page is wider than the %d px window: it scrolls sideways", width)
					}
					var violations []string
					do(t, ctx, chromedp.Evaluate(script+`;true`, nil), chromedp.Evaluate(`axe.run(document, {resultTypes: ["violations"]}).then(r =>
						r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
							.map(v => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ")))`, &violations, withAwait))
					if len(violations) > 0 {
						t.Errorf("axe-core found:\n%s", strings.Join(violations, "\n"))
					}
				})
			}
		}
	}
}
