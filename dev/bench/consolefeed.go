package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fleetops/fleet/dev/browser"
)

// The console's figures of the change feed: what an open fleet page costs
// a minute at consoleFleet machines with 1% of them changing a minute,
// against listing the fleet every minute as it did before, and how long a
// feed answer takes from its arrival to its paint on that fleet (sorted by
// state, with a search: the changed rows put in their places in the order
// and the search index joined again).

// feedChangesPerMinute is 1% of consoleFleet changing a minute;
// feedAnswersPerMinute is how many answers carry them: the feed answers a
// held request as soon as a change exists and reads every half second.
const (
	feedChangesPerMinute = consoleFleet / 100
	feedAnswersPerMinute = 120
)

// syntheticChanges is an answer of the feed of n state changes from
// machine first of syntheticFleet on, as GET /api/slaves/changes answers
// them: each with its history entry, previous state and the slave.
func syntheticChanges(first, n int, state string) []byte {
	now := time.Now().UnixMilli()
	var b bytes.Buffer
	b.WriteString(`{"changes":[`)
	for i := first; i < first+n; i++ {
		if i > first {
			b.WriteByte(',')
		}
		id := fmt.Sprintf("20261121-051400-16777343-5050-1234-S%06d", i)
		entry := fmt.Sprintf(`{"objectId":%q,"state":%q,"timestamp":%d,"message":"lost by the scheduler's report"}`, id, state, now)
		fmt.Fprintf(&b, `{"slaveId":%q,"type":"stateChanged","timestamp":%d,"sequence":%d,"update":%s,"previousState":"ACTIVE","slave":{"id":%q,"firstSeenAt":%d,"currentState":%s,"host":"node-%06d.example.com","rackId":"us-east-1%c","attributes":{"instance_type":"m5.4xlarge","zone":"us-east-1%c"},"resources":{"cpus":16,"mem":63000,"disk":400000,"ports":"[31000-32000]"}}}`,
			id, now, now, entry, id, now-int64(i)*60000, entry, i, 'a'+rune(i%3), 'a'+rune(i%3))
	}
	// A cursor of the service's size: a version, the time, 16 shard
	// positions and a 16-byte MAC, in base64.
	b.WriteString(`],"cursor":"AYDk2c6LZwGq9QKr9QKs9QKt9QKu9QKv9QKw9QKx9QKy9QKz9QK09QK19QK29QK39QK49QK59QKTr3jFVr5QyYXM8xR0nG4"}`)
	return b.Bytes()
}

// feedBytes is what the feed answers a follower in a minute of
// feedChangesPerMinute changes: the JSON, and what goes on the wire (the
// API compresses answers of 4 KB and more, web's minGzip, when the browser
// accepts gzip).
func feedBytes() (raw, wire int) {
	for a := range feedAnswersPerMinute {
		n := feedChangesPerMinute / feedAnswersPerMinute
		if a < feedChangesPerMinute%feedAnswersPerMinute {
			n++
		}
		body := syntheticChanges(a*100, n, "DEAD")
		raw += len(body)
		if len(body) >= 4<<10 {
			wire += gzipSize(body)
		} else {
			wire += len(body)
		}
	}
	return raw, wire
}

// consoleFeedFigures measures the fleet page following a synthetic feed
// over the list of n machines: runs answers, the median of their paints.
func consoleFeedFigures(b *browser.Browser, ui http.Handler, n, runs int) ([]row, error) {
	list, initial, expiring := syntheticFleet(n)
	answers := make(chan []byte)
	mux := http.NewServeMux()
	mux.Handle("/", ui)
	mux.HandleFunc("GET /api/slaves", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Changes-Cursor", "bench")
		gzipped(list)(w, r)
	})
	mux.HandleFunc("GET /api/slaves/expiring", gzipped(expiring))
	// The feed holds each request until the bench hands it an answer,
	// or answers none after 20 s, as the service does.
	mux.HandleFunc("GET /api/slaves/changes", feedOf(initial, func(w http.ResponseWriter, r *http.Request) {
		body := []byte(`{"changes":[],"cursor":"bench"}`)
		select {
		case body = <-answers:
		case <-time.After(20 * time.Second):
		case <-r.Context().Done():
			return
		}
		gzipped(body)(w, r)
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, cancel := b.Tab()
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	if err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/#/fleet?sort=state&q=node-"), chromedp.WaitVisible(`table.fleet td[data-col=id]`)); err != nil {
		return nil, fmt.Errorf("the fleet page: %w", err)
	}
	if err := chromedp.Run(ctx, chromedp.Poll(`document.querySelector(".live")?.dataset.state === "live"`, nil, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		var state string
		_ = chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector(".live")?.dataset.state + " " + document.querySelector(".live")?.textContent`, &state))
		return nil, fmt.Errorf("the page following the feed (it says %q): %w", state, err)
	}
	perAnswer := feedChangesPerMinute / feedAnswersPerMinute
	var paints []time.Duration
	for i := range runs {
		// Each answer comes once the paints of the one before are over (the
		// page repaints at most once a second, and once more when the
		// changed rows' marks end after 3 s).
		if err := chromedp.Run(ctx, chromedp.Sleep(3500*time.Millisecond), chromedp.Evaluate(feedPainted, nil)); err != nil {
			return nil, err
		}
		// Each answer sends perAnswer ACTIVE machines to DEAD.
		select {
		case answers <- syntheticChanges(i*10*perAnswer, perAnswer, "DEAD"):
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("the page asked the feed nothing for 30 s")
		}
		var took float64
		if err := chromedp.Run(ctx, chromedp.Poll(`window.__feedPaint`, &took, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			return nil, fmt.Errorf("the paint of answer %d: %w", i, err)
		}
		paints = append(paints, time.Duration(took*float64(time.Millisecond)))
	}
	_ = chromedp.Run(ctx, chromedp.Evaluate(`localStorage.clear()`, nil))
	slices.Sort(paints)
	paint := paints[len(paints)/2]

	raw, wire := feedBytes()
	listWire := gzipSize(list) + gzipSize(expiring)
	return []row{
		{figure: fmt.Sprintf("an open fleet page a minute, %d slaves with %d changing a minute: the feed's %d answers (before: the list every minute, %.2f MB on the wire, %.1f MB JSON)",
			n, feedChangesPerMinute, feedAnswersPerMinute, float64(listWire)/1e6, float64(len(list)+len(expiring))/1e6),
			value: fmt.Sprintf("%.1f KB on the wire, %.1f KB JSON", float64(wire)/1024, float64(raw)/1024), target: "≤ 1/10 of the list", met: verdict(wire*10 <= listWire)},
		{figure: fmt.Sprintf("feed answer of %d changes to paint, %d slaves sorted by state with a search, median of %d", perAnswer, n, runs),
			value: ms(paint), target: "≤ 250 ms", met: verdict(paint <= 250*time.Millisecond)},
	}, nil
}

// feedPainted is run in the page before an answer: it notes the time from
// the end of the next feed answer's arrival to the frame painted after the
// page was drawn again: any element the answer changed (rows put in or
// taken out, the counts per state; the page draws only what changed),
// but for the clock's ticks, which rewrite <time> elements every second.
const feedPainted = `(() => {
  window.__feedPaint = undefined;
  const answers = () => performance.getEntriesByType("resource").filter((r) => r.name.includes("/api/slaves/changes"));
  const seen = answers().length;
  new MutationObserver((records, obs) => {
    const answer = answers()[seen];
    if (!answer || records.every((r) => r.target.closest?.("time"))) return;
    obs.disconnect();
    requestAnimationFrame(() => setTimeout(() => { window.__feedPaint = performance.now() - answer.responseEnd; }));
  }).observe(document.body, {childList: true, subtree: true});
  return true;
})()`
