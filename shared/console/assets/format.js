// How times, durations and sizes read on every page.

const units = [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]];

// span formats a duration as its two largest units: "1h 12m", "3d 4h", "45s".
export function span(ms) {
  ms = Math.max(0, ms);
  const parts = [];
  for (const [u, size] of units) {
    const n = Math.floor(ms / size);
    if (n > 0 || (parts.length && parts.length < 2)) parts.push(n + u);
    ms -= n * size;
    if (parts.length === 2) break;
  }
  return parts.filter((p) => !p.startsWith("0")).join(" ") || "0s";
}

// ago is a past time relative to now: "5m ago".
export const ago = (t, now = Date.now()) => (now - t < 1000 ? "just now" : span(now - t) + " ago");

// The formats are made once, when first used or prepared, not when the
// module loads: the first costs the browser tens of milliseconds of
// locale data, which a page can spend while it waits for the network.
let exactFormat, stampFormat, numberFormat;

// prepare makes the formats of times and numbers now.
export function prepare() {
  exact(0);
  number(0);
}

// exact is a time as the reader's clock shows it, with its zone.
export function exact(t) {
  exactFormat ??= new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  });
  return exactFormat.format(new Date(t));
}

// stamp is a time as "2026-11-24 01:46:00 UTC": the reader's clock with
// its zone, in one shape on every row, sortable by eye.
export function stamp(t) {
  stampFormat ??= new Intl.DateTimeFormat("en-US", {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  });
  const p = Object.fromEntries(stampFormat.formatToParts(new Date(t)).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
}

// time is a <time> element reading relative, exact on hover, kept current
// by the page's clock (see tick in app.js).
export function time(t, rel = "ago") {
  const el = document.createElement("time");
  el.dateTime = new Date(t).toISOString();
  el.title = exact(t);
  el.dataset[rel] = t;
  el.textContent = rel === "ago" ? ago(t) : "in " + span(t - Date.now());
  return el;
}

export function size(bytes) {
  if (bytes < 1024) return bytes + " B";
  const u = ["KB", "MB", "GB", "TB"];
  let i = -1;
  do { bytes /= 1024; i++; } while (bytes >= 1024 && i < u.length - 1);
  return bytes.toFixed(bytes < 10 ? 1 : 0) + " " + u[i];
}

// number formats with one format made once (toLocaleString makes one a call).
export const number = (n) => (numberFormat ??= new Intl.NumberFormat()).format(n);

// stateLabel is a state as people say it: STARTING_DECOMMISSION → "starting decommission".
export const stateLabel = (s) => s.toLowerCase().replaceAll("_", " ");
