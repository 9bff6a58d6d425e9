// The time window of a log lookup: a quick choice that ends now (the last
// 15 minutes to the last 30 days) or a custom range whose ends are a date
// and time in the reader's zone. The service filters logs to the window
// exactly, so a window may be minutes wide. The address keeps the choice
// (window=1h), and a custom range as epoch ms (start, end), so a shared
// link names the same instants in any zone; the service gets epoch ms,
// which are UTC.

import { h, id } from "./dom.js";

const MINUTE = 60000, HOUR = 60 * MINUTE, DAY = 24 * HOUR;
const WINDOWS = [["15m", "Last 15 minutes", 15 * MINUTE], ["1h", "Last hour", HOUR], ["6h", "Last 6 hours", 6 * HOUR],
  ["24h", "Last 24 hours", DAY], ["7d", "Last 7 days", 7 * DAY], ["30d", "Last 30 days", 30 * DAY], ["custom", "Custom range…", 0]];

// windowPicker builds the window's controls from the address's params:
// select is the quick choice, custom the range's fieldset (shown for
// "Custom range…"). query() is what the address keeps; range(now) is the
// [start, end) to send, either end null for the service's default, and
// throws an Error that says what to fix. A time typed in part is the
// browser's to refuse: the form is not submitted while an input is invalid.
export function windowPicker(params) {
  const given = params.get("window");
  let previous = WINDOWS.some(([k]) => k === given) ? given : params.get("start") ? "custom" : "7d";
  const select = h("select", { onchange: changed }, WINDOWS.map(([k, l]) => h("option", { value: k, selected: k === previous }, l)));
  const zone = h("span", { id: id("zone") }, `Both in your time zone, ${zoneName()}.`);
  const input = (value) => h("input", { type: "datetime-local", step: 1, value: local(value), oninput: preview, "aria-describedby": zone.id });
  const from = input(params.get("start"));
  const to = input(params.get("end"));
  const utc = h("output", { class: "utc" });
  const labelled = (text, control) => h("div", { class: "field" }, h("label", { htmlFor: (control.id = id("f")) }, text), control);
  const custom = h("fieldset", { class: "custom" }, h("legend", {}, "Custom range"),
    h("div", { class: "row" }, labelled("From", from), labelled("To (empty for now)", to)), h("p", { class: "hint" }, zone, " ", utc));

  function changed() {
    const quick = WINDOWS.find(([k]) => k === previous);
    if (select.value === "custom" && !from.value && !to.value && quick && quick[2]) {
      // The range starts as the quick window it replaces, to the minute.
      const now = Math.floor(Date.now() / MINUTE) * MINUTE;
      from.value = local(now - quick[2]);
      to.value = local(now);
    }
    previous = select.value;
    sync();
  }

  function sync() {
    custom.hidden = select.value !== "custom";
    preview();
  }

  // preview says in UTC what the range sends, so the reader can check the
  // zone's conversion.
  function preview() {
    try {
      const r = range(Date.now());
      utc.value = `In UTC: ${r.start == null ? "the service's lookback" : iso(r.start)} to ${r.end == null ? "now" : iso(r.end)}.`;
    } catch (e) {
      utc.value = e.message + ".";
    }
  }

  function query() {
    if (select.value !== "custom") return { window: select.value };
    return { window: "custom", start: ms(from.value), end: ms(to.value) };
  }

  function range(now) {
    if (select.value !== "custom") {
      return { start: now - WINDOWS.find(([k]) => k === select.value)[2], end: now };
    }
    const start = ms(from.value), end = ms(to.value);
    if (start != null && start >= (end ?? now)) throw new Error("The custom range's From is not before its To");
    return { start, end };
  }

  sync();
  return { select, custom, query, range };
}

// zoneName is the reader's time zone as "Asia/Kolkata, UTC+05:30".
function zoneName() {
  const off = -new Date().getTimezoneOffset();
  const abs = Math.abs(off);
  const utc = `UTC${off < 0 ? "-" : "+"}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
  const name = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return name ? `${name}, ${utc}` : utc;
}

const iso = (t) => new Date(t).toISOString().slice(0, 19).replace("T", " ");

// local is epoch ms as a datetime-local value: the reader's wall clock.
function local(t) {
  if (t == null || t === "") return "";
  const d = new Date(Number(t));
  if (isNaN(d)) return "";
  return new Date(d.getTime() - d.getTimezoneOffset() * MINUTE).toISOString().slice(0, 19);
}

// ms is a datetime-local value, the reader's wall clock, as epoch ms (a
// date-time without an offset is local time to Date), null when empty.
const ms = (value) => (value ? new Date(value).getTime() : null);
