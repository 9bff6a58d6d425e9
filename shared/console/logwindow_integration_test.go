//go:build integration

package console_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/fleetops/fleet/shared/logkey"
)

// spreadLog is one log of a request, placed by its starttime and endtime
// (its key's time is its end, as the uploader writes it).
type spreadLog struct {
	name       string
	start, end time.Time
}

// putSpread uploads the logs of request, one task each.
func putSpread(t *testing.T, request string, logs []spreadLog) {
	t.Helper()
	format := defaultFormat()
	for i, l := range logs {
		task, err := logkey.ParseTaskID(fmt.Sprintf("%s-d1-%d-%d-node%d-us_east_1a", request, l.start.UnixMilli(), i, i))
		if err != nil {
			t.Fatal(err)
		}
		key := format.Key(logkey.File{Task: task, Filename: l.name + ".log", Modified: l.end})
		_, err = logStore.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(logBucket), Key: aws.String(key),
			Body:     strings.NewReader("log " + l.name + "\n"),
			Metadata: map[string]string{"starttime": strconv.FormatInt(l.start.UnixMilli(), 10), "endtime": strconv.FormatInt(l.end.UnixMilli(), 10)}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogWindowsNarrowerThanAMonth spreads a request's logs over a month
// and looks them up as a person does, in a browser whose clock is in
// Asia/Kolkata (UTC+05:30): the quick windows show only their logs, and a
// custom range typed in local time with the keyboard is sent as UTC and
// shows exactly the logs whose span overlaps it, to its edges.
func TestLogWindowsNarrowerThanAMonth(t *testing.T) {
	const request = "spread"
	now := time.Now()
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	from := ago(5 * time.Hour).Truncate(time.Minute).Add(17 * time.Second) // the custom range [from, to)
	to := from.Add(2 * time.Hour)
	putSpread(t, request, []spreadLog{
		{"within-15m", ago(12 * time.Minute), ago(8 * time.Minute)},
		{"within-hour", ago(40 * time.Minute), ago(35 * time.Minute)},
		{"across-the-hour", ago(75 * time.Minute), ago(50 * time.Minute)},
		{"before-the-hour", ago(100 * time.Minute), ago(65 * time.Minute)},
		{"ends-at-from", from.Add(-20 * time.Minute), from},
		{"inside-the-range", from.Add(30 * time.Minute), from.Add(40 * time.Minute)},
		{"starts-at-to", to, to.Add(5 * time.Minute)},
		{"after-the-range", to.Add(10 * time.Minute), to.Add(20 * time.Minute)},
		{"a-day-ago", ago(26 * time.Hour), ago(25 * time.Hour)},
		{"a-week-ago", ago(6*24*time.Hour + time.Hour), ago(6 * 24 * time.Hour)},
		{"weeks-ago", ago(25*24*time.Hour + time.Hour), ago(25 * 24 * time.Hour)},
	})
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}

	for _, width := range []int64{1440, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			ctx := sized(t, width)
			do(t, ctx, emulation.SetTimezoneOverride("Asia/Kolkata"), emulation.SetLocaleOverride().WithLocale("en-US"))
			open(t, ctx, site.URL, "#/logs", "form")
			do(t, ctx, chromedp.Click(`input[value=request]`), chromedp.SendKeys(`//label[text()="Request id"]/following-sibling::input`, request, chromedp.BySearch))
			find := func() {
				t.Helper()
				do(t, ctx, chromedp.Evaluate(`document.querySelector("main section").replaceChildren(); true`, nil),
					chromedp.Click(`//button[text()="Find logs"]`, chromedp.BySearch))
				eventually(t, ctx, "the logs", has("main section h2", "log")+" || "+has("main section", "No logs"))
			}
			shown := func() []string {
				t.Helper()
				var names []string
				do(t, ctx, chromedp.Evaluate(`[...document.querySelectorAll("table.logs td.key span.file")].map(s => s.innerText)`, &names))
				slices.Sort(names)
				return names
			}
			address := func() string {
				t.Helper()
				var url string
				do(t, ctx, chromedp.Location(&url))
				return url
			}

			for _, quick := range []struct {
				window string
				want   []string
			}{
				{"15m", []string{"within-15m.log"}},
				{"1h", []string{"across-the-hour.log", "within-15m.log", "within-hour.log"}},
			} {
				do(t, ctx, choose("main select", quick.window))
				find()
				if got := shown(); !slices.Equal(got, quick.want) {
					t.Errorf("window %s: got %q, want %q", quick.window, got, quick.want)
				}
				if url := address(); !strings.Contains(url, "window="+quick.window) {
					t.Errorf("window %s: got address %s, want the window in it", quick.window, url)
				}
			}
			shot(t, ctx, fmt.Sprintf("logs-window-1h-%d", width))

			// The keyboard picks the custom range, which starts as the hour
			// it replaces, then types its ends in local time.
			do(t, ctx, chromedp.Focus(`main select`), chromedp.KeyEvent("C"))
			eventually(t, ctx, "the custom range, filled with the last hour", `document.querySelector("main select").value === "custom" && !document.querySelector("fieldset.custom").hidden
				&& document.querySelectorAll("fieldset.custom input")[0].value !== ""`)
			for i, at := range []time.Time{from, to} {
				sel := fmt.Sprintf(`fieldset.custom .field:nth-child(%d) input`, i+1)
				local := at.In(kolkata)
				// The year takes up to six digits: the arrow moves on.
				do(t, ctx, clear(sel), chromedp.Focus(sel), chromedp.SendKeys(sel, local.Format("01022006")+kb.ArrowRight+local.Format("030405")+local.Format("PM")[:1]))
				var value string
				do(t, ctx, chromedp.Value(sel, &value))
				if want := local.Format("2006-01-02T15:04:05"); value != want {
					t.Fatalf("typed %s: got %q, want %q", sel, value, want)
				}
			}
			var zone, utc string
			do(t, ctx, chromedp.Text(`fieldset.custom .hint`, &zone), chromedp.Text(`fieldset.custom output`, &utc))
			if !regexp.MustCompile(`Asia/(Kolkata|Calcutta), UTC\+05:30`).MatchString(zone) { // ICU may name the zone by its older name
				t.Errorf("got %q, want the reader's zone named", zone)
			}
			if want := fmt.Sprintf("In UTC: %s to %s.", from.UTC().Format(time.DateTime), to.UTC().Format(time.DateTime)); utc != want {
				t.Errorf("got %q, want %q", utc, want)
			}
			do(t, ctx, chromedp.Focus(`fieldset.custom .field:nth-child(2) input`), chromedp.KeyEvent(kb.Enter))
			eventually(t, ctx, "the range's logs", has("main section h2", "log"))
			if got, want := shown(), []string{"ends-at-from.log", "inside-the-range.log"}; !slices.Equal(got, want) {
				t.Errorf("custom range: got %q, want %q", got, want)
			}
			if url, want := address(), fmt.Sprintf("start=%d&end=%d", from.UnixMilli(), to.UnixMilli()); !strings.Contains(url, want) {
				t.Errorf("got address %s, want it to hold %s", url, want)
			}
			shot(t, ctx, fmt.Sprintf("logs-window-custom-%d", width))
			noSideways(t, ctx, width)
			axeClean(t, ctx)

			// The address opens the same range in another tab.
			url := address()
			other := sized(t, width)
			do(t, other, emulation.SetTimezoneOverride("Asia/Kolkata"), chromedp.Navigate(url))
			eventually(t, other, "the range's logs", has("main section h2", "2 logs"))

			// A range that ends before it starts is said so, and a time
			// typed in part is refused by the browser: neither is sent.
			sent := changes.len()
			do(t, ctx, chromedp.SetValue(`fieldset.custom .field:nth-child(2) input`, from.Add(-time.Hour).In(kolkata).Format("2006-01-02T15:04:05")))
			do(t, ctx, chromedp.Click(`//button[text()="Find logs"]`, chromedp.BySearch))
			eventually(t, ctx, "the problem", has("main .problem", "From is not before its To"))
			first := `fieldset.custom .field:nth-child(1) input`
			do(t, ctx, clear(first), chromedp.Focus(first), chromedp.SendKeys(first, "11"), chromedp.Click(`//button[text()="Find logs"]`, chromedp.BySearch))
			eventually(t, ctx, "the part typed refused", `document.querySelector("`+first+`").matches(":invalid")`)
			if got := changes.since(sent); len(got) != 0 {
				t.Errorf("got %q sent, want nothing", got)
			}
		})
	}
}
